//! Who is calling, and with which A2A service parameters.
//!
//! Every binding turns its transport's metadata (gRPC metadata, HTTP headers, query
//! parameters) into one [`CallContext`]; the core checks it the same way for all of them.
//! Who the caller is comes from the authentication layer (`auth/`), which leaves an
//! [`Authentication`] in the request's extensions for the binding to apply
//! ([`CallContext::authenticated`]); the core refuses a refused caller in its admission step
//! and a tenant the caller may not use wherever it names an [`Owner`].
use std::sync::Arc;

use crate::error::A2aError;

/// The URI of this server's resume extension (`docs/extensions/resume.md`): a client that
/// activates it gets `generation` fields in JSON and may resume SubscribeToTask after a
/// generation it saw.
pub const RESUME_EXTENSION: &str = "https://github.com/a2a-server/extensions/resume/v1";

/// The service parameter (HTTP header, gRPC metadata `a2a-last-generation`) carrying the last
/// generation a resuming client saw.
pub const LAST_GENERATION: &str = "A2A-Last-Generation";

/// The principal every call has while authentication is off.
pub const ANONYMOUS: &str = "anonymous";

/// Who a task belongs to. Every lookup is scoped by it: another owner sees `TaskNotFound`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Owner {
    /// The request's `tenant` field (empty when the server is not multi-tenant).
    pub tenant: String,
    /// The authenticated principal.
    pub principal: String,
}

/// Who a credential names: a principal and the tenants it may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The principal; every task and push config it creates is its own.
    pub principal: String,
    /// The tenants (the requests' `tenant` field) it may use.
    pub tenants: Tenants,
}

/// The tenants a principal may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tenants {
    /// Any tenant (authentication off, or a credential granted `"*"`).
    Any,
    /// These tenants only; `""` is the default tenant of a server that is not multi-tenant.
    Only(Vec<String>),
}

impl Tenants {
    /// Whether `tenant` is one of them.
    pub fn allows(&self, tenant: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Only(tenants) => tenants.iter().any(|t| t == tenant),
        }
    }
}

/// What authentication concluded about one request; the auth layer stores it in the request's
/// extensions, the binding applies it with [`CallContext::authenticated`].
#[derive(Debug, Clone)]
pub enum Authentication {
    /// A valid credential.
    Authenticated(Arc<Identity>),
    /// No credential, or one that is not valid: the core refuses the call with this error.
    Refused(A2aError),
}

/// The A2A protocol version of the binding a call came through. The v0.3 shims translate their
/// calls into v1.0 operations, so the core serves both alike; what a call leaves behind for
/// later (a push config) records it, so that what comes of it later (webhook bodies) speaks
/// the caller's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ProtocolVersion {
    /// A2A v0.3 (`message/send`, `/v1/…`, `a2a.v1.A2AService`).
    V0_3,
    /// A2A v1.0 (and the 1.x calls the v1.0 bindings serve).
    #[default]
    V1_0,
}

impl ProtocolVersion {
    /// The `Major.Minor` form the spec uses (`"0.3"`, `"1.0"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V0_3 => "0.3",
            Self::V1_0 => "1.0",
        }
    }

    /// The version a `Major.Minor` string names: `"0.3"` (or any `0.x`) is v0.3; anything else,
    /// empty included, is v1.0 (the default of a2aproject/A2A PR #2153's
    /// `TaskPushNotificationConfig.protocol_version`: "1.0" if unset).
    pub fn parse(version: &str) -> Self {
        match version.trim().starts_with("0.") {
            true => Self::V0_3,
            false => Self::V1_0,
        }
    }
}

/// One call's caller and service parameters, transport-neutral.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The authenticated principal ([`ANONYMOUS`] while authentication is off).
    pub principal: String,
    /// The tenants the principal may use ([`Tenants::Any`] while authentication is off).
    pub tenants: Tenants,
    /// Whether a credential was checked for this call: `None` until a binding applies the auth
    /// layer's outcome. A server with authentication on refuses a call without one, so a
    /// binding that forgot to apply it fails closed.
    pub authentication: Option<Authentication>,
    /// The `A2A-Version` service parameter, if sent.
    pub version: Option<String>,
    /// The `A2A-Extensions` the client asked to activate.
    pub extensions: Vec<String>,
    /// The protocol version of the binding the call came through (set by the v0.3 shims).
    pub protocol: ProtocolVersion,
    /// The W3C `traceparent` the client sent, for the request's span.
    pub traceparent: Option<String>,
    /// The [`LAST_GENERATION`] parameter, as sent (honoured with the resume extension).
    pub last_generation: Option<String>,
    /// SSE's `Last-Event-ID` header, as sent (honoured on its own: our event ids are
    /// generations, and `EventSource` cannot send other headers).
    pub last_event_id: Option<String>,
}

