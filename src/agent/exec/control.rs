//! The control protocol (documented on the [`exec`](super) module): stdout lines that start
//! with the control prefix followed by one JSON object are instructions to the server.
use serde_json::{Map, Value};

use super::output::STDOUT_ARTIFACT;
use crate::proto::{Artifact, Part, part};
use crate::protojson;

/// One instruction from the command.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Control {
    /// WORKING, with an optional message.
    Status(Option<String>),
    /// An artifact or a chunk of one.
    Artifact { artifact: Artifact, append: bool, last_chunk: bool },
    /// INPUT_REQUIRED, with an optional question.
    InputRequired(Option<String>),
    /// AUTH_REQUIRED, with an optional explanation.
    AuthRequired(Option<String>),
}

const ACTIONS: [&str; 5] = ["status", "artifact", "data", "inputRequired", "authRequired"];

/// The JSON of a control line, or `None` if `line` is output. An empty prefix turns the
/// protocol off.
pub(crate) fn control_json<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    if prefix.is_empty() {
        return None;
    }
    let json = line.strip_prefix(prefix)?.trim_start();
    json.starts_with('{').then_some(json)
}

/// Parses the JSON of a control line; the reason when it is not a valid instruction.
pub(crate) fn parse(json: &str) -> Result<Control, String> {
    let mut object: Map<String, Value> =
        serde_json::from_str(json).map_err(|e| format!("not a JSON object: {e}"))?;
    let present: Vec<&str> = ACTIONS.iter().copied().filter(|key| object.contains_key(*key)).collect();
    let action = match present.as_slice() {
        [action] => *action,
        [] => return Err(format!("expected one of the keys {}", ACTIONS.join(", "))),
        several => return Err(format!("one action per line, found {}", several.join(" and "))),
    };
    let value = object.remove(action).unwrap_or(Value::Null);
    let allowed: &[&str] = match action {
        "artifact" => &["append", "lastChunk"],
        "data" => &["name"],
        _ => &[],
    };
    if let Some(unknown) = object.keys().find(|key| !allowed.contains(&key.as_str())) {
        return Err(format!("unknown key {unknown:?} next to {action:?}"));
    }
    match action {
        "status" => Ok(Control::Status(optional_text(action, value)?)),
        "inputRequired" => Ok(Control::InputRequired(optional_text(action, value)?)),
        "authRequired" => Ok(Control::AuthRequired(optional_text(action, value)?)),
        "artifact" => {
            let mut artifact: Artifact =
                protojson::decode_strict(&value).map_err(|e| format!("invalid artifact: {e}"))?;
            if artifact.artifact_id.is_empty() {
                artifact.artifact_id = match artifact.name.as_str() {
                    "" => crate::proto::new_id(),
                    name => name.to_owned(),
                };
            }
            if artifact.artifact_id == STDOUT_ARTIFACT {
                return Err(format!("the artifact id {STDOUT_ARTIFACT:?} is reserved for the output"));
            }
            let append = flag(&object, "append")?;
            let last_chunk = flag(&object, "lastChunk")?;
            Ok(Control::Artifact { artifact, append, last_chunk })
        }
        _ => {
            let data: pbjson_types::Value =
                serde_json::from_value(value).map_err(|e| format!("invalid data: {e}"))?;
            let name = match object.get("name") {
                None => "data".to_owned(),
                Some(Value::String(name)) => name.clone(),
                Some(_) => return Err("\"name\" must be a string".into()),
            };
            let part = Part { content: Some(part::Content::Data(data)), ..Default::default() };
            let artifact = Artifact {
                artifact_id: crate::proto::new_id(),
                name,
                parts: vec![part],
                ..Default::default()
            };
            Ok(Control::Artifact { artifact, append: false, last_chunk: true })
        }
    }
}

fn optional_text(action: &str, value: Value) -> Result<Option<String>, String> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(text)),
        _ => Err(format!("{action:?} takes a string or null")),
    }
}

fn flag(object: &Map<String, Value>, key: &str) -> Result<bool, String> {
    match object.get(key) {
        None => Ok(false),
        Some(Value::Bool(flag)) => Ok(*flag),
        Some(_) => Err(format!("{key:?} must be true or false")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_control_lines() {
        assert_eq!(control_json(r#"@a2a {"status":"x"}"#, "@a2a"), Some(r#"{"status":"x"}"#));
        assert_eq!(control_json(r#"@a2a{"status":"x"}"#, "@a2a"), Some(r#"{"status":"x"}"#));
        assert_eq!(control_json("@a2alpha", "@a2a"), None);
        assert_eq!(control_json("@a2a is great", "@a2a"), None);
        assert_eq!(control_json(r#"{"status":"x"}"#, ""), None, "an empty prefix turns it off");
    }

    #[test]
    fn parses_every_action() {
        assert_eq!(parse(r#"{"status": "busy"}"#), Ok(Control::Status(Some("busy".into()))));
        assert_eq!(parse(r#"{"status": null}"#), Ok(Control::Status(None)));
        assert_eq!(parse(r#"{"inputRequired": "name?"}"#), Ok(Control::InputRequired(Some("name?".into()))));
        assert_eq!(parse(r#"{"authRequired": null}"#), Ok(Control::AuthRequired(None)));

        let Ok(Control::Artifact { artifact, append, last_chunk }) =
            parse(r#"{"artifact": {"name": "sum", "parts": [{"text": "hi"}]}, "append": true}"#)
        else {
            panic!("not an artifact");
        };
        assert_eq!(
            (artifact.artifact_id.as_str(), artifact.name.as_str(), append, last_chunk),
            ("sum", "sum", true, false)
        );
        assert_eq!(artifact.parts[0].content, Some(part::Content::Text("hi".into())));

        let Ok(Control::Artifact { artifact, .. }) = parse(r#"{"data": {"n": 1}, "name": "stats"}"#) else {
            panic!("not an artifact");
        };
        assert_eq!(artifact.name, "stats");
        assert!(matches!(artifact.parts[0].content, Some(part::Content::Data(_))));
    }

    #[test]
    fn rejects_what_it_does_not_understand() {
        for (line, problem) in [
            ("{", "not a JSON object"),
            ("{}", "expected one of the keys"),
            (r#"{"status": "a", "data": 1}"#, "one action per line"),
            (r#"{"status": 3}"#, "takes a string or null"),
            (r#"{"status": "a", "colour": "red"}"#, "unknown key \"colour\""),
            (r#"{"artifact": {"parts": 7}}"#, "invalid artifact"),
            (r#"{"artifact": {"name": "a", "parts": [], "artifactID": "x"}}"#, "invalid artifact"),
            (r#"{"artifact": {"artifactId": "stdout", "parts": []}}"#, "reserved"),
            (r#"{"artifact": {"name": "a", "parts": []}, "append": "yes"}"#, "must be true or false"),
        ] {
            let error = parse(line).expect_err(line);
            assert!(error.contains(problem), "{line}: {error}");
        }
    }
}
