//! The structured validation tools — `cargo_check`, `cargo_test`, `cargo_fmt`,
//! `cargo_clippy`, `go_test` and `pytest` — one family: typed scope arguments (each tool's
//! own, beside the shared [`ValidationRun`]), run by the project's runner in the project root or an
//! explicit `cwd` (never the session's `default_cwd`), waited for like `run_process` or run as
//! a job with `background`, and answered with the execution and what its output proved
//! ([`ValidationFacts`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wc_domain::{RelativePath, WorkMode};
use wc_runner_protocol::{CargoTargets, ValidateOp, ValidationScope, Validator, WorkSpec};

use crate::auth::Scope;
use crate::execution::validation::{self, ValidationFacts};
use crate::execution::{self, ExecOutput, ProjectOrSession, Purpose, Request, ResultExpectation};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::{Category, Effect, SessionUse, ToolMeta, ToolSpec};
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
    /// Expected result: success (default), failure or observe.
    result_expectation: Option<ResultExpectation>,
    /// Return a job_id at once (follow with job_status).
    background: Option<bool>,
    /// Why (part of the validation's identity).
    purpose: Option<Purpose>,
}

/// `cargo_check`, `cargo_clippy`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CargoBuildArgs {
    #[serde(flatten)]
    at: ProjectOrSession,
    #[serde(flatten)]
    run: ValidationRun,
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

/// `cargo_test`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CargoTestArgs {
    #[serde(flatten)]
    at: ProjectOrSession,
    #[serde(flatten)]
    run: ValidationRun,
    /// One package of the workspace (`-p`).
    package: Option<String>,
    /// Only tests whose name contains this.
    test_filter: Option<String>,
    /// Features to enable.
    #[schemars(length(max = 32))]
    features: Option<Vec<String>>,
    /// `--all-features`.
    all_features: Option<bool>,
    /// `--no-default-features`.
    no_default_features: Option<bool>,
    /// `--lib`, `--bins`, `--tests`, `--all-targets` or cargo's default.
    targets: Option<CargoTargets>,
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

fn cargo_build_scope(a: &CargoBuildArgs) -> ValidationScope {
    ValidationScope {
        package: a.package.clone(),
        features: a.features.clone().unwrap_or_default(),
        all_features: a.all_features.unwrap_or(false),
        no_default_features: a.no_default_features.unwrap_or(false),
        targets: a.targets.unwrap_or_default(),
        ..Default::default()
    }
}

fn meta(name: &'static str, title: &'static str, description: &'static str) -> ToolMeta {
    ToolMeta {
        name,
        title,
        description,
        category: Category::Execution,
        scopes: &[Scope::ProjectWrite],
        // Builds and tests run the project's code (build scripts, tests) on the build host.
        effect: Effect::Consequential,
        // GPT Actions hold 30 operations, all taken: validation is called through
        // callRuntimeTool.
        rest_operation: false,
    }
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
    ToolSpec::new(
        meta(
            "cargo_check",
            "Cargo check",
            described!("Type-check Cargo code (`cargo check`)."),
        ),
        |ctx, a: CargoBuildArgs| async move {
            let scope = cargo_build_scope(&a);
            run(&ctx, &a.at, Validator::CargoCheck, a.run, scope, None).await
        },
    )
    .with_session(SessionUse::Works)
    .with_task(TaskWhen::BackgroundOrLong, finish_task)
}

/// `cargo_clippy`.
pub fn cargo_clippy() -> ToolSpec {
    ToolSpec::new(
        meta(
            "cargo_clippy",
            "Cargo clippy",
            described!("Lint Cargo code (`cargo clippy`)."),
        ),
        |ctx, a: CargoBuildArgs| async move {
            let scope = cargo_build_scope(&a);
            run(&ctx, &a.at, Validator::CargoClippy, a.run, scope, None).await
        },
    )
    .with_session(SessionUse::Works)
    .with_task(TaskWhen::BackgroundOrLong, finish_task)
}

/// `cargo_test`.
pub fn cargo_test() -> ToolSpec {
    ToolSpec::new(
        meta(
            "cargo_test",
            "Cargo test",
            described!("Run Cargo tests (`cargo test --no-fail-fast`)."),
        ),
        |ctx, a: CargoTestArgs| async move {
            let scope = ValidationScope {
                package: a.package.clone(),
                test_filter: a.test_filter.clone(),
                features: a.features.clone().unwrap_or_default(),
                all_features: a.all_features.unwrap_or(false),
                no_default_features: a.no_default_features.unwrap_or(false),
                targets: a.targets.unwrap_or_default(),
                path: None,
            };
            let min = a
                .min_tests
                .or(a.require_tests.unwrap_or(false).then_some(1));
            run(&ctx, &a.at, Validator::CargoTest, a.run, scope, min).await
        },
    )
    .with_session(SessionUse::Works)
    .with_task(TaskWhen::BackgroundOrLong, finish_task)
}

/// `cargo_fmt`.
pub fn cargo_fmt() -> ToolSpec {
    ToolSpec::new(
        meta(
            "cargo_fmt",
            "Cargo fmt check",
            described!("Check Rust formatting (`cargo fmt --check`); changes nothing."),
        ),
        |ctx, a: CargoFmtArgs| async move {
            let scope = ValidationScope {
                package: a.package.clone(),
                ..Default::default()
            };
            run(&ctx, &a.at, Validator::CargoFmt, a.run, scope, None).await
        },
    )
    .with_session(SessionUse::Works)
    .with_task(TaskWhen::BackgroundOrLong, finish_task)
}

/// `go_test`.
pub fn go_test() -> ToolSpec {
    ToolSpec::new(
        meta(
            "go_test",
            "Go test",
            described!("Run Go tests (`go test`)."),
        ),
        |ctx, a: GoTestArgs| async move {
            let scope = ValidationScope {
                package: a.package.clone(),
                test_filter: a.test_filter.clone(),
                ..Default::default()
            };
            run(&ctx, &a.at, Validator::GoTest, a.run, scope, None).await
        },
    )
    .with_session(SessionUse::Works)
    .with_task(TaskWhen::BackgroundOrLong, finish_task)
}

/// `pytest`.
pub fn pytest() -> ToolSpec {
    ToolSpec::new(
        meta(
            "pytest",
            "pytest",
            described!("Run Python tests (`python3 -m pytest`)."),
        ),
        |ctx, a: PytestArgs| async move {
            let scope = ValidationScope {
                path: a.path.clone(),
                test_filter: a.test_filter.clone(),
                ..Default::default()
            };
            run(&ctx, &a.at, Validator::Pytest, a.run, scope, None).await
        },
    )
    .with_session(SessionUse::Works)
    .with_task(TaskWhen::BackgroundOrLong, finish_task)
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
    } = execution::setting(ctx, at, c.purpose.as_ref()).await?;
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
pub fn finish_task(
    deps: &crate::deps::Deps,
    row: wc_store::work::WorkRow,
    answer: Option<serde_json::Value>,
) -> crate::kernel::ports::PortFuture<'_, Result<serde_json::Value, ToolError>> {
    Box::pin(async move {
        let execution = execution::ended_view(deps, &row).await?;
        let facts = validation::facts(&row, answer.as_ref());
        let out = settle(Output {
            execution,
            validation: facts,
        })?;
        serde_json::to_value(out).map_err(ToolError::internal)
    })
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
