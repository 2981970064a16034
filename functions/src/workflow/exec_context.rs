//! Session execution defaults (`SessionExecutionContext`): a closed set of strongly typed
//! fields, validated at construction so that nothing else can be stored.

use serde::{Deserialize, Serialize};
use wc_domain::{ParseError, RelativePath};

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

/// Why a default cwd was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// A remote path over the bound.
    #[error("is longer than {MAX_CWD_BYTES} bytes")]
    TooLong,
    /// Control characters in a remote path.
    #[error("must not contain control characters")]
    Control,
    /// Something the redaction rules take for a credential: an execution default is never a
    /// place for secrets, and storing one would serve it back in every session summary.
    #[error("must not contain credentials")]
    Credential,
    /// Not a project-relative path (the form every project path takes).
    #[error("{}", .0.problem)]
    Form(ParseError),
}

/// Whether the redaction rules would change `raw`, i.e. it carries something credential-shaped.
fn carries_credential(raw: &str) -> bool {
    crate::redaction::redact(raw) != raw
}

/// A project-relative default cwd: the one [`RelativePath`] form, and nothing
/// credential-shaped (a default is stored and served back).
pub fn project_cwd(raw: &str) -> Result<RelativePath, PathError> {
    let path = RelativePath::parse(raw).map_err(PathError::Form)?;
    if carries_credential(raw) {
        return Err(PathError::Credential);
    }
    Ok(path)
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

/// A named runner resource as a caller gives it: 1-[`MAX_RESOURCE_LEN`] of
/// `A-Z a-z 0-9 . _ -`. Whether it is shaped like a credential is [`valid_resource`]'s check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceName(String);

impl ResourceName {
    /// The schema's pattern.
    pub const PATTERN: &'static str = r"^[A-Za-z0-9._-]{1,64}$";
    /// What a caller reads when a name breaks it.
    pub const PROBLEM: &'static str = "must be 1-64 of A-Z a-z 0-9 . _ -";

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl<'de> Deserialize<'de> for ResourceName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        if resource_form(&raw) {
            Ok(ResourceName(raw))
        } else {
            Err(serde::de::Error::custom(format!(
                "resource {}",
                Self::PROBLEM
            )))
        }
    }
}

impl schemars::JsonSchema for ResourceName {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ResourceName".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "maxLength": MAX_RESOURCE_LEN,
            "pattern": Self::PATTERN,
            "x-problem": Self::PROBLEM,
        })
    }
}

/// Whether a resource name is acceptable: 1-64 of `[A-Za-z0-9._-]`, and not shaped like a
/// credential (a token is not a resource name).
pub fn valid_resource(name: &str) -> bool {
    resource_form(name) && !carries_credential(name)
}

/// Whether `name` has a resource name's form: 1-[`MAX_RESOURCE_LEN`] of `[A-Za-z0-9._-]`.
fn resource_form(name: &str) -> bool {
    (1..=MAX_RESOURCE_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
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
    fn project_cwds_are_relative_paths_without_credentials() {
        assert_eq!(project_cwd("./src//lib/").unwrap().as_str(), "src/lib");
        assert!(project_cwd(".").unwrap().is_root());
        for raw in ["/etc", "C:\\Windows", "~/x", "file:///etc", "../x", "a\nb"] {
            assert!(
                matches!(project_cwd(raw), Err(PathError::Form(_))),
                "{raw:?}"
            );
        }
        for raw in [
            "build/token=7f3c9a1b2d4e5f60718293a4",
            "src/password=hunter2hunter2",
        ] {
            assert_eq!(project_cwd(raw), Err(PathError::Credential), "{raw:?}");
        }
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
