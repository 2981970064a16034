//! The structured validation tools — `cargo_check`, `cargo_test`, `cargo_fmt`,
//! `cargo_clippy`, `go_test` and `pytest` — one family: typed scope arguments (each tool's
//! own, beside the shared [`ValidationRun`]), run by the project's runner in the project root or an
//! explicit `cwd` (never the session's `default_cwd`), waited for like `run_process` or run as
//! a job with `background`, and answered with the execution and what its output proved
//! ([`ValidationFacts`]).

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use wc_domain::{RelativePath, WorkMode};
use wc_runner_protocol::{CargoTargets, ValidateOp, ValidationScope, Validator, WorkSpec};

use crate::execution::validation::{self, ValidationFacts};
use crate::execution::{self, ExecOutput, ProjectOrSession, Purpose, Request, ResultExpectation};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, SessionUse, ToolMeta, ToolSpec};
use crate::kernel::task::TaskWhen;
use crate::result::{ErrorKind, ToolError};

/// What a validation tool returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The execution (job id, state, exit code, kept output).
    #[serde(flatten)]
    pub execution: ExecOutput,
    /// What the run proved; `null` while it runs (`background`, or past the wait).
    pub validation: Option<ValidationFacts>,
}

/// The arguments every validation tool takes besides its target, flattened into each tool's
/// own (serde refuses unknown fields only through one level of flattening).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ValidationRun {
    /// Directory relative to the project root (default: the root).
    cwd: Option<RelativePath>,
    /// Time limit in ms (default 600000).
    #[schemars(range(min = 1, max = 3600000))]
    timeout_ms: Option<u64>,
    /// Expected result (default success).
    result_expectation: Option<ResultExpectation>,
    /// Return a job_id at once (follow with job_status).
    background: Option<bool>,
    /// Why (part of the validation's identity).
    purpose: Option<Purpose>,
}

/// What a Cargo build or test covers, flattened into each Cargo tool's arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CargoOptions {
    /// One package of the workspace (`-p`).
    package: Option<String>,
    /// Features to enable.
    #[schemars(length(max = 32))]
    features: Option<Vec<String>>,
    /// `--all-features`.
    all_features: Option<bool>,
    /// `--no-default-features`.
    no_default_features: Option<bool>,
    /// `--lib`, `--bins`, `--tests`, `--all-targets` or cargo's default.
    targets: Option<CargoTargets>,
}

impl CargoOptions {
    /// The scope these options give, with `test_filter`.
    fn scope(self, test_filter: Option<String>) -> ValidationScope {
        ValidationScope {
            package: self.package,
            test_filter,
            features: self.features.unwrap_or_default(),
            all_features: self.all_features.unwrap_or(false),
            no_default_features: self.no_default_features.unwrap_or(false),
            targets: self.targets.unwrap_or_default(),
            path: None,
        }
    }
}

/// `cargo_check`, `cargo_clippy`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CargoBuildArgs {
    #[serde(flatten)]
    at: ProjectOrSession,
    #[serde(flatten)]
    run: ValidationRun,
    #[serde(flatten)]
    cargo: CargoOptions,
}

/// `cargo_test`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CargoTestArgs {
    #[serde(flatten)]
    at: ProjectOrSession,
    #[serde(flatten)]
    run: ValidationRun,
    #[serde(flatten)]
    cargo: CargoOptions,
    /// Only tests whose name contains this.
    test_filter: Option<String>,
    /// Same as min_tests 1.
    require_tests: Option<bool>,
    /// Fewest tests the output must prove ran, else `test_count_not_proven`.
    #[schemars(range(min = 1, max = 1000000))]
    min_tests: Option<u64>,
}

/// `cargo_fmt`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CargoFmtArgs {
    #[serde(flatten)]
    at: ProjectOrSession,
    #[serde(flatten)]
    run: ValidationRun,
    /// One package of the workspace (`-p`).
    package: Option<String>,
}

