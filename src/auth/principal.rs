//! Principals are namespaced by the credential that names them, so a credential of one kind (or
//! from one issuer) can never act as another's principal by carrying the same name:
//!
//! | credential | principal |
//! |---|---|
//! | API key (`principal = "alice"`) | `key:alice` |
//! | JWT from issuer `I` (`sub` = `alice`) | `jwt:I#alice`, `%` and `#` in `I` percent-encoded |
//! | client certificate (`alice`) | `mtls:alice` |
//! | a table with `namespace = "N"` | `N:alice` |
//!
//! The text before the first `:` names the namespace; for `jwt` the issuer runs to the first
//! `#` (the issuer's own `#`s are encoded), the rest is the name. So the mapping from
//! (namespace, name) to principal is one-to-one: no name can forge another namespace. An
//! explicit `namespace` is how an operator merges kinds on purpose (`namespace = "key"` on an
//! issuer makes its subjects the API keys' principals); `jwt` is reserved for issuers.
use std::fmt;

/// The longest explicit namespace.
const MAX_NAMESPACE: usize = 64;

/// Where one credential table's names live: what goes before each name.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Namespace(String);

impl Namespace {
    /// API keys' default namespace.
    pub(super) fn api_keys() -> Self {
        Self("key:".to_owned())
    }

    /// Client certificates' default namespace.
    pub(super) fn mtls() -> Self {
        Self("mtls:".to_owned())
    }

    /// The default namespace of one JWT issuer's subjects.
    pub(super) fn issuer(issuer: &str) -> Self {
        let escaped = issuer.replace('%', "%25").replace('#', "%23");
        Self(format!("jwt:{escaped}#"))
    }

    /// The namespace a table names explicitly (`namespace = "…"`), else `default`; `what` names
    /// the table in errors.
    pub(super) fn configured(explicit: Option<&str>, default: Self, what: &str) -> Result<Self, String> {
        let Some(name) = explicit else { return Ok(default) };
        let valid = !name.is_empty()
            && name.len() <= MAX_NAMESPACE
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
        if !valid {
            return Err(format!(
                "{what}: namespace {name:?} must be 1 to {MAX_NAMESPACE} of A-Z a-z 0-9 - . _"
            ));
        }
        if name == "jwt" {
            return Err(format!("{what}: namespace \"jwt\" is reserved for JWT issuers' own"));
        }
        Ok(Self(format!("{name}:")))
    }

    /// The namespace of `issuer`'s principals: `namespace`, or the older `principal_prefix`
    /// when it was `"<namespace>:"` (so the principals stay what they were), else its own.
    pub(super) fn of_issuer(
        issuer: &str,
        namespace: Option<&str>,
        prefix: Option<&str>,
    ) -> Result<Self, String> {
        let what = format!("jwt {issuer:?}");
        let explicit = match (namespace, prefix) {
            (Some(_), Some(_)) => return Err(format!("{what}: give namespace, not principal_prefix too")),
            (Some(namespace), None) => Some(namespace),
            (None, None | Some("")) => None,
            (None, Some(prefix)) => Some(prefix.strip_suffix(':').ok_or_else(|| {
                format!("{what}: principal_prefix must be \"<namespace>:\"; better, set namespace = \"<namespace>\"")
            })?),
        };
        Self::configured(explicit, Self::issuer(issuer), &what)
    }

    /// The principal `name` is in this namespace.
    pub(super) fn principal(&self, name: &str) -> String {
        format!("{}{name}", self.0)
    }
}

impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Namespace({:?})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splits a principal back into (namespace, name): that this always works, and uniquely,
    /// is what keeps namespaces apart.
    fn split(principal: &str) -> (&str, &str) {
        let (kind, rest) = principal.split_once(':').expect("a namespace");
        if kind != "jwt" {
            return (kind, rest);
        }
        let (issuer, name) = rest.split_once('#').expect("an issuer");
        (&principal[..kind.len() + 1 + issuer.len()], name)
    }

    #[test]
    fn every_kind_and_issuer_has_its_own_namespace() {
        let names = ["alice", "key:alice", "a#b", "x%23y", ""];
        let namespaces = [
            Namespace::api_keys(),
            Namespace::mtls(),
            Namespace::issuer("https://id.example/#a"),
            Namespace::issuer("https://id.example/"),
            Namespace::issuer("https://id.example/%23a"),
            Namespace::configured(Some("corp"), Namespace::mtls(), "t").unwrap(),
        ];
        let mut seen = std::collections::HashSet::new();
        for namespace in &namespaces {
            for name in names {
                let principal = namespace.principal(name);
                assert_eq!(split(&principal).1, name, "{principal}");
                assert!(seen.insert(principal.clone()), "{principal} twice");
            }
        }
        assert_eq!(Namespace::issuer("https://i/#x").principal("alice"), "jwt:https://i/%23x#alice");
    }

    #[test]
    fn explicit_namespaces_are_plain_names_and_jwt_is_reserved() {
        let default = Namespace::api_keys;
        assert_eq!(Namespace::configured(None, default(), "t").unwrap(), default());
        assert_eq!(Namespace::configured(Some("mtls"), default(), "t").unwrap(), Namespace::mtls());
        for bad in ["", "a:b", "a#b", "jwt", "é", &"x".repeat(65)] {
            assert!(Namespace::configured(Some(bad), default(), "t").is_err(), "{bad:?}");
        }
    }
}
