//! Structured validation: a toolchain's checker or test runner (`cargo check`, `cargo test`,
//! `go test`, `pytest`, …) run by the runner as a sandboxed job in the project, its whole
//! output read by a parser for the tool, and answered with counts, failing identities and
//! diagnostics ([`ValidationAnswer`]) whatever the exit status.
//!
//! The caller names a [`Validator`] and a typed [`ValidationScope`]; the runner builds the
//! command line from them, so no caller text is ever read by a shell, and every scope value is
//! a name or a filter that cannot be taken for an option. Every list and text of the answer is
//! bounded by the constants here.

use serde::{Deserialize, Serialize};

use crate::{ProtocolError, RelativePath, refuse};

/// Features named in one scope.
pub const MAX_VALIDATION_FEATURES: usize = 32;
/// Bytes of a package, feature or filter name.
pub const MAX_SCOPE_NAME_BYTES: usize = 200;
/// Failing identities an answer names (the rest are counted).
pub const MAX_VALIDATION_FAILURES: usize = 32;
/// Bytes of one failing identity.
pub const MAX_FAILURE_IDENTITY_BYTES: usize = 300;
/// Diagnostics an answer shows (the rest are counted by level).
pub const MAX_SHOWN_DIAGNOSTICS: usize = 5;
/// Bytes of a shown diagnostic's message.
pub const MAX_DIAGNOSTIC_MESSAGE_BYTES: usize = 400;
/// Longest output line a parser reads; a longer one is skipped and makes the evidence
/// incomplete when it could have held a count.
pub const MAX_PARSED_LINE_BYTES: usize = 1024 * 1024;

/// The validation tools.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Validator {
    /// `cargo check --message-format=json`.
    CargoCheck,
    /// `cargo test --no-fail-fast`: compiler messages and libtest's summary lines.
    CargoTest,
    /// `cargo fmt --check`: the files rustfmt would change.
    CargoFmt,
    /// `cargo clippy --message-format=json`.
    CargoClippy,
    /// `go test -json`.
    GoTest,
    /// `python3 -m pytest`: its short test summary and final counts.
    Pytest,
}

impl Validator {
    /// Every validator.
    pub const ALL: [Validator; 6] = [
        Validator::CargoCheck,
        Validator::CargoTest,
        Validator::CargoFmt,
        Validator::CargoClippy,
        Validator::GoTest,
        Validator::Pytest,
    ];

    /// The tool name (also its wire string).
    pub fn as_str(self) -> &'static str {
        match self {
            Validator::CargoCheck => "cargo_check",
            Validator::CargoTest => "cargo_test",
            Validator::CargoFmt => "cargo_fmt",
            Validator::CargoClippy => "cargo_clippy",
            Validator::GoTest => "go_test",
            Validator::Pytest => "pytest",
        }
    }

    /// Whether it runs tests (and so answers test counts).
    pub fn runs_tests(self) -> bool {
        matches!(
            self,
            Validator::CargoTest | Validator::GoTest | Validator::Pytest
        )
    }

    /// Whether it is a Cargo command (and so takes Cargo's scope fields).
    pub fn is_cargo(self) -> bool {
        matches!(
            self,
            Validator::CargoCheck
                | Validator::CargoTest
                | Validator::CargoFmt
                | Validator::CargoClippy
        )
    }
}

/// Which Cargo targets a check, lint or test covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CargoTargets {
    /// Cargo's default for the command.
    #[default]
    Default,
    /// `--lib`.
    Lib,
    /// `--bins`.
    Bins,
    /// `--tests`.
    Tests,
    /// `--all-targets`.
    All,
}

/// A plain string enum (the field that takes it names the values).
#[cfg(feature = "schema")]
impl schemars::JsonSchema for CargoTargets {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CargoTargets".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "enum": ["default", "lib", "bins", "tests", "all"]
        })
    }
}

/// What a validation covers. Every field is part of the validation's identity: two runs are
/// comparable only when their scopes are equal. Fields a validator does not take must be left
/// at their defaults ([`ValidateOp::validate`] refuses them otherwise).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidationScope {
    /// Cargo: one package (`-p`). Go: a package pattern (`./...`, `./internal/...`).
    #[serde(default)]
    pub package: Option<String>,
    /// Pytest: a file or directory to collect from.
    #[serde(default)]
    pub path: Option<RelativePath>,
    /// Tests whose name contains (Cargo) or matches (Go `-run`, pytest `-k`) this filter.
    #[serde(default)]
    pub test_filter: Option<String>,
    /// Cargo features to enable.
    #[serde(default)]
    pub features: Vec<String>,
    /// Cargo `--all-features`.
    #[serde(default)]
    pub all_features: bool,
    /// Cargo `--no-default-features`.
    #[serde(default)]
    pub no_default_features: bool,
    /// Cargo targets.
    #[serde(default)]
    pub targets: CargoTargets,
}