/// `go_test`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoTestArgs {
    #[serde(flatten)]
    at: ProjectOrSession,
    #[serde(flatten)]
    run: ValidationRun,
    /// Package pattern (default ./...).
    package: Option<String>,
    /// `-run` regexp.
    test_filter: Option<String>,
}

/// `pytest`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PytestArgs {
    #[serde(flatten)]
    at: ProjectOrSession,
    #[serde(flatten)]
    run: ValidationRun,
    /// File or directory to test, relative to cwd.
    path: Option<RelativePath>,
    /// `-k` expression.
    test_filter: Option<String>,
}

/// One validation run as a tool's arguments ask for it: where, how, what it covers and the
/// fewest tests its output must prove.
struct Asked {
    at: ProjectOrSession,
    run: ValidationRun,
    scope: ValidationScope,
    min_tests: Option<u64>,
}

impl Asked {
    fn new(at: ProjectOrSession, run: ValidationRun, scope: ValidationScope) -> Self {
        let min_tests = None;
        Asked {
            at,
            run,
            scope,
            min_tests,
        }
    }
}

/// What each validation tool's arguments give the one run.
trait ValidationArgs: DeserializeOwned + JsonSchema + Send + 'static {
    /// The run these arguments ask for.
    fn asked(self) -> Asked;
}

impl ValidationArgs for CargoBuildArgs {
    fn asked(self) -> Asked {
        let scope = self.cargo.scope(None);
        Asked::new(self.at, self.run, scope)
    }
}

impl ValidationArgs for CargoTestArgs {
    fn asked(self) -> Asked {
        let min_tests = self
            .min_tests
            .or(self.require_tests.unwrap_or(false).then_some(1));
        let scope = self.cargo.scope(self.test_filter);
        Asked {
            min_tests,
            ..Asked::new(self.at, self.run, scope)
        }
    }
}

impl ValidationArgs for CargoFmtArgs {
    fn asked(self) -> Asked {
        let scope = ValidationScope {
            package: self.package,
            ..Default::default()
        };
        Asked::new(self.at, self.run, scope)
    }
}

impl ValidationArgs for GoTestArgs {
    fn asked(self) -> Asked {
        let scope = ValidationScope {
            package: self.package,
            test_filter: self.test_filter,
            ..Default::default()
        };
        Asked::new(self.at, self.run, scope)
    }
}

impl ValidationArgs for PytestArgs {
    fn asked(self) -> Asked {
        let scope = ValidationScope {
            path: self.path,
            test_filter: self.test_filter,
            ..Default::default()
        };
        Asked::new(self.at, self.run, scope)
    }
}

/// A validation tool: arguments `A`, run by `validator`. Every one runs code on the build host
/// (consequential), is called through `callRuntimeTool` on REST (GPT Actions hold 30
/// operations, all taken), works in its session and may become a task.
fn tool<A: ValidationArgs>(
    name: &'static str,
    title: &'static str,
    description: &'static str,
    validator: Validator,
) -> ToolSpec {
    let meta = ToolMeta::consequential(Category::Execution, name, title).about(description);
    ToolSpec::new(meta, move |ctx, a: A| async move {
        let r = a.asked();
        run(&ctx, &r.at, validator, r.run, r.scope, r.min_tests).await
    })
    .with_session(SessionUse::Works)
    .with_task(TaskWhen::BackgroundOrLong, finish_task)
}

/// How every validation result reads, appended to each description.
macro_rules! described {
    ($what:literal) => {
        concat!(
            $what,
            " success: exit 0; validation: what the output proved."
        )
    };
}

/// `cargo_check`.
pub fn cargo_check() -> ToolSpec {
    let what = described!("Type-check Cargo code (`cargo check`).");
    tool::<CargoBuildArgs>("cargo_check", "Cargo check", what, Validator::CargoCheck)
}

/// `cargo_clippy`.
pub fn cargo_clippy() -> ToolSpec {
    let what = described!("Lint Cargo code (`cargo clippy`).");
    tool::<CargoBuildArgs>("cargo_clippy", "Cargo clippy", what, Validator::CargoClippy)
}

