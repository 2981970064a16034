//! Bounded caller text: each shape owns its length bounds, the pattern its JSON Schema
//! publishes, the check its parser makes, and the sentence a caller reads when a value breaks
//! it. The sentence travels in the schema as [`PROBLEM_KEYWORD`], which the argument validator
//! reads and the published schemas leave out.

use crate::ParseError;

/// The schema keyword beside a `pattern` (or `not`) that says, for a caller, what a value
/// breaking it got wrong. An annotation: validators ignore it; wc's names it in the refusal.
pub const PROBLEM_KEYWORD: &str = "x-problem";

/// Counts `raw`'s characters against `min..=max` (`what` names the word in the refusal).
fn check_length(what: &'static str, raw: &str, min: usize, max: usize) -> Result<(), ParseError> {
    let n = raw.chars().count();
    if n < min {
        let least = if min == 1 {
            "must not be empty".to_owned()
        } else {
            format!("must be at least {min} characters")
        };
        return Err(ParseError::new(what, least));
    }
    if n > max {
        return Err(ParseError::new(
            what,
            format!("must be at most {max} characters"),
        ));
    }
    Ok(())
}

/// The impls a bounded text type shares: access, `Display`, serde parsed on the way in.
macro_rules! bounded_text {
    ($name:ident $(<$(const $param:ident: usize),+>)?) => {
        impl$(<$(const $param: usize),+>)? $name$(<$($param),+>)? {
            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
            /// The text, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }
        impl$(<$(const $param: usize),+>)? ::std::fmt::Display for $name$(<$($param),+>)? {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl$(<$(const $param: usize),+>)? ::std::ops::Deref for $name$(<$($param),+>)? {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }
        impl$(<$(const $param: usize),+>)? AsRef<str> for $name$(<$($param),+>)? {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
        impl$(<$(const $param: usize),+>)? From<$name$(<$($param),+>)?> for String {
            fn from(v: $name$(<$($param),+>)?) -> String {
                v.0
            }
        }
        impl$(<$(const $param: usize),+>)? ::serde::Serialize for $name$(<$($param),+>)? {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }
        impl<'de $($(, const $param: usize)+)?> ::serde::Deserialize<'de> for $name$(<$($param),+>)? {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                $name::parse(raw).map_err(::serde::de::Error::custom)
            }
        }
    };
}

/// The schema of a bounded text type, inlined where it is used.
macro_rules! bounded_schema {
    ($name:ident $(<$(const $param:ident: usize),+>)?, $($key:literal: $value:expr),+ $(,)?) => {
        #[cfg(feature = "schema")]
        impl$(<$(const $param: usize),+>)? ::schemars::JsonSchema for $name$(<$($param),+>)? {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn inline_schema() -> bool {
                true
            }
            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                let mut schema = ::schemars::json_schema!({ "type": "string" });
                $(
                    let value = ::serde_json::to_value($value).expect("a schema value");
                    // A zero lower bound says nothing.
                    if !($key == "minLength" && value == 0) {
                        schema.insert($key.to_owned(), value);
                    }
                )+
                schema
            }
        }
    };
}

/// Free text of `MIN..=MAX` characters without a NUL character: a message body, a note, a
/// patch, a script, standard input. Anything else goes, newlines included.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Text<const MIN: usize, const MAX: usize>(String);

impl<const MIN: usize, const MAX: usize> Text<MIN, MAX> {
    /// The schema's pattern: no NUL anywhere.
    pub const PATTERN: &'static str = r"^[^\u0000]*$";
    /// What a caller reads when a value holds a NUL.
    pub const PROBLEM: &'static str = "must not contain a NUL character (\\u0000)";

    /// Checks `raw` against the bounds and the pattern.
    pub fn parse(raw: impl Into<String>) -> Result<Self, ParseError> {
        let raw = raw.into();
        check_length("text", &raw, MIN, MAX)?;
        if raw.contains('\0') {
            return Err(ParseError::new("text", Self::PROBLEM));
        }
        Ok(Text(raw))
    }
}

bounded_text!(Text<const MIN: usize, const MAX: usize>);
bounded_schema!(Text<const MIN: usize, const MAX: usize>,
    "minLength": MIN, "maxLength": MAX, "pattern": Self::PATTERN, "x-problem": Self::PROBLEM);

/// One line of `MIN..=MAX` characters without control characters (C0, DEL or C1): a glob, a
/// purpose, a label.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Line<const MIN: usize, const MAX: usize>(String);

impl<const MIN: usize, const MAX: usize> Line<MIN, MAX> {
    /// The schema's pattern: no control character anywhere.
    pub const PATTERN: &'static str = r"^[^\x00-\x1F\x7F-\x9F]*$";
    /// What a caller reads when a value holds one.
    pub const PROBLEM: &'static str =
        "must be one line without control characters (no newline, tab or escape)";

    /// Checks `raw` against the bounds and the pattern.
    pub fn parse(raw: impl Into<String>) -> Result<Self, ParseError> {
        let raw = raw.into();
        check_length("line", &raw, MIN, MAX)?;
        if raw.chars().any(char::is_control) {
            return Err(ParseError::new("line", Self::PROBLEM));
        }
        Ok(Line(raw))
    }
}

bounded_text!(Line<const MIN: usize, const MAX: usize>);
bounded_schema!(Line<const MIN: usize, const MAX: usize>,
    "minLength": MIN, "maxLength": MAX, "pattern": Self::PATTERN, "x-problem": Self::PROBLEM);

/// A gitignore-syntax glob (`*.rs`, `src/**/*.ts`, `!vendor/`): one line of 1-256
/// characters.
pub type Glob = Line<1, 256>;

/// A name of `1..=MAX` characters from `A-Z a-z 0-9 . _ : -`: a caller-chosen key, a runner
/// resource. Never whitespace, never a path separator.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key<const MAX: usize>(String);

impl<const MAX: usize> Key<MAX> {
    /// The schema's pattern.
    pub const PATTERN: &'static str = r"^[A-Za-z0-9._:-]+$";
    /// What a caller reads when a value breaks it.
    pub const PROBLEM: &'static str =
        "must be letters, digits and `.` `_` `:` `-` only (no spaces or `/`)";

    /// Checks `raw` against the bounds and the pattern.
    pub fn parse(raw: impl Into<String>) -> Result<Self, ParseError> {
        let raw = raw.into();
        check_length("key", &raw, 1, MAX)?;
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
        if !raw.chars().all(allowed) {
            return Err(ParseError::new("key", Self::PROBLEM));
        }
        Ok(Key(raw))
    }
}

bounded_text!(Key<const MAX: usize>);
bounded_schema!(Key<const MAX: usize>,
    "minLength": 1, "maxLength": MAX, "pattern": Self::PATTERN, "x-problem": Self::PROBLEM);

/// A SHA-256 digest as 64 lowercase hexadecimal digits, as file reads report it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sha256Hex(String);

impl Sha256Hex {
    /// The schema's pattern.
    pub const PATTERN: &'static str = r"^[0-9a-f]{64}$";
    /// What a caller reads when a value breaks it.
    pub const PROBLEM: &'static str =
        "must be 64 lowercase hexadecimal digits: the sha256 a file read reported";

    /// Checks `raw`.
    pub fn parse(raw: impl Into<String>) -> Result<Self, ParseError> {
        let raw = raw.into();
        let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
        if raw.len() != 64 || !raw.chars().all(hex) {
            return Err(ParseError::new("sha256", Self::PROBLEM));
        }
        Ok(Sha256Hex(raw))
    }
}

bounded_text!(Sha256Hex);
bounded_schema!(Sha256Hex, "pattern": Self::PATTERN, "x-problem": Self::PROBLEM);

/// A checkpoint's id as the runner hands it out: `ck-` and 12 lowercase hexadecimal digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CheckpointId(String);

impl CheckpointId {
    /// The schema's pattern.
    pub const PATTERN: &'static str = r"^ck-[0-9a-f]{12}$";
    /// What a caller reads when a value breaks it.
    pub const PROBLEM: &'static str = "must be a checkpoint id as create_checkpoint or list_checkpoints gave it: `ck-` and 12 hex digits";

    /// Checks `raw`.
    pub fn parse(raw: impl Into<String>) -> Result<Self, ParseError> {
        let raw = raw.into();
        let ok = raw
            .strip_prefix("ck-")
            .is_some_and(|hex| hex.len() == 12 && is_lower_hex(hex));
        if !ok {
            return Err(ParseError::new("checkpoint id", Self::PROBLEM));
        }
        Ok(CheckpointId(raw))
    }
}

bounded_text!(CheckpointId);
bounded_schema!(CheckpointId, "pattern": Self::PATTERN, "x-problem": Self::PROBLEM);

/// The state of a project's files as checkpoints report it: a Git tree id (40 or 64 lowercase
/// hexadecimal digits), equal for equal content.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TreeState(String);

impl TreeState {
    /// The schema's pattern.
    pub const PATTERN: &'static str = r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$";
    /// What a caller reads when a value breaks it.
    pub const PROBLEM: &'static str =
        "must be a state as list_checkpoints reports it (current_state): 40 or 64 hex digits";

    /// Checks `raw`.
    pub fn parse(raw: impl Into<String>) -> Result<Self, ParseError> {
        let raw = raw.into();
        if !matches!(raw.len(), 40 | 64) || !is_lower_hex(&raw) {
            return Err(ParseError::new("state", Self::PROBLEM));
        }
        Ok(TreeState(raw))
    }
}

bounded_text!(TreeState);
bounded_schema!(TreeState, "pattern": Self::PATTERN, "x-problem": Self::PROBLEM);

/// A revision naming a commit as a caller writes it: a branch, tag or commit id, with `~`
/// and `^` steps (`main`, `origin/main`, `HEAD~2`): 1-200 of letters, digits and `._/~^-`,
/// never starting with `-` (Git would read an option).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Revision(String);

impl Revision {
    /// Longest revision, in characters.
    pub const MAX_CHARS: usize = 200;
    /// The schema's pattern.
    pub const PATTERN: &'static str = r"^[A-Za-z0-9._/~^][A-Za-z0-9._/~^-]*$";
    /// What a caller reads when a value breaks it.
    pub const PROBLEM: &'static str =
        "must name a commit: a branch, tag or commit id such as `main`, `origin/main` or `HEAD~2`";

    /// Checks `raw`.
    pub fn parse(raw: impl Into<String>) -> Result<Self, ParseError> {
        let raw = raw.into();
        check_length("revision", &raw, 1, Self::MAX_CHARS)?;
        let allowed = |b: u8| b.is_ascii_alphanumeric() || b"._/~^-".contains(&b);
        if raw.starts_with('-') || !raw.bytes().all(allowed) {
            return Err(ParseError::new("revision", Self::PROBLEM));
        }
        Ok(Revision(raw))
    }
}

bounded_text!(Revision);
bounded_schema!(Revision, "minLength": 1, "maxLength": Revision::MAX_CHARS,
    "pattern": Self::PATTERN, "x-problem": Self::PROBLEM);

/// An absolute path on a build host, as its operator's filesystem policy names directories
/// (`/home/dev/src/app`): 2-4,096 characters from `/`, no control characters. Only the
/// runner reads it; the server never builds or interprets one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPath(String);

impl HostPath {
    /// Longest path, in characters.
    pub const MAX_CHARS: usize = 4096;
    /// The schema's pattern.
    pub const PATTERN: &'static str = r"^/[^\x00-\x1F\x7F]+$";
    /// What a caller reads when a value breaks it.
    pub const PROBLEM: &'static str =
        "must be an absolute path on the runner's host, such as `/home/dev/src/app`";

    /// Checks `raw`.
    pub fn parse(raw: impl Into<String>) -> Result<Self, ParseError> {
        let raw = raw.into();
        check_length("host path", &raw, 2, Self::MAX_CHARS)?;
        if !raw.starts_with('/') || raw.chars().any(|c| c.is_ascii_control()) {
            return Err(ParseError::new("host path", Self::PROBLEM));
        }
        Ok(HostPath(raw))
    }
}

bounded_text!(HostPath);
bounded_schema!(HostPath, "minLength": 2, "maxLength": HostPath::MAX_CHARS,
    "pattern": Self::PATTERN, "x-problem": Self::PROBLEM);

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// An opaque page cursor a listing returned as `next_cursor` (URL-safe base64, at most 8,192
/// characters); passed back to read the next page.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cursor(String);

impl Cursor {
    /// Longest cursor, in characters.
    pub const MAX_CHARS: usize = 8192;
    /// The schema's pattern.
    pub const PATTERN: &'static str = r"^[A-Za-z0-9_-]+$";
    /// What a caller reads when a value breaks it.
    pub const PROBLEM: &'static str =
        "must be a next_cursor from an earlier page of the same listing, unchanged";

    /// Checks `raw`.
    pub fn parse(raw: impl Into<String>) -> Result<Self, ParseError> {
        let raw = raw.into();
        check_length("cursor", &raw, 1, Self::MAX_CHARS)?;
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-');
        if !raw.chars().all(allowed) {
            return Err(ParseError::new("cursor", Self::PROBLEM));
        }
        Ok(Cursor(raw))
    }
}

bounded_text!(Cursor);
bounded_schema!(Cursor, "minLength": 1, "maxLength": Cursor::MAX_CHARS,
    "pattern": Self::PATTERN, "x-problem": Self::PROBLEM);

/// A program name found on the build host's `PATH` (`sh`, `python3`, `node`): 1-64 of
/// `A-Z a-z 0-9 . _ + -`, not starting with `-`, never a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProgramName(String);

impl ProgramName {
    /// The schema's pattern.
    pub const PATTERN: &'static str = r"^[A-Za-z0-9._+][A-Za-z0-9._+-]{0,63}$";
    /// What a caller reads when a value breaks it.
    pub const PROBLEM: &'static str = "must be a program name like `python3` (1-64 of letters, digits and `. _ + -`, not starting with `-`), not a path";

    /// Checks `raw`.
    pub fn parse(raw: impl Into<String>) -> Result<Self, ParseError> {
        let raw = raw.into();
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-');
        if raw.is_empty() || raw.len() > 64 || raw.starts_with('-') || !raw.chars().all(allowed) {
            return Err(ParseError::new("program name", Self::PROBLEM));
        }
        Ok(ProgramName(raw))
    }
}

bounded_text!(ProgramName);
bounded_schema!(ProgramName, "pattern": Self::PATTERN, "x-problem": Self::PROBLEM);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_bounds_count_characters_and_refuse_nul() {
        assert!(Text::<1, 3>::parse("é€x").is_ok());
        assert!(Text::<1, 3>::parse("abcd").is_err());
        assert_eq!(
            Text::<1, 3>::parse("").unwrap_err().to_string(),
            "text must not be empty"
        );
        assert!(Text::<0, 3>::parse("").is_ok());
        assert!(Text::<0, 9>::parse("a\nb\tc").is_ok());
        let nul = Text::<0, 9>::parse("a\0b").unwrap_err();
        assert_eq!(nul.problem, Text::<0, 9>::PROBLEM);
    }

    #[test]
    fn lines_keys_digests_cursors_and_program_names_refuse_what_their_pattern_refuses() {
        assert!(Line::<1, 9>::parse("src/*.rs").is_ok());
        assert!(Line::<1, 9>::parse("a\nb").is_err());
        assert!(Line::<1, 9>::parse("a\u{85}b").is_err());
        assert!(Key::<8>::parse("a.b:c-d_").is_ok());
        assert!(Key::<8>::parse("a b").is_err());
        assert!(Key::<8>::parse("a/b").is_err());
        assert!(Sha256Hex::parse("0".repeat(64)).is_ok());
        assert!(Sha256Hex::parse("A".repeat(64)).is_err());
        assert!(Sha256Hex::parse("0".repeat(63)).is_err());
        assert!(CheckpointId::parse("ck-0123456789ab").is_ok());
        for bad in [
            "ck-0123456789",
            "ck-0123456789AB",
            "cp-0123456789ab",
            "ck-0123456789abc",
        ] {
            assert!(CheckpointId::parse(bad).is_err(), "{bad}");
        }
        assert!(TreeState::parse("a".repeat(40)).is_ok());
        assert!(TreeState::parse("a".repeat(64)).is_ok());
        assert!(TreeState::parse("a".repeat(50)).is_err());
        assert!(TreeState::parse("g".repeat(40)).is_err());
        assert!(Cursor::parse("eyJhIjoxfQ-_").is_ok());
        assert!(Cursor::parse("eyJhIjoxfQ==").is_err());
        assert!(ProgramName::parse("python3").is_ok());
        assert!(ProgramName::parse("-c").is_err());
        assert!(ProgramName::parse("/bin/sh").is_err());
        assert!(ProgramName::parse("x".repeat(65)).is_err());
    }

    #[test]
    fn serde_parses_on_the_way_in() {
        let ok: Key<4> = serde_json::from_str("\"ab\"").unwrap();
        assert_eq!(ok.as_str(), "ab");
        let refused = serde_json::from_str::<Key<4>>("\"a b\"").unwrap_err();
        assert!(refused.to_string().contains(Key::<4>::PROBLEM), "{refused}");
    }
}

