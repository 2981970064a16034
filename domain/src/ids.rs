//! Random, unguessable ids: a prefix naming the kind and base64url characters. An id grants
//! reach to what it names once authority is checked, so ids are never sequential. Validity
//! of the form says nothing about existence.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;

use crate::ParseError;

/// Characters a freshly generated id carries after its prefix: 16 random bytes, unpadded
/// base64url.
pub const GENERATED_BODY_CHARS: usize = 22;

/// Whether `body` is `min..=max` characters of `[A-Za-z0-9_-]`.
fn valid_body(body: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&body.len())
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// What a malformed id of this form is told.
fn form_problem(prefix: &str, min: usize, max: usize) -> String {
    let count = if min == max {
        min.to_string()
    } else {
        format!("{min}-{max}")
    };
    format!("must be `{prefix}` followed by {count} characters of A-Z, a-z, 0-9, `_` or `-`")
}

fn random_body() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

macro_rules! random_id {
    (
        $(#[doc = $doc:literal])*
        $name:ident, $what:literal, prefix = $prefix:literal, body = $min:literal..=$max:literal
    ) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = $prefix;
            /// The pattern of the JSON Schema, the same rule [`Self::parse`] checks.
            pub const PATTERN: &'static str =
                concat!("^", $prefix, "[A-Za-z0-9_-]{", $min, ",", $max, "}$");
            /// Longest id.
            pub const MAX_LEN: usize = $prefix.len() + $max;

            /// A fresh id.
            pub fn generate() -> $name {
                $name(format!("{}{}", $prefix, random_body()))
            }

            /// Accepts the prefix followed by the body form.
            pub fn parse(raw: &str) -> Result<$name, ParseError> {
                match raw.strip_prefix($prefix) {
                    Some(body) if valid_body(body, $min, $max) => Ok($name(raw.to_owned())),
                    _ => Err(ParseError::new($what, form_problem($prefix, $min, $max))),
                }
            }
        }

        text_newtype!($name);

        // The pattern fixes the length too: no separate bounds to repeat in every listing.
        string_schema!($name, "pattern": $name::PATTERN,
            "x-problem": form_problem($prefix, $min, $max));
    };
}

random_id! {
    /// A Workflow Session id (`wc_sess_…`). Stored ids carry 22-64 body characters.
    SessionId, "session id", prefix = "wc_sess_", body = 22..=64
}

random_id! {
    /// A session message id (`wc_msg_…`).
    MessageId, "message id", prefix = "wc_msg_", body = 22..=22
}

random_id! {
    /// A persistent shell id (`wc_shell_…`): bound to one session's one shell; a closed id
    /// never addresses a later shell.
    ShellId, "shell id", prefix = "wc_shell_", body = 22..=22
}

random_id! {
    /// A durable MCP task id (`wc_task_…`): one tool call answered later; never reused.
    TaskId, "task id", prefix = "wc_task_", body = 22..=22
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_parse_match_their_pattern_and_differ() {
        let pattern = regex::Regex::new(SessionId::PATTERN).unwrap();
        let a = SessionId::generate();
        let b = SessionId::generate();
        assert_ne!(a, b);
        assert_eq!(
            a.as_str().len(),
            SessionId::PREFIX.len() + GENERATED_BODY_CHARS
        );
        assert!(pattern.is_match(a.as_str()));
        assert_eq!(SessionId::parse(a.as_str()), Ok(a));
        let m = MessageId::generate();
        assert!(
            regex::Regex::new(MessageId::PATTERN)
                .unwrap()
                .is_match(m.as_str())
        );
        assert_eq!(MessageId::parse(m.as_str()), Ok(m));
        let s = ShellId::generate();
        assert_eq!(ShellId::parse(s.as_str()), Ok(s));
        let t = TaskId::generate();
        assert_eq!(TaskId::parse(t.as_str()), Ok(t));
    }

    #[test]
    fn malformed_ids_are_refused_naming_the_form() {
        for bad in [
            "",
            "wc_sess_",
            "wc_sess_short",
            "sess_aaaaaaaaaaaaaaaaaaaaaaaa",
            "wc_sess_aaaaaaaaaaaaaaaaaaaaa!",
            "wc_msg_aaaaaaaaaaaaaaaaaaaaaa",
            // An audit session UUID is not a Workflow Session id.
            "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
        ] {
            let e = SessionId::parse(bad).unwrap_err();
            assert_eq!(e.what, "session id", "{bad}");
            assert!(e.problem.contains("wc_sess_"), "{e}");
        }
        assert!(SessionId::parse(&format!("wc_sess_{}", "a".repeat(65))).is_err());
        assert!(SessionId::parse(&format!("wc_sess_{}", "a".repeat(64))).is_ok());
        assert!(MessageId::parse("wc_msg_1").is_err());
        assert!(MessageId::parse(&format!("wc_msg_{}", "a".repeat(23))).is_err());
    }

    #[test]
    fn serde_parses_on_the_way_in() {
        let ok: SessionId = serde_json::from_str("\"wc_sess_AAAAAAAAAAAAAAAAAAAAAA\"").unwrap();
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            "\"wc_sess_AAAAAAAAAAAAAAAAAAAAAA\""
        );
        let err = serde_json::from_str::<SessionId>("\"wc_sess_x\"").unwrap_err();
        assert!(err.to_string().contains("session id must be"), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn the_schema_pattern_and_the_parser_agree(raw in "(wc_sess_|wc_msg_|wc_shell_|wc_task_|wc_)?[A-Za-z0-9_!. -]{0,70}") {
            for (pattern, parsed) in [
                (SessionId::PATTERN, SessionId::parse(&raw).is_ok()),
                (MessageId::PATTERN, MessageId::parse(&raw).is_ok()),
                (ShellId::PATTERN, ShellId::parse(&raw).is_ok()),
                (TaskId::PATTERN, TaskId::parse(&raw).is_ok()),
            ] {
                proptest::prop_assert_eq!(regex::Regex::new(pattern).unwrap().is_match(&raw), parsed, "{}", pattern);
            }
        }
    }
}
