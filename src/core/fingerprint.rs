//! A SendMessage's fingerprint, for idempotent SendMessage (`idempotent.rs`): the SHA-256 of
//! a canonical form of what the agent is given — the message and the request's metadata.
//!
//! Not the protobuf encoding: prost writes a `Struct` (message, part and request metadata, a
//! data part's objects) in its `HashMap`'s order, which differs between two decodes of the
//! same bytes, let alone between replicas. The canonical form writes every field in field
//! order, each tagged and length-prefixed (so no two messages meet), a Struct's entries
//! sorted by key, and an empty Struct as no Struct (one SDK writes `"metadata": {}` where
//! another leaves it out). Every binding decodes into the same types, so a message retried
//! over JSON-RPC after gRPC has the same fingerprint.
//!
//! Left out: the tenant (part of the record's key), and the configuration (history length,
//! blocking, output modes, push config, `ifGenerationMatch`): it shapes the answer or is
//! checked when the message first runs, and a retry may spell it differently. A test holds
//! the fields below to the descriptors, so a field added to the proto fails it until it is
//! written here.
use aws_lc_rs::digest::{Context, SHA256};
use pbjson_types::{Struct, Value, value::Kind};

use crate::proto::{Message, Part, part};
use crate::task::store::Fingerprint;

/// The fingerprint of `message` sent with the request's `metadata`.
pub(crate) fn fingerprint(message: &Message, metadata: Option<&Struct>) -> Fingerprint {
    let mut hasher = Canonical(Context::new(&SHA256));
    hasher.message(message);
    hasher.structure(7, metadata);
    let mut out = [0; 32];
    out.copy_from_slice(hasher.0.finish().as_ref());
    out
}

/// The canonical form, written into a digest.
struct Canonical(Context);

impl Canonical {
    fn tag(&mut self, tag: u8) {
        self.0.update(&[tag]);
    }

    fn len(&mut self, len: usize) {
        self.0.update(&(len as u64).to_le_bytes());
    }

    fn bytes(&mut self, tag: u8, bytes: &[u8]) {
        self.tag(tag);
        self.len(bytes.len());
        self.0.update(bytes);
    }

    fn int(&mut self, tag: u8, value: i64) {
        self.tag(tag);
        self.0.update(&value.to_le_bytes());
    }

    fn strings(&mut self, tag: u8, values: &[String]) {
        self.tag(tag);
        self.len(values.len());
        for value in values {
            self.bytes(0, value.as_bytes());
        }
    }

    /// `lf.a2a.v1.Message`, fields 1 to 8.
    fn message(&mut self, m: &Message) {
        self.bytes(1, m.message_id.as_bytes());
        self.bytes(2, m.context_id.as_bytes());
        self.bytes(3, m.task_id.as_bytes());
        self.int(4, m.role.into());
        self.tag(5);
        self.len(m.parts.len());
        for p in &m.parts {
            self.part(p);
        }
        self.structure(6, m.metadata.as_ref());
        self.strings(7, &m.extensions);
        self.strings(8, &m.reference_task_ids);
    }

    /// `lf.a2a.v1.Part`, fields 1 to 7 (the first four a oneof).
    fn part(&mut self, p: &Part) {
        match &p.content {
            None => self.tag(0),
            Some(part::Content::Text(text)) => self.bytes(1, text.as_bytes()),
            Some(part::Content::Raw(raw)) => self.bytes(2, raw),
            Some(part::Content::Url(url)) => self.bytes(3, url.as_bytes()),
            Some(part::Content::Data(data)) => {
                self.tag(4);
                self.value(data);
            }
        }
        self.structure(5, p.metadata.as_ref());
        self.bytes(6, p.filename.as_bytes());
        self.bytes(7, p.media_type.as_bytes());
    }

    /// A Struct, its entries sorted by key; an empty one as none.
    fn structure(&mut self, tag: u8, value: Option<&Struct>) {
        self.tag(tag);
        let Some(value) = value.filter(|s| !s.fields.is_empty()) else {
            return self.len(0);
        };
        let mut entries: Vec<(&String, &Value)> = value.fields.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        self.len(entries.len());
        for (key, value) in entries {
            self.bytes(0, key.as_bytes());
            self.value(value);
        }
    }

