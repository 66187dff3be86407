//! The public Agent Card: built from flags or a card file, completed with what the server
//! really offers (its interfaces and capabilities), and validated at start-up; [`signing`]
//! signs it (`--card-signing-key`).
//!
//! The server always writes `supportedInterfaces` itself, from where clients reach it and
//! which bindings the operator lists (`--card-interfaces`, [`CardFacts::interfaces`]): a card
//! file's own list is replaced, because the server knows its addresses and a hand-written
//! list goes stale (a file's `signatures` go too: they cannot hold for the completed card).
use crate::call::RESUME_EXTENSION;
use crate::error::A2aError;
use crate::proto::{AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentProvider, AgentSkill};

pub mod signing;

/// The protocol version every interface declares.
pub const PROTOCOL_VERSION: &str = "1.0";

/// A binding the card can list in `supportedInterfaces` (`--card-interfaces`). Listing is all
/// it changes: every binding is served either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// gRPC, listed as `host:port` (the spec's form, a2aproject/A2A #1997).
    Grpc,
    /// JSON-RPC 2.0, at the public URL's `/`.
    JsonRpc,
    /// HTTP+JSON, at the public URL.
    HttpJson,
}

impl Binding {
    /// The default list: gRPC first (the preferred binding of a gRPC-first server), then the
    /// JSON bindings.
    pub const DEFAULT: [Binding; 3] = [Binding::Grpc, Binding::JsonRpc, Binding::HttpJson];

    /// Its `protocolBinding` in the card.
    pub fn protocol_binding(self) -> &'static str {
        match self {
            Binding::Grpc => "GRPC",
            Binding::JsonRpc => "JSONRPC",
            Binding::HttpJson => "HTTP+JSON",
        }
    }
}

/// Refuses a list of bindings the card cannot be built from: empty, or one binding twice.
pub fn check_interfaces(interfaces: &[Binding]) -> Result<(), String> {
    if interfaces.is_empty() {
        return Err("list at least one binding (grpc, jsonrpc, http-json)".into());
    }
    for (i, binding) in interfaces.iter().enumerate() {
        if interfaces[..i].contains(binding) {
            return Err(format!("{} is listed twice", binding.protocol_binding()));
        }
    }
    Ok(())
}

/// What the server knows about itself when it publishes its card.
#[derive(Debug, Clone)]
pub struct CardFacts {
    /// Base URL of the HTTP bindings as clients reach it (e.g. `https://a2a.example.com`).
    pub public_url: String,
    /// `host:port` of the gRPC binding as clients reach it.
    pub public_grpc: String,
    /// Whether SendStreamingMessage and SubscribeToTask are offered.
    pub streaming: bool,
    /// Whether push notifications are offered.
    pub push_notifications: bool,
    /// Whether an extended card is configured.
    pub extended_card: bool,
    /// The bindings `supportedInterfaces` lists, in order (the first is the preferred one);
    /// [`Binding::DEFAULT`] unless the operator chose.
    pub interfaces: Vec<Binding>,
}

/// Fields a operator may set from the command line; each overrides the base card.
#[derive(Debug, Clone, Default)]
pub struct CardOverrides {
    /// `name`.
    pub name: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `version` (the agent's, not the protocol's).
    pub version: Option<String>,
    /// `provider.organization`.
    pub provider_organization: Option<String>,
    /// `provider.url`.
    pub provider_url: Option<String>,
    /// `documentationUrl`.
    pub documentation_url: Option<String>,
    /// `iconUrl`.
    pub icon_url: Option<String>,
    /// Skills, replacing the base card's when any is given.
    pub skills: Vec<AgentSkill>,
    /// `defaultInputModes`, replacing the base card's when any is given.
    pub input_modes: Vec<String>,
    /// `defaultOutputModes`, replacing the base card's when any is given.
    pub output_modes: Vec<String>,
}

