//! The `--card-…` flags that set the Agent Card's own fields (its name, provider, skills,
//! media types) over the agent's defaults.
use clap::Args;

use crate::card::CardOverrides;
use crate::proto::AgentSkill;
use crate::protojson;

/// The card fields given as flags; see each flag.
#[derive(Debug, Clone, Args)]
pub struct CardFlags {
    /// The card's `name`.
    #[arg(id = "card_name", long = "card-name", value_name = "CARD_NAME", env = "A2A_CARD_NAME")]
    pub name: Option<String>,

    /// The card's `description`.
    #[arg(
        id = "card_description",
        long = "card-description",
        value_name = "CARD_DESCRIPTION",
        env = "A2A_CARD_DESCRIPTION"
    )]
    pub description: Option<String>,

    /// The card's `version` (the agent's own version).
    #[arg(id = "card_version", long = "card-version", value_name = "CARD_VERSION", env = "A2A_CARD_VERSION")]
    pub version: Option<String>,

    /// The card's `provider.organization`.
    #[arg(
        id = "card_provider_organization",
        value_name = "CARD_PROVIDER_ORGANIZATION",
        long = "card-provider-organization",
        env = "A2A_CARD_PROVIDER_ORGANIZATION"
    )]
    pub provider_organization: Option<String>,

    /// The card's `provider.url`.
    #[arg(
        id = "card_provider_url",
        long = "card-provider-url",
        value_name = "CARD_PROVIDER_URL",
        env = "A2A_CARD_PROVIDER_URL"
    )]
    pub provider_url: Option<String>,

    /// The card's `documentationUrl`.
    #[arg(
        id = "card_documentation_url",
        value_name = "CARD_DOCUMENTATION_URL",
        long = "card-documentation-url",
        env = "A2A_CARD_DOCUMENTATION_URL"
    )]
    pub documentation_url: Option<String>,

    /// The card's `iconUrl`.
    #[arg(
        id = "card_icon_url",
        long = "card-icon-url",
        value_name = "CARD_ICON_URL",
        env = "A2A_CARD_ICON_URL"
    )]
    pub icon_url: Option<String>,

    /// A skill, as a ProtoJSON `AgentSkill` object (repeatable; replaces the default skills).
    #[arg(id = "card_skills", long = "card-skill", value_name = "CARD_SKILLS", env = "A2A_CARD_SKILL")]
    pub skills: Vec<String>,

    /// A default input media type (repeatable).
    #[arg(
        id = "card_input_modes",
        value_name = "CARD_INPUT_MODES",
        long = "card-input-mode",
        env = "A2A_CARD_INPUT_MODES",
        value_delimiter = ','
    )]
    pub input_modes: Vec<String>,

    /// A default output media type (repeatable).
    #[arg(
        id = "card_output_modes",
        value_name = "CARD_OUTPUT_MODES",
        long = "card-output-mode",
        env = "A2A_CARD_OUTPUT_MODES",
        value_delimiter = ','
    )]
    pub output_modes: Vec<String>,
}

impl CardFlags {
    /// The card fields given as flags, each skill decoded from its ProtoJSON.
    pub fn overrides(&self) -> Result<CardOverrides, String> {
        let skills = self
            .skills
            .iter()
            .map(|text| {
                let value: serde_json::Value = serde_json::from_str(text)
                    .map_err(|e| format!("--card-skill {text:?} is not JSON: {e}"))?;
                protojson::decode::<AgentSkill>(&value).map_err(|e| format!("--card-skill {text:?}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CardOverrides {
            name: self.name.clone(),
            description: self.description.clone(),
            version: self.version.clone(),
            provider_organization: self.provider_organization.clone(),
            provider_url: self.provider_url.clone(),
            documentation_url: self.documentation_url.clone(),
            icon_url: self.icon_url.clone(),
            skills,
            input_modes: self.input_modes.clone(),
            output_modes: self.output_modes.clone(),
        })
    }
}
