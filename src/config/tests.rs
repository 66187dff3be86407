//! The flags as clap sees them: consistent, and each group's under its own names.
use clap::{CommandFactory, Parser};

use super::Config;

/// Ids unique, defaults parsable, and so on: a collision between a group's id and another
/// flag's panics only when the binary starts.
#[test]
fn the_flags_are_consistent() {
    Config::command().debug_assert();
}

#[test]
fn grouped_flags_parse_under_their_names_and_ranges() {
    let args = ["a2a-server", "--card-name", "n", "--card-skill", "{}", "--exec-max-concurrency", "3"];
    let config = Config::try_parse_from(args).unwrap();
    assert_eq!(config.card_fields.name.as_deref(), Some("n"));
    assert_eq!(config.card_fields.skills, ["{}"]);
    assert_eq!(config.exec.max_concurrency, 3);
    assert_eq!(config.exec.timeout_secs, 3600, "the default");
    assert!(Config::try_parse_from(["a2a-server", "--exec-max-concurrency", "0"]).is_err());
}