/// Applies `overrides` to `base`, declares the interfaces and capabilities, and validates.
pub fn build(base: AgentCard, overrides: CardOverrides, facts: &CardFacts) -> Result<AgentCard, A2aError> {
    let mut card = base;
    let set = |field: &mut String, value: Option<String>| {
        if let Some(value) = value {
            *field = value;
        }
    };
    set(&mut card.name, overrides.name);
    set(&mut card.description, overrides.description);
    set(&mut card.version, overrides.version);
    if overrides.provider_organization.is_some() || overrides.provider_url.is_some() {
        let provider = card.provider.get_or_insert_with(AgentProvider::default);
        set(&mut provider.organization, overrides.provider_organization);
        set(&mut provider.url, overrides.provider_url);
    }
    if overrides.documentation_url.is_some() {
        card.documentation_url = overrides.documentation_url;
    }
    if overrides.icon_url.is_some() {
        card.icon_url = overrides.icon_url;
    }
    if !overrides.skills.is_empty() {
        card.skills = overrides.skills;
    }
    if !overrides.input_modes.is_empty() {
        card.default_input_modes = overrides.input_modes;
    }
    if !overrides.output_modes.is_empty() {
        card.default_output_modes = overrides.output_modes;
    }

    let http_url = facts.public_url.trim_end_matches('/').to_owned();
    let interface = |url: String, binding: &str| AgentInterface {
        url,
        protocol_binding: binding.to_owned(),
        tenant: String::new(),
        protocol_version: PROTOCOL_VERSION.to_owned(),
    };
    check_interfaces(&facts.interfaces).map_err(|e| A2aError::InvalidParams {
        message: format!("invalid agent card: supportedInterfaces: {e}"),
        violations: vec![crate::error::FieldViolation::new("supportedInterfaces", &e)],
    })?;
    card.supported_interfaces = facts
        .interfaces
        .iter()
        .map(|binding| {
            let url = match binding {
                Binding::Grpc => facts.public_grpc.clone(),
                Binding::JsonRpc => format!("{http_url}/"),
                Binding::HttpJson => http_url.clone(),
            };
            interface(url, binding.protocol_binding())
        })
        .collect();
    card.signatures.clear();
    let mut extensions = card.capabilities.take().map(|c| c.extensions).unwrap_or_default();
    if !extensions.iter().any(|e| e.uri == RESUME_EXTENSION) {
        extensions.push(AgentExtension {
            uri: RESUME_EXTENSION.to_owned(),
            description: "Resumable streams and A2A 1.1 generations in JSON: send \
                A2A-Last-Generation on SubscribeToTask to get only the updates after it \
                (docs/extensions/resume.md)"
                .to_owned(),
            required: false,
            params: None,
        });
    }
    card.capabilities = Some(AgentCapabilities {
        streaming: Some(facts.streaming),
        push_notifications: Some(facts.push_notifications),
        extensions,
        extended_agent_card: Some(facts.extended_card),
    });
    validate(&card)?;
    Ok(card)
}

/// Extensions the card marks `required`: clients must request them.
pub fn required_extensions(card: &AgentCard) -> Vec<String> {
    card.capabilities
        .iter()
        .flat_map(|c| &c.extensions)
        .filter(|e| e.required)
        .map(|e| e.uri.clone())
        .collect()
}

fn validate(card: &AgentCard) -> Result<(), A2aError> {
    let mut problems = Vec::new();
    let mut require = |field: String, ok: bool, what: &str| {
        if !ok {
            problems.push(crate::error::FieldViolation::new(field, what));
        }
    };
    require("name".into(), !card.name.trim().is_empty(), "is required");
    require("description".into(), !card.description.trim().is_empty(), "is required");
    require("version".into(), !card.version.trim().is_empty(), "is required");
    require(
        "defaultInputModes".into(),
        !card.default_input_modes.is_empty(),
        "needs at least one media type",
    );
    require(
        "defaultOutputModes".into(),
        !card.default_output_modes.is_empty(),
        "needs at least one media type",
    );
    require("skills".into(), !card.skills.is_empty(), "needs at least one skill");
    if let Some(provider) = &card.provider {
        require("provider.organization".into(), !provider.organization.is_empty(), "is required");
        require("provider.url".into(), !provider.url.is_empty(), "is required");
    }
    for (i, skill) in card.skills.iter().enumerate() {
        require(format!("skills[{i}].id"), !skill.id.is_empty(), "is required");
        require(format!("skills[{i}].name"), !skill.name.is_empty(), "is required");
        require(format!("skills[{i}].description"), !skill.description.is_empty(), "is required");
        require(format!("skills[{i}].tags"), !skill.tags.is_empty(), "needs at least one tag");
    }
    for (i, extension) in card.capabilities.iter().flat_map(|c| &c.extensions).enumerate() {
        require(format!("capabilities.extensions[{i}].uri"), !extension.uri.is_empty(), "is required");
    }
    match problems.first() {
        None => Ok(()),
        Some(first) => Err(A2aError::InvalidParams {
            message: format!("invalid agent card: {} {}", first.field, first.description),
            violations: problems,
        }),
    }
}

