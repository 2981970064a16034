//! Session execution defaults (`SessionExecutionContext`): a closed set of strongly typed
//! fields, validated at construction so that nothing else can be stored.

use serde::{Deserialize, Serialize};

/// Longest project-relative or remote default cwd.
pub const MAX_CWD_BYTES: usize = 1024;
/// Longest resource name.
pub const MAX_RESOURCE_LEN: usize = 64;

/// Shells a session may default to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Shell {
    /// POSIX sh.
    Sh,
    /// GNU bash.
    Bash,
}

/// A normalized project-relative path: no absolute form, no URI, no `..`, no control
/// characters; `.` segments and duplicate separators are removed. Existence and symlinks are
/// checked later, by the runner, on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProjectRelativePath(String);

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Empty after normalization is fine (the root); this is for over-long input.
    #[error("is longer than {MAX_CWD_BYTES} bytes")]
    TooLong,
    /// Absolute path (`/x`, `C:\x`, `\\server`).
    #[error("must be relative to the project root, not absolute")]
    Absolute,
    /// A URI (`file://…`).
    #[error("must be a path, not a URI")]
    Uri,
    /// Parent traversal.
    #[error("must not contain `..`")]
    Parent,
    /// Control characters.
    #[error("must not contain control characters")]
    Control,
    /// Something the redaction rules take for a credential: an execution default is never a
    /// place for secrets, and storing one would serve it back in every session summary.
    #[error("must not contain credentials")]
    Credential,
}

/// Whether the redaction rules would change `raw`, i.e. it carries something credential-shaped.
fn carries_credential(raw: &str) -> bool {
    crate::redaction::redact(raw) != raw
}

impl ProjectRelativePath {
    /// Validates and normalizes `raw`.
    pub fn parse(raw: &str) -> Result<ProjectRelativePath, PathError> {
        if raw.len() > MAX_CWD_BYTES {
            return Err(PathError::TooLong);
        }
        if raw.chars().any(char::is_control) {
            return Err(PathError::Control);
        }
        if carries_credential(raw) {
            return Err(PathError::Credential);
        }
        let lower = raw.to_ascii_lowercase();
        if let Some((scheme, _)) = lower.split_once("://")
            && !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        {
            return Err(PathError::Uri);
        }
        let bytes = raw.as_bytes();
        let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
        if raw.starts_with('/') || raw.starts_with('\\') || drive || raw.starts_with('~') {
            return Err(PathError::Absolute);
        }
        let mut parts = Vec::new();
        for part in raw.split(['/', '\\']) {
            match part {
                "" | "." => {}
                ".." => return Err(PathError::Parent),
                p => parts.push(p),
            }
        }
        Ok(ProjectRelativePath(parts.join("/")))
    }

    /// The normalized path (`""` is the project root).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Checks a remote default cwd (used with a named resource): bounded, no control characters.
pub fn remote_path(raw: &str) -> Result<String, PathError> {
    if raw.len() > MAX_CWD_BYTES {
        return Err(PathError::TooLong);
    }
    if raw.chars().any(char::is_control) {
        return Err(PathError::Control);
    }
    if carries_credential(raw) {
        return Err(PathError::Credential);
    }
    Ok(raw.to_owned())
}

/// Whether a resource name is acceptable: 1-64 of `[A-Za-z0-9._-]`, and not shaped like a
/// credential (a token is not a resource name).
pub fn valid_resource(name: &str) -> bool {
    (1..=MAX_RESOURCE_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !carries_credential(name)
}

/// The stored execution defaults of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExecutionContext {
    /// Default working directory: project-relative, or remote when `resource` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_cwd: Option<String>,
    /// Default shell for shell tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_shell: Option<Shell>,
    /// Named runner resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_normalize() {
        for (raw, want) in [
            ("src", "src"),
            ("./src//lib/", "src/lib"),
            ("", ""),
            (".", ""),
            ("a\\b", "a/b"),
            ("dir with space/x", "dir with space/x"),
        ] {
            assert_eq!(
                ProjectRelativePath::parse(raw).unwrap().as_str(),
                want,
                "{raw}"
            );
        }
    }

    #[test]
    fn escaping_forms_fail() {
        for (raw, err) in [
            ("/etc", PathError::Absolute),
            ("C:\\Windows", PathError::Absolute),
            ("\\\\server\\share", PathError::Absolute),
            ("~/x", PathError::Absolute),
            ("file:///etc", PathError::Uri),
            ("https://x/y", PathError::Uri),
            ("../x", PathError::Parent),
            ("a/../../b", PathError::Parent),
            ("a\nb", PathError::Control),
            ("a\u{0}b", PathError::Control),
            (
                "build/token=7f3c9a1b2d4e5f60718293a4",
                PathError::Credential,
            ),
            ("src/password=hunter2hunter2", PathError::Credential),
        ] {
            assert_eq!(ProjectRelativePath::parse(raw), Err(err), "{raw:?}");
        }
        assert_eq!(
            ProjectRelativePath::parse(&"a".repeat(MAX_CWD_BYTES + 1)),
            Err(PathError::TooLong)
        );
    }

    #[test]
    fn resources_and_remote_paths() {
        assert!(valid_resource("build-box_1.eu"));
        assert!(!valid_resource("") && !valid_resource("a b") && !valid_resource(&"x".repeat(65)));
        assert_eq!(remote_path("/home/dev/x").unwrap(), "/home/dev/x");
        assert!(remote_path("x\ry").is_err());
        assert_eq!(
            remote_path("/srv/password=hunter2hunter2"),
            Err(PathError::Credential)
        );
        assert!(!valid_resource(
            "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"
        ));
    }
}