/// `cargo_test`.
pub fn cargo_test() -> ToolSpec {
    let what = described!("Run Cargo tests (`cargo test --no-fail-fast`).");
    tool::<CargoTestArgs>("cargo_test", "Cargo test", what, Validator::CargoTest)
}

/// `cargo_fmt`.
pub fn cargo_fmt() -> ToolSpec {
    let what = described!("Check Rust formatting (`cargo fmt --check`); changes nothing.");
    tool::<CargoFmtArgs>("cargo_fmt", "Cargo fmt check", what, Validator::CargoFmt)
}

/// `go_test`.
pub fn go_test() -> ToolSpec {
    let what = described!("Run Go tests (`go test`).");
    tool::<GoTestArgs>("go_test", "Go test", what, Validator::GoTest)
}

/// `pytest`.
pub fn pytest() -> ToolSpec {
    let what = described!("Run Python tests (`python3 -m pytest`).");
    tool::<PytestArgs>("pytest", "pytest", what, Validator::Pytest)
}

async fn run(
    ctx: &ToolContext,
    at: &ProjectOrSession,
    validator: Validator,
    c: ValidationRun,
    scope: ValidationScope,
    min_tests: Option<u64>,
) -> Result<Output, ToolError> {
    let execution::Setting {
        session, target, ..
    } = execution::setting(ctx, at).await?;
    let background = c.background.unwrap_or(false);
    let op = ValidateOp { validator, scope };
    op.validate().map_err(|e| {
        ToolError::new(ErrorKind::InvalidArguments, e.to_string()).with("rule", "validationScope")
    })?;
    let req = Request {
        tool: ctx.tool,
        mode: if background {
            WorkMode::Job
        } else {
            WorkMode::Sync
        },
        spec: WorkSpec::Validate(op),
        cwd: c.cwd.filter(|p| !p.is_root()),
        stdin: None,
        timeout_ms: execution::timeout(c.timeout_ms)?,
        expectation: c.result_expectation.unwrap_or_default(),
        accepted_exit_codes: Default::default(),
        purpose: c.purpose.map(Purpose::into_string),
        min_tests,
    };
    if background {
        let row = execution::submit(ctx, &target, session.as_ref(), req).await?;
        return Ok(Output {
            execution: execution::status_view(&row),
            validation: None,
        });
    }
    let (row, answer) = execution::run_waited(ctx, &target, session.as_ref(), req).await?;
    let execution = execution::view(ctx, &row, row.is_terminal()).await?;
    let facts = row
        .is_terminal()
        .then(|| validation::facts(&row, answer.as_ref()))
        .flatten();
    settle(Output {
        execution,
        validation: facts,
    })
}

/// The final output of a validation task: what the call answers for ended work.
pub fn finish_task(work: &wc_store::work::EndedWork<'_>) -> Result<serde_json::Value, ToolError> {
    let out = settle(Output {
        execution: execution::ended_view_of(work),
        validation: validation::facts(work.row, work.answer),
    })?;
    serde_json::to_value(out).map_err(ToolError::internal)
}

/// The answer of a validation call: a failure when the command did not exit 0 (as
/// [`execution::settle`]) or its count assertion is not met; either failure carries the
/// whole output.
fn settle(out: Output) -> Result<Output, ToolError> {
    let failure = execution::failure(&out.execution).or_else(|| {
        let c = out.validation.as_ref()?.count_assertion?;
        (!c.met).then(|| {
            let observed = c
                .observed_tests
                .map_or("no proven count".to_owned(), |n| format!("{n} proven"));
            ToolError::new(
                ErrorKind::TestCountNotProven,
                format!(
                    "the tests exited 0, but the output does not prove {} test(s) ran ({observed}); an evidence gap, not a test failure",
                    c.min_tests
                ),
            )
            .with("min_tests", c.min_tests)
            .with("observed_tests", c.observed_tests)
        })
    });
    let Some(error) = failure else {
        return Ok(out);
    };
    let output = serde_json::to_value(&out).map_err(ToolError::internal)?;
    Err(error
        .with("job_id", out.execution.job_id.to_string())
        .with_output(output))
}