/// A skill from its parts.
pub fn skill(id: &str, name: &str, description: &str, tags: &[&str], examples: &[&str]) -> AgentSkill {
    AgentSkill {
        id: id.into(),
        name: name.into(),
        description: description.into(),
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        examples: examples.iter().map(|e| (*e).to_owned()).collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> CardFacts {
        CardFacts {
            public_url: "https://a2a.example.com/".into(),
            public_grpc: "a2a.example.com:443".into(),
            streaming: true,
            push_notifications: false,
            extended_card: false,
            interfaces: Binding::DEFAULT.to_vec(),
        }
    }

    fn base() -> AgentCard {
        AgentCard {
            name: "n".into(),
            description: "d".into(),
            version: "1".into(),
            default_input_modes: vec!["text/plain".into()],
            default_output_modes: vec!["text/plain".into()],
            skills: vec![skill("s", "S", "does s", &["t"], &[])],
            ..Default::default()
        }
    }

    #[test]
    fn declares_interfaces_and_truthful_capabilities() {
        let card =
            build(base(), CardOverrides { name: Some("Named".into()), ..Default::default() }, &facts())
                .unwrap();
        assert_eq!(card.name, "Named");
        let urls: Vec<_> =
            card.supported_interfaces.iter().map(|i| (i.protocol_binding.as_str(), i.url.as_str())).collect();
        assert_eq!(
            urls,
            [
                ("GRPC", "a2a.example.com:443"),
                ("JSONRPC", "https://a2a.example.com/"),
                ("HTTP+JSON", "https://a2a.example.com")
            ]
        );
        let capabilities = card.capabilities.unwrap();
        assert_eq!(capabilities.streaming, Some(true));
        assert_eq!(capabilities.push_notifications, Some(false));
        let uris: Vec<_> = capabilities.extensions.iter().map(|e| e.uri.as_str()).collect();
        assert_eq!(uris, [RESUME_EXTENSION], "the resume extension is declared, not required");
        assert!(!capabilities.extensions[0].required);
    }

    #[test]
    fn lists_the_chosen_bindings_in_order_and_refuses_none_or_twice() {
        let urls = |interfaces: Vec<Binding>| {
            build(base(), CardOverrides::default(), &CardFacts { interfaces, ..facts() }).map(|card| {
                card.supported_interfaces.into_iter().map(|i| (i.protocol_binding, i.url)).collect::<Vec<_>>()
            })
        };
        let chosen = urls(vec![Binding::HttpJson, Binding::Grpc]).unwrap();
        assert_eq!(
            chosen,
            [
                ("HTTP+JSON".to_owned(), "https://a2a.example.com".to_owned()),
                ("GRPC".to_owned(), "a2a.example.com:443".to_owned())
            ]
        );
        let none = urls(vec![]).unwrap_err();
        assert!(none.to_string().contains("at least one binding"), "{none}");
        let twice = urls(vec![Binding::Grpc, Binding::JsonRpc, Binding::Grpc]).unwrap_err();
        assert!(twice.to_string().contains("GRPC is listed twice"), "{twice}");
    }

    #[test]
    fn names_the_bad_field() {
        let mut card = base();
        card.skills[0].tags.clear();
        let error = build(card, CardOverrides::default(), &facts()).unwrap_err();
        assert_eq!(error.violations()[0].field, "skills[0].tags");
        assert!(error.to_string().contains("skills[0].tags"));
    }
}