/// One structured validation: `{"kind": "validate", "validator": "cargo_test", "scope": {…}}`.
/// It runs in the item's `cwd` (the project root when absent), with no stdin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidateOp {
    /// The tool.
    pub validator: Validator,
    /// What it covers.
    #[serde(default)]
    pub scope: ValidationScope,
}

/// Whether `s` can be handed to a tool as a name: 1-[`MAX_SCOPE_NAME_BYTES`] bytes, no control
/// character, and no leading `-` (it is never taken for an option).
fn valid_scope_text(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SCOPE_NAME_BYTES
        && !s.starts_with('-')
        && !s.chars().any(char::is_control)
}

/// A Cargo package or feature name (with `/` for `dep/feature` and `@` for a version spec).
fn valid_cargo_name(s: &str) -> bool {
    valid_scope_text(s)
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./@:+".contains(&b))
}

impl ValidateOp {
    /// Checks the scope against the validator: every value a name that cannot be taken for an
    /// option, and only the fields the validator takes.
    pub fn validate(&self) -> Result<(), ProtocolError> {
        let s = &self.scope;
        let v = self.validator;
        let name = v.as_str();
        if let Some(p) = &s.package {
            let ok = match v {
                Validator::GoTest => {
                    valid_scope_text(p)
                        && p.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"_-./".contains(&b))
                }
                Validator::Pytest => false,
                _ => valid_cargo_name(p),
            };
            if !ok {
                return refuse(format!(
                    "scope.package {p:?} is not a package name {name} takes (letters, digits and _ - . / only, not starting with -)"
                ));
            }
        }
        if s.path.is_some() && v != Validator::Pytest {
            return refuse(format!("{name} takes no scope.path (use scope.package)"));
        }
        if let Some(f) = &s.test_filter {
            if !v.runs_tests() {
                return refuse(format!(
                    "{name} runs no tests and takes no scope.test_filter"
                ));
            }
            if !valid_scope_text(f) {
                return refuse(format!(
                    "scope.test_filter must be 1-{MAX_SCOPE_NAME_BYTES} bytes without control characters, not starting with -"
                ));
            }
        }
        let cargo_build = v.is_cargo() && v != Validator::CargoFmt;
        let uses_cargo_fields = !s.features.is_empty()
            || s.all_features
            || s.no_default_features
            || s.targets != CargoTargets::Default;
        if uses_cargo_fields && !cargo_build {
            return refuse(format!(
                "{name} takes no features or targets (only cargo_check, cargo_test and cargo_clippy do)"
            ));
        }
        if s.features.len() > MAX_VALIDATION_FEATURES {
            return refuse(format!(
                "scope.features has more than {MAX_VALIDATION_FEATURES} names"
            ));
        }
        if let Some(f) = s.features.iter().find(|f| !valid_cargo_name(f)) {
            return refuse(format!(
                "scope.features holds {f:?}, which is not a feature name"
            ));
        }
        if s.all_features && !s.features.is_empty() {
            return refuse("scope.all_features and scope.features exclude each other");
        }
        Ok(())
    }

    /// The operation's name (the tag of its answer).
    pub fn name(&self) -> &'static str {
        "validate"
    }
}

/// The parser that read a validation's output: results of different parsers (or versions)
/// are never compared.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParserIdentity {
    /// Its name (`cargo-json`, `libtest`, `rustfmt-check`, `go-test-json`, `pytest-summary`).
    pub name: String,
    /// Its version; bumped whenever what it counts changes.
    pub version: u32,
}

/// Test counts.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestCounts {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// Tests ignored or skipped.
    pub ignored: u64,
}

/// Compiler or linter diagnostics, counted by level.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiagnosticCounts {
    /// Errors (including files a formatter would change).
    pub errors: u64,
    /// Warnings.
    pub warnings: u64,
    /// Notes and help messages not attached to another diagnostic.
    pub notes: u64,
}

/// One diagnostic, as shown.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Diagnostic {
    /// `error`, `warning` or `note`.
    pub level: String,
    /// The file it points at, relative to the project root, when it is inside it.
    pub file: Option<RelativePath>,
    /// Its line in that file.
    pub line: Option<u32>,
    /// The lint or error code (`E0308`, `clippy::needless_return`).
    pub code: Option<String>,
    /// Its message, at most [`MAX_DIAGNOSTIC_MESSAGE_BYTES`].
    pub message: String,
}

