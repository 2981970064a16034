//! Project ids. A runner's project is `agent:<client_id>:<name>`, minted by the server from the
//! runner's registration; callers name projects by that id. The id form is what a caller may
//! send: bounded text with no control characters (visibility and existence are checked by
//! the functions, and an unknown id is `unknown_project`, not a form error).

use crate::ParseError;

/// A project id as callers and the store name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProjectId(String);

impl ProjectId {
    /// Longest id, in characters.
    pub const MAX_CHARS: usize = 300;
    /// The pattern of the JSON Schema: at least one character, none a control character.
    pub const PATTERN: &'static str = r"^[^\x00-\x1F\x7F-\x9F]+$";
    const PREFIX: &'static str = "agent:";

    /// Accepts 1-300 characters with no control character (C0, DEL, C1).
    pub fn parse(raw: &str) -> Result<ProjectId, ParseError> {
        let chars = raw.chars().count();
        if chars == 0 || chars > Self::MAX_CHARS {
            return Err(ParseError::new("project id", "must be 1-300 characters"));
        }
        if raw.chars().any(char::is_control) {
            return Err(ParseError::new(
                "project id",
                "must not contain control characters",
            ));
        }
        Ok(ProjectId(raw.to_owned()))
    }

    /// The id of project `name` served by runner `client_id`.
    pub fn of_runner(client_id: &str, name: &str) -> Result<ProjectId, ParseError> {
        ProjectId::parse(&format!("{}{client_id}:{name}", Self::PREFIX))
    }

    /// The runner client id and runner-local name, when this is a runner project id.
    pub fn runner_parts(&self) -> Option<(&str, &str)> {
        self.0.strip_prefix(Self::PREFIX)?.split_once(':')
    }
}

text_newtype!(ProjectId);

string_enum! {
    /// How a project came to be served.
    "project origin"
    pub enum ProjectOrigin {
        /// Listed in its runner's configuration.
        Configured = "configured",
        /// A checkout a caller opened as itself (`work_on_project` with `path`).
        Checkout = "checkout",
        /// A managed worktree its runner made for a caller (`mode=worktree`).
        Worktree = "worktree",
    }
}

string_schema!(ProjectId, "maxLength": ProjectId::MAX_CHARS, "pattern": ProjectId::PATTERN,
    "x-problem": "must not contain control characters");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runner_ids_round_trip() {
        let id = ProjectId::of_runner("local", "alpha").unwrap();
        assert_eq!(id.as_str(), "agent:local:alpha");
        assert_eq!(id.runner_parts(), Some(("local", "alpha")));
        assert_eq!(ProjectId::parse("elsewhere").unwrap().runner_parts(), None);
    }

    #[test]
    fn bounds_and_controls_are_refused() {
        assert!(ProjectId::parse("").is_err());
        assert!(ProjectId::parse(&"é".repeat(300)).is_ok());
        assert!(ProjectId::parse(&"é".repeat(301)).is_err());
        assert!(ProjectId::parse("a\nb").is_err());
        assert!(ProjectId::parse("a\u{7f}").is_err());
    }

    proptest::proptest! {
        #[test]
        fn the_schema_pattern_and_the_parser_agree(raw in "[a-z:\\x00-\\x20\\x7f\\u{80}-\\u{a0}]{1,12}") {
            let pattern = regex::Regex::new(ProjectId::PATTERN).unwrap();
            proptest::prop_assert_eq!(pattern.is_match(&raw), ProjectId::parse(&raw).is_ok());
        }
    }
}