    fn value(&mut self, value: &Value) {
        match &value.kind {
            None => self.tag(0),
            Some(Kind::NullValue(_)) => self.tag(1),
            Some(Kind::NumberValue(n)) => self.int(2, n.to_bits() as i64),
            Some(Kind::StringValue(s)) => self.bytes(3, s.as_bytes()),
            Some(Kind::BoolValue(b)) => self.int(4, (*b).into()),
            // An empty object stays apart from null and from no value by its own tag.
            Some(Kind::StructValue(s)) => self.structure(5, Some(s)),
            Some(Kind::ListValue(list)) => {
                self.tag(6);
                self.len(list.values.len());
                for value in &list.values {
                    self.value(value);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Role, SendMessageRequest};

    fn object(entries: &[(&str, Value)]) -> Struct {
        Struct { fields: entries.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect() }
    }

    fn message() -> Message {
        let data = Value::from(object(&[("n", 1.5.into()), ("list", Value::from(vec![Value::from(true)]))]));
        Message {
            message_id: "m".into(),
            role: Role::User as i32,
            parts: vec![
                Part { content: Some(part::Content::Text("hi".into())), ..Default::default() },
                Part { content: Some(part::Content::Data(data)), ..Default::default() },
            ],
            metadata: Some(object(&[("a", "1".into()), ("b", 2.0.into()), ("c", true.into())])),
            ..Default::default()
        }
    }

    /// The same message decoded again (its Structs rebuilt, in another map order) has the same
    /// fingerprint; every change to it, another.
    #[test]
    fn equal_messages_agree_and_any_change_differs() {
        let one = message();
        let again = {
            let mut m = message();
            // The same entries inserted the other way round into a larger map: prost may well
            // encode them in another order; the fingerprint must not care.
            let mut fields = std::collections::HashMap::with_capacity(64);
            fields.extend(
                [("c", true.into()), ("b", 2.0.into()), ("a", "1".into())].map(|(k, v)| (k.to_owned(), v)),
            );
            m.metadata = Some(Struct { fields });
            m
        };
        assert_eq!(fingerprint(&one, None), fingerprint(&again, None));
        let empty = Struct::default();
        assert_eq!(fingerprint(&one, None), fingerprint(&one, Some(&empty)), "{{}} is no metadata");

        let mut changes: Vec<Message> = Vec::new();
        let mut change = |f: &dyn Fn(&mut Message)| {
            let mut m = message();
            f(&mut m);
            changes.push(m);
        };
        change(&|m| m.message_id = "n".into());
        change(&|m| m.context_id = "c".into());
        change(&|m| m.task_id = "t".into());
        change(&|m| m.role = Role::Agent as i32);
        change(&|m| drop(m.parts.pop()));
        change(&|m| m.parts[0].content = Some(part::Content::Text("ho".into())));
        change(&|m| m.parts[0].content = Some(part::Content::Url("hi".into())));
        change(&|m| m.parts[0].content = Some(part::Content::Raw(b"hi".to_vec())));
        change(&|m| m.parts[0].filename = "f".into());
        change(&|m| m.parts[0].media_type = "text/plain".into());
        change(&|m| m.parts[0].metadata = Some(object(&[("k", Value::from(false))])));
        change(&|m| m.metadata = None);
        change(&|m| m.extensions = vec!["e".into()]);
        change(&|m| m.reference_task_ids = vec!["r".into()]);
        change(&|m| m.parts[1].content = Some(part::Content::Data(Value::from(Struct::default()))));
        change(&|m| m.parts[1].content = Some(part::Content::Data(Value::from(Vec::<Value>::new()))));
        let mut seen = vec![fingerprint(&one, None)];
        for (i, m) in changes.iter().enumerate() {
            let print = fingerprint(m, None);
            assert!(!seen.contains(&print), "change {i} is seen as the same message");
            seen.push(print);
        }
        let metadata = object(&[("trace", "x".into())]);
        assert_ne!(fingerprint(&one, Some(&metadata)), fingerprint(&one, None), "request metadata counts");
    }

    /// A field added to the proto must be written by the canonical form (or left out on
    /// purpose, here) before this passes again.
    #[test]
    fn the_canonical_form_covers_every_field_the_descriptors_have() {
        let numbers = |descriptor: prost_reflect::MessageDescriptor| {
            let mut numbers: Vec<u32> = descriptor.fields().map(|f| f.number()).collect();
            numbers.sort_unstable();
            numbers
        };
        assert_eq!(numbers(crate::protojson::descriptor::<Message>()), (1..=8).collect::<Vec<_>>());
        assert_eq!(numbers(crate::protojson::descriptor::<Part>()), (1..=7).collect::<Vec<_>>());
        // tenant (the key), message, configuration (left out: see the module doc), metadata.
        assert_eq!(numbers(crate::protojson::descriptor::<SendMessageRequest>()), [1, 2, 3, 4]);
    }
}