impl Default for CallContext {
    fn default() -> Self {
        Self {
            principal: ANONYMOUS.to_owned(),
            tenants: Tenants::Any,
            authentication: None,
            version: None,
            extensions: Vec::new(),
            protocol: ProtocolVersion::V1_0,
            traceparent: None,
            last_generation: None,
            last_event_id: None,
        }
    }
}

impl CallContext {
    /// A context from the raw parameter values a binding found (each may be absent).
    /// `extensions` may hold several comma-separated lists.
    pub fn from_parameters<'a>(version: Option<&str>, extensions: impl IntoIterator<Item = &'a str>) -> Self {
        let extensions = extensions
            .into_iter()
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .filter(|uri| !uri.is_empty())
            .map(str::to_owned)
            .collect();
        Self { version: version.map(|v| v.trim().to_owned()), extensions, ..Self::default() }
    }

    /// Whether the client activated the resume extension.
    pub fn resumes(&self) -> bool {
        self.extensions.iter().any(|uri| uri == RESUME_EXTENSION)
    }

    /// Whether JSON answers carry the `generation` fields: for clients that ask for A2A 1.1
    /// (or a later 1.x) or activate the resume extension. Older JSON clients may reject
    /// unknown fields, so they get exactly the v1.0 form.
    pub fn wants_generation(&self) -> bool {
        let minor = self
            .version
            .as_deref()
            .and_then(|v| v.strip_prefix("1."))
            .and_then(|rest| rest.split('.').next().and_then(|minor| minor.parse::<u32>().ok()));
        minor.is_some_and(|minor| minor >= 1) || self.resumes()
    }

    /// The generation a resuming SubscribeToTask continues after: [`LAST_GENERATION`] with the
    /// resume extension active, else `Last-Event-ID`; `None` for an ordinary subscription.
    /// A value that is not a non-negative integer is INVALID_ARGUMENT.
    pub fn resume_after(&self) -> Result<Option<u64>, A2aError> {
        let (name, value) = match (&self.last_generation, &self.last_event_id) {
            (Some(value), _) if self.resumes() => (LAST_GENERATION, value),
            (_, Some(value)) => ("Last-Event-ID", value),
            _ => return Ok(None),
        };
        match value.trim().parse::<u64>() {
            Ok(generation) => Ok(Some(generation)),
            Err(_) => Err(A2aError::invalid_field(name, format!("{value:?} is not a generation"))),
        }
    }

    /// Applies the auth layer's outcome for this request (`None`: the layer did not run, as
    /// when authentication is off).
    pub fn authenticated(mut self, outcome: Option<&Authentication>) -> Self {
        if let Some(Authentication::Authenticated(identity)) = outcome {
            self.principal = identity.principal.clone();
            self.tenants = identity.tenants.clone();
        }
        self.authentication = outcome.cloned();
        self
    }

    /// Fails unless the caller may call at all: a refused credential fails with its error, and
    /// so does a call no credential was checked for when `required`.
    pub fn check_authentication(&self, required: bool) -> Result<(), A2aError> {
        match &self.authentication {
            Some(Authentication::Refused(error)) => Err(error.clone()),
            None if required => Err(A2aError::Unauthenticated("this call needs a credential".into())),
            _ => Ok(()),
        }
    }

    /// The owner of tasks this call creates or may see, within `tenant`: the one way to name
    /// an owner, so a tenant the caller may not use is refused wherever a task is reached.
    pub fn owner(&self, tenant: &str) -> Result<Owner, A2aError> {
        if !self.tenants.allows(tenant) {
            return Err(A2aError::PermissionDenied(format!(
                "principal {:?} may not use tenant {tenant:?}",
                self.principal
            )));
        }
        Ok(Owner { tenant: tenant.to_owned(), principal: self.principal.clone() })
    }

    /// Accepts any `1.x` version. A missing or empty version counts as 1.0: a call that reaches
    /// a v1.0 endpoint (the `lf.a2a.v1` service, v1.0 method names) comes from a v1.0 client.
    pub fn check_version(&self) -> Result<(), A2aError> {
        match self.version.as_deref() {
            None | Some("") => Ok(()),
            Some(version) if is_v1(version) => Ok(()),
            Some(version) => Err(A2aError::VersionNotSupported(version.to_owned())),
        }
    }

    /// Fails when the agent requires an extension the client did not ask for.
    pub fn check_required_extensions(&self, required: &[String]) -> Result<(), A2aError> {
        match required.iter().find(|uri| !self.extensions.contains(uri)) {
            Some(uri) => Err(A2aError::ExtensionSupportRequired(uri.clone())),
            None => Ok(()),
        }
    }
}

