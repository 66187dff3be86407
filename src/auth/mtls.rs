//! Mutual TLS as a credential: the client certificate the TLS handshake verified (against
//! `--tls-client-ca`) names the principal. Which of its names counts is a setting (default: the
//! first DNS or URI subject alternative name, else the subject's common name); the auth file's
//! `[mtls]` table maps those names to principals and tenants, or accepts any verified
//! certificate as its own principal. Its principals are `mtls:<name>` unless the table (or a
//! client's) names another namespace (see `principal.rs`).
use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;

use super::principal::Namespace;
use super::tenants_of;
use crate::call::{Identity, Tenants};
use crate::error::A2aError;

/// The names of a verified client certificate, read once per connection; the listener puts it
/// (as `Arc<ClientCertificate>`) in the extensions of every request of that connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCertificate {
    /// The subject's common names (CN), in order.
    pub common_names: Vec<String>,
    /// The DNS subject alternative names, in order.
    pub dns_names: Vec<String>,
    /// The URI subject alternative names (SPIFFE ids, for one), in order.
    pub uris: Vec<String>,
}

impl ClientCertificate {
    /// Reads the names of a DER certificate.
    pub fn from_der(der: &[u8]) -> Result<Self, String> {
        use x509_parser::extensions::GeneralName;
        let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| format!("certificate: {e}"))?;
        let mut names = Self {
            common_names: cert
                .subject()
                .iter_common_name()
                .filter_map(|cn| cn.as_str().ok().map(str::to_owned))
                .collect(),
            ..Self::default()
        };
        let san = cert.subject_alternative_name().map_err(|e| format!("subjectAltName: {e}"))?;
        for name in san.iter().flat_map(|san| &san.value.general_names) {
            match name {
                GeneralName::DNSName(dns) => names.dns_names.push((*dns).to_owned()),
                GeneralName::URI(uri) => names.uris.push((*uri).to_owned()),
                _ => {}
            }
        }
        Ok(names)
    }

    /// The name `which` picks, if the certificate has one.
    fn name(&self, which: SubjectName) -> Option<&str> {
        fn first(names: &[String]) -> Option<&str> {
            names.first().map(String::as_str)
        }
        match which {
            SubjectName::Auto => first(&self.dns_names).or(first(&self.uris)).or(first(&self.common_names)),
            SubjectName::Cn => first(&self.common_names),
            SubjectName::Dns => first(&self.dns_names),
            SubjectName::Uri => first(&self.uris),
        }
    }
}

/// Which name of a client certificate is its subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubjectName {
    /// The first DNS SAN, else the first URI SAN, else the CN.
    #[default]
    Auto,
    /// The subject's common name.
    Cn,
    /// The first DNS subject alternative name.
    Dns,
    /// The first URI subject alternative name.
    Uri,
}

/// The auth file's `[mtls]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MtlsConfig {
    /// Which certificate name is the subject (`auto`, `cn`, `dns`, `uri`).
    #[serde(default)]
    pub subject: SubjectName,
    /// Accept any certificate the CA verified, its subject as the principal (with `tenants`);
    /// otherwise only the subjects listed in `[[mtls.client]]`.
    #[serde(default)]
    pub allow_any: bool,
    /// Tenants of a principal accepted by `allow_any` (default `[""]`; `"*"`: any).
    #[serde(default)]
    pub tenants: Option<Vec<String>>,
    /// The principals' namespace instead of `mtls` (`<namespace>:<name>`), to merge them with
    /// another credential's on purpose.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Known subjects (`[[mtls.client]]` tables).
    #[serde(default, rename = "client")]
    pub clients: Vec<MtlsClient>,
}

/// One known certificate subject.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MtlsClient {
    /// The certificate's subject (the name `[mtls] subject` picks).
    pub subject: String,
    /// The name it gives its caller (default: the subject itself); the principal is
    /// `mtls:<principal>`.
    #[serde(default)]
    pub principal: Option<String>,
    /// This client's namespace instead of the table's (`namespace = "key"`: the API key of the
    /// same `principal` is the same principal).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Tenants it may use (default `[""]`; `"*"`: any).
    #[serde(default)]
    pub tenants: Option<Vec<String>>,
}

/// The configured mapping from certificates to identities.
pub(super) struct Mtls {
    subject: SubjectName,
    clients: HashMap<String, Arc<Identity>>,
    /// The tenants of any other verified subject, when any is allowed.
    any: Option<Tenants>,
    namespace: Namespace,
}

