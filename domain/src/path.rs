//! Project-relative paths: the one form every path a caller names inside a project takes,
//! checked here for the functions (tool arguments, session defaults) and for the runner (the
//! work item it receives). Existence, symlinks and the real root are the runner's checks,
//! made against the filesystem.

use crate::ParseError;

/// A normalized project-relative path. Refused: absolute forms (`/x`, `~x`), URIs and drive
/// letters (any `:`), backslashes (a Windows path), `..` segments, control characters, more
/// than 1,024 characters. `.` segments and repeated or trailing `/` are dropped, so the
/// project root is the empty path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelativePath(String);

/// Characters no path may hold: `\`, `:`, C0 and C1 controls, DEL.
macro_rules! excluded {
    () => {
        r"\\:\x00-\x1F\x7F-\x9F"
    };
}

impl RelativePath {
    /// Longest path, in characters.
    pub const MAX_CHARS: usize = 1024;

    /// The pattern of the JSON Schema: no excluded character, and no leading `/` or `~`.
    /// With [`Self::NOT_PATTERN`] it is the rule [`Self::parse`] checks.
    pub const PATTERN: &'static str = concat!("^(?:[^/~", excluded!(), "][^", excluded!(), "]*)?$");

    /// What a caller reads when a path breaks [`Self::PATTERN`] or [`Self::NOT_PATTERN`].
    pub const PROBLEM: &'static str = "must be relative to the project root, like `src/main.rs`: no leading `/` or `~`, no `..` segment, no `:`, `\\` or control characters";

    /// What the schema's `not` refuses: a `..` segment.
    pub const NOT_PATTERN: &'static str = r"(^|/)\.\.(/|$)";

    /// Validates and normalizes `raw`.
    pub fn parse(raw: &str) -> Result<RelativePath, ParseError> {
        let refuse = |problem: &str| Err(ParseError::new("project-relative path", problem));
        if raw.chars().count() > Self::MAX_CHARS {
            return refuse("must be at most 1024 characters");
        }
        if raw
            .chars()
            .any(|c| c <= '\u{1F}' || ('\u{7F}'..='\u{9F}').contains(&c))
        {
            return refuse("must not contain control characters");
        }
        if raw.contains(':') {
            return refuse(
                "must be a path relative to the project root, not a URI or drive (no `:`)",
            );
        }
        if raw.contains('\\') {
            return refuse("must use `/` as its separator, not `\\`");
        }
        if raw.starts_with('/') || raw.starts_with('~') {
            return refuse(
                "must be relative to the project root, like `src/main.rs`, not absolute",
            );
        }
        let mut parts = Vec::new();
        for part in raw.split('/') {
            match part {
                "" | "." => {}
                ".." => return refuse("must not contain a `..` segment"),
                p => parts.push(p),
            }
        }
        Ok(RelativePath(parts.join("/")))
    }

    /// The project root.
    pub fn root() -> RelativePath {
        RelativePath(String::new())
    }

    /// Whether this is the project root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The segments, outermost first (none for the root).
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|s| !s.is_empty())
    }
}

text_newtype!(RelativePath);

/// Inlined where it is used, as every string type's schema is.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for RelativePath {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RelativePath".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "maxLength": RelativePath::MAX_CHARS,
            "pattern": RelativePath::PATTERN,
            "not": { "type": "string", "pattern": RelativePath::NOT_PATTERN },
            "x-problem": RelativePath::PROBLEM,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes() {
        for (raw, norm) in [
            ("", ""),
            (".", ""),
            ("./", ""),
            ("src", "src"),
            ("./src//lib/", "src/lib"),
            ("a/./b", "a/b"),
            (".github/workflows", ".github/workflows"),
            ("..hidden", "..hidden"),
            ("a/~b", "a/~b"),
            ("a=b", "a=b"),
        ] {
            assert_eq!(RelativePath::parse(raw).unwrap().as_str(), norm, "{raw:?}");
        }
        assert!(RelativePath::parse(".").unwrap().is_root());
        assert_eq!(
            RelativePath::parse("a/b")
                .unwrap()
                .segments()
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
    }

    #[test]
    fn refuses_with_the_reason() {
        for (raw, why) in [
            ("/etc", "absolute"),
            ("~/x", "absolute"),
            ("~", "absolute"),
            ("file:///etc", "URI"),
            ("C:/x", "URI"),
            ("a\\b", "separator"),
            ("../x", "`..`"),
            ("a/../b", "`..`"),
            ("a/..", "`..`"),
            ("a\nb", "control"),
            ("a\u{85}b", "control"),
        ] {
            let e = RelativePath::parse(raw).unwrap_err();
            assert!(e.problem.contains(why), "{raw:?}: {e}");
        }
        assert!(RelativePath::parse(&"a".repeat(1024)).is_ok());
        assert!(RelativePath::parse(&"a".repeat(1025)).is_err());
    }

    proptest::proptest! {
        #[test]
        fn the_schema_pattern_and_the_parser_agree(raw in "[a.~/:\\\\=\\x00\\x1f\\x7f\\u{85}é ]{0,10}") {
            let pattern = regex::Regex::new(RelativePath::PATTERN).unwrap();
            let not = regex::Regex::new(RelativePath::NOT_PATTERN).unwrap();
            let schema_accepts = pattern.is_match(&raw) && !not.is_match(&raw);
            proptest::prop_assert_eq!(schema_accepts, RelativePath::parse(&raw).is_ok(), "{:?}", raw);
        }
    }
}