fn is_v1(version: &str) -> bool {
    let mut parts = version.split('.');
    let major_ok = parts.next() == Some("1");
    major_ok && parts.all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        for ok in [None, Some(""), Some("1.0"), Some("1.0.1"), Some("1.1"), Some("1")] {
            assert!(CallContext::from_parameters(ok, []).check_version().is_ok(), "{ok:?}");
        }
        for bad in ["0.3", "2.0", "99.0", "1.x", "1.", "abc"] {
            let err = CallContext::from_parameters(Some(bad), []).check_version().unwrap_err();
            assert_eq!(err.reason(), "VERSION_NOT_SUPPORTED", "{bad}");
        }
    }

    #[test]
    fn tenants_and_refusals() {
        let identity =
            Identity { principal: "alice".into(), tenants: Tenants::Only(vec!["".into(), "acme".into()]) };
        let outcome = Authentication::Authenticated(Arc::new(identity));
        let call = CallContext::default().authenticated(Some(&outcome));
        assert_eq!(call.owner("acme").unwrap().principal, "alice");
        assert_eq!(call.owner("other").unwrap_err().reason(), "UNAUTHORIZED");
        assert!(call.check_authentication(true).is_ok());
        assert_eq!(
            CallContext::default().check_authentication(true).unwrap_err().reason(),
            "UNAUTHENTICATED"
        );
        assert!(CallContext::default().check_authentication(false).is_ok());
        let refused = Authentication::Refused(A2aError::Unauthenticated("no".into()));
        let call = CallContext::default().authenticated(Some(&refused));
        assert_eq!(call.principal, ANONYMOUS);
        assert!(call.check_authentication(false).is_err());
    }

    #[test]
    fn generation_in_json_for_1_1_or_the_extension() {
        for (version, ext, wants) in [
            (None, None, false),
            (Some("1.0"), None, false),
            (Some("1"), None, false),
            (Some("1.1"), None, true),
            (Some("1.2"), None, true),
            (Some("1.0"), Some(RESUME_EXTENSION), true),
            (None, Some("urn:other"), false),
        ] {
            let call = CallContext::from_parameters(version, ext);
            assert_eq!(call.wants_generation(), wants, "{version:?} {ext:?}");
        }
    }

    #[test]
    fn resume_cursor() {
        let mut call = CallContext::from_parameters(None, []);
        call.last_generation = Some("4".into());
        assert_eq!(call.resume_after(), Ok(None), "not without the extension");
        call.extensions.push(RESUME_EXTENSION.into());
        assert_eq!(call.resume_after(), Ok(Some(4)));
        call.last_generation = Some("x".into());
        assert_eq!(call.resume_after().unwrap_err().reason(), "INVALID_PARAMS");
        let mut sse = CallContext::from_parameters(None, []);
        sse.last_event_id = Some("7".into());
        assert_eq!(sse.resume_after(), Ok(Some(7)));
    }

    #[test]
    fn extensions_split_and_required() {
        let call = CallContext::from_parameters(None, ["a, b", "c"]);
        assert_eq!(call.extensions, ["a", "b", "c"]);
        assert!(call.check_required_extensions(&["b".into()]).is_ok());
        assert!(call.check_required_extensions(&["z".into()]).is_err());
    }
}