#[cfg(all(test, feature = "schema"))]
mod schema_tests {
    use super::*;

    /// The published pattern and the parser agree on a spread of inputs.
    fn agree<T: schemars::JsonSchema>(parse: impl Fn(&str) -> bool, inputs: &[&str]) {
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
        let validator = jsonschema::validator_for(schema.as_value()).unwrap();
        for raw in inputs {
            let value = serde_json::Value::from(*raw);
            assert_eq!(validator.is_valid(&value), parse(raw), "{raw:?}");
        }
    }

    #[test]
    fn schemas_and_parsers_agree() {
        let inputs = [
            "",
            "a",
            "a\0",
            "a\nb",
            "a b",
            "a/b",
            "-x",
            "x-",
            "é",
            "\u{85}",
            "ab:cd",
            "AB",
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef01234567",
            "ck-0123456789ab",
            "ck-0123456789ab\n",
            "origin/main~2",
            "--output=x",
            "/",
            "/home/dev/src",
            "/home/d\tev",
            "relative/dir",
        ];
        agree::<Text<0, 4>>(|r| Text::<0, 4>::parse(r).is_ok(), &inputs);
        agree::<Line<1, 4>>(|r| Line::<1, 4>::parse(r).is_ok(), &inputs);
        agree::<Key<4>>(|r| Key::<4>::parse(r).is_ok(), &inputs);
        agree::<Sha256Hex>(|r| Sha256Hex::parse(r).is_ok(), &inputs);
        agree::<Cursor>(|r| Cursor::parse(r).is_ok(), &inputs);
        agree::<ProgramName>(|r| ProgramName::parse(r).is_ok(), &inputs);
        agree::<CheckpointId>(|r| CheckpointId::parse(r).is_ok(), &inputs);
        agree::<TreeState>(|r| TreeState::parse(r).is_ok(), &inputs);
        agree::<Revision>(|r| Revision::parse(r).is_ok(), &inputs);
        agree::<HostPath>(|r| HostPath::parse(r).is_ok(), &inputs);
    }
}