impl Mtls {
    pub(super) fn new(config: MtlsConfig) -> Result<Self, String> {
        if !config.allow_any && config.clients.is_empty() {
            return Err("[mtls] accepts nobody: set allow_any = true or add [[mtls.client]] tables".into());
        }
        if !config.allow_any && config.tenants.is_some() {
            return Err("[mtls] tenants applies only with allow_any = true".into());
        }
        let namespace = Namespace::configured(config.namespace.as_deref(), Namespace::mtls(), "[mtls]")?;
        let mut clients = HashMap::new();
        for (i, client) in config.clients.into_iter().enumerate() {
            let name = client.principal.unwrap_or_else(|| client.subject.clone());
            if client.subject.is_empty() || name.is_empty() {
                return Err(format!("mtls.client[{i}]: empty subject or principal"));
            }
            let what = format!("mtls.client[{i}]");
            let own = Namespace::configured(client.namespace.as_deref(), namespace.clone(), &what)?;
            let identity = Identity { principal: own.principal(&name), tenants: tenants_of(client.tenants) };
            if clients.insert(client.subject, Arc::new(identity)).is_some() {
                return Err(format!("mtls.client[{i}] repeats another subject"));
            }
        }
        let any = config.allow_any.then(|| tenants_of(config.tenants));
        Ok(Self { subject: config.subject, clients, any, namespace })
    }

    /// Whom the certificate names.
    pub(super) fn check(&self, certificate: &ClientCertificate) -> Result<Identity, A2aError> {
        let subject = certificate.name(self.subject).ok_or_else(|| {
            A2aError::Unauthenticated("the client certificate has no name to take the principal from".into())
        })?;
        if let Some(identity) = self.clients.get(subject) {
            return Ok(Identity::clone(identity));
        }
        match &self.any {
            Some(tenants) => {
                Ok(Identity { principal: self.namespace.principal(subject), tenants: tenants.clone() })
            }
            None => {
                Err(A2aError::Unauthenticated("the client certificate's subject is not known here".into()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(cn: &[&str], dns: &[&str], uris: &[&str]) -> ClientCertificate {
        let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
        ClientCertificate { common_names: owned(cn), dns_names: owned(dns), uris: owned(uris) }
    }

    #[test]
    fn the_subject_is_the_first_san_else_the_cn_unless_configured() {
        let both = names(&["cn-name"], &["dns.name", "second.name"], &["spiffe://a/b"]);
        assert_eq!(both.name(SubjectName::Auto), Some("dns.name"));
        assert_eq!(both.name(SubjectName::Cn), Some("cn-name"));
        assert_eq!(both.name(SubjectName::Uri), Some("spiffe://a/b"));
        assert_eq!(names(&[], &[], &["spiffe://a/b"]).name(SubjectName::Auto), Some("spiffe://a/b"));
        assert_eq!(names(&["only-cn"], &[], &[]).name(SubjectName::Auto), Some("only-cn"));
        assert_eq!(names(&["only-cn"], &[], &[]).name(SubjectName::Dns), None);
    }

    #[test]
    fn known_subjects_map_to_principals_and_others_need_allow_any() {
        let config: MtlsConfig = toml::from_str(
            "[[client]]\nsubject = \"orders.internal\"\nprincipal = \"orders\"\ntenants = [\"acme\"]\n",
        )
        .unwrap();
        let mtls = Mtls::new(config.clone()).unwrap();
        let orders = mtls.check(&names(&[], &["orders.internal"], &[])).unwrap();
        assert_eq!(orders.principal, "mtls:orders");
        assert!(orders.tenants.allows("acme") && !orders.tenants.allows(""));
        assert!(mtls.check(&names(&[], &["stranger"], &[])).is_err());
        assert!(mtls.check(&names(&[], &[], &[])).is_err(), "no name at all");

        let any = Mtls::new(MtlsConfig { allow_any: true, ..config }).unwrap();
        let stranger = any.check(&names(&["stranger"], &[], &[])).unwrap();
        assert_eq!(stranger.principal, "mtls:stranger");
        assert!(stranger.tenants.allows(""));
        assert!(Mtls::new(toml::from_str("").unwrap()).is_err(), "accepts nobody");

        let merged: MtlsConfig = toml::from_str(
            "namespace = \"corp\"\n[[client]]\nsubject = \"a\"\nprincipal = \"alice\"\nnamespace = \"key\"\n\
             [[client]]\nsubject = \"b\"\n",
        )
        .unwrap();
        let merged = Mtls::new(merged).unwrap();
        assert_eq!(merged.check(&names(&[], &["a"], &[])).unwrap().principal, "key:alice");
        assert_eq!(merged.check(&names(&[], &["b"], &[])).unwrap().principal, "corp:b");
    }
}