/// What a validation found, read from its whole output.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidationAnswer {
    /// The parser that read it.
    pub parser: ParserIdentity,
    /// The output proved what is counted here: every summary the tool prints was seen and
    /// nothing that could hold a count was skipped. When `false` the counts are a lower bound.
    pub complete: bool,
    /// Test counts (validators that run tests; `None` when not even one summary was seen).
    pub tests: Option<TestCounts>,
    /// Failing identities (failed tests, packages that did not build, unformatted files), in
    /// the order seen, at most [`MAX_VALIDATION_FAILURES`].
    pub failures: Vec<String>,
    /// Failing identities in all.
    pub failures_total: u64,
    /// Diagnostics by level.
    pub diagnostics: DiagnosticCounts,
    /// The first errors, then warnings, at most [`MAX_SHOWN_DIAGNOSTICS`].
    pub shown_diagnostics: Vec<Diagnostic>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(validator: Validator, scope: ValidationScope) -> ValidateOp {
        ValidateOp { validator, scope }
    }

    #[test]
    fn scopes_take_only_names_their_validator_understands() {
        let cargo = |scope| op(Validator::CargoTest, scope).validate();
        assert!(cargo(ValidationScope::default()).is_ok());
        assert!(
            cargo(ValidationScope {
                package: Some("wc-domain".into()),
                test_filter: Some("tests::adds".into()),
                features: vec!["serde/derive".into()],
                targets: CargoTargets::Tests,
                ..Default::default()
            })
            .is_ok()
        );
        for bad in ["--manifest-path=/etc", "a b", "", "x\n"] {
            let scope = ValidationScope {
                package: Some(bad.into()),
                ..Default::default()
            };
            assert!(cargo(scope).is_err(), "{bad:?}");
        }
        let filter = ValidationScope {
            test_filter: Some("--exact".into()),
            ..Default::default()
        };
        assert!(cargo(filter).is_err());
        let filter = ValidationScope {
            test_filter: Some("adds".into()),
            ..Default::default()
        };
        assert!(op(Validator::CargoCheck, filter).validate().is_err());
        let features = ValidationScope {
            features: vec!["x".into()],
            ..Default::default()
        };
        assert!(
            op(Validator::CargoFmt, features.clone())
                .validate()
                .is_err()
        );
        assert!(op(Validator::GoTest, features).validate().is_err());
        let both = ValidationScope {
            features: vec!["x".into()],
            all_features: true,
            ..Default::default()
        };
        assert!(cargo(both).is_err());
        let go = ValidationScope {
            package: Some("./...".into()),
            ..Default::default()
        };
        assert!(op(Validator::GoTest, go.clone()).validate().is_ok());
        assert!(op(Validator::Pytest, go).validate().is_err());
        let path = ValidationScope {
            path: Some(RelativePath::parse("tests").unwrap()),
            ..Default::default()
        };
        assert!(op(Validator::Pytest, path.clone()).validate().is_ok());
        assert!(cargo(path).is_err());
    }

    #[test]
    fn validate_work_runs_in_its_cwd_and_takes_no_input() {
        let item = |stdin: Option<&str>| crate::WorkItem {
            protocol_version: crate::PROTOCOL_VERSION,
            work_id: uuid::Uuid::now_v7(),
            project: "web".into(),
            cwd: Some(RelativePath::parse("crates/alpha").unwrap()),
            spec: crate::WorkSpec::Validate(op(Validator::CargoCheck, Default::default())),
            stdin: stdin.map(str::to_owned),
            env: Default::default(),
            limits: crate::WorkLimits {
                timeout_ms: 1000,
                output_bytes_per_stream: 1024,
            },
        };
        assert!(item(None).validate().is_ok());
        assert_eq!(item(None).spec.kind(), crate::WorkKind::Validate);
        assert!(
            item(Some("y"))
                .validate()
                .unwrap_err()
                .0
                .contains("no stdin")
        );
    }

    #[test]
    fn the_op_reads_its_wire_form() {
        let parsed: ValidateOp = serde_json::from_value(serde_json::json!({
            "validator": "cargo_test",
            "scope": {"package": "alpha", "targets": "tests"}
        }))
        .unwrap();
        assert_eq!(parsed.validator, Validator::CargoTest);
        assert_eq!(parsed.scope.targets, CargoTargets::Tests);
        assert!(
            serde_json::from_value::<ValidateOp>(serde_json::json!({
                "validator": "cargo_test", "scope": {"command": "rm"}
            }))
            .is_err()
        );
        for v in Validator::ALL {
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
        }
    }
}
