//! Project Memory keys: the logical identity of a memory entry within a project (its
//! incarnation has its own id). Lowercase so two spellings never name two entries.

use crate::ParseError;

/// A Project Memory key: 1-128 characters, starting with `a-z` or `0-9`, then `a-z`, `0-9`,
/// `.`, `_`, `-`, `/` or `:`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemoryKey(String);

impl MemoryKey {
    /// Longest key.
    pub const MAX_LEN: usize = 128;
    /// The pattern of the JSON Schema, the same rule [`Self::parse`] checks.
    pub const PATTERN: &'static str = r"^[a-z0-9][a-z0-9._/:-]{0,127}$";
    /// What a caller reads when a key breaks the pattern.
    pub const PROBLEM: &'static str = "must be 1-128 characters of a-z, 0-9, `.`, `_`, `/`, `:` or `-`, starting with a letter or digit";

    /// Accepts the key form.
    pub fn parse(raw: &str) -> Result<MemoryKey, ParseError> {
        let mut bytes = raw.bytes();
        let first_ok = bytes
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let rest_ok = bytes.all(|b| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || matches!(b, b'.' | b'_' | b'/' | b':' | b'-')
        });
        if first_ok && rest_ok && raw.len() <= Self::MAX_LEN {
            Ok(MemoryKey(raw.to_owned()))
        } else {
            Err(ParseError::new("memory key", Self::PROBLEM))
        }
    }
}

text_newtype!(MemoryKey);

string_schema!(MemoryKey, "minLength": 1, "maxLength": MemoryKey::MAX_LEN, "pattern": MemoryKey::PATTERN, "x-problem": MemoryKey::PROBLEM);

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn the_schema_pattern_and_the_parser_agree(raw in "[a-zA-Z0-9._/: -]{0,130}") {
            let pattern = regex::Regex::new(MemoryKey::PATTERN).unwrap();
            proptest::prop_assert_eq!(pattern.is_match(&raw), MemoryKey::parse(&raw).is_ok());
        }
    }

    #[test]
    fn keys() {
        assert!(MemoryKey::parse("build/commands").is_ok());
        assert!(MemoryKey::parse("Build").is_err());
        assert!(MemoryKey::parse("-x").is_err());
        assert!(MemoryKey::parse("").is_err());
    }
}
