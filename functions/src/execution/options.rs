//! What an execution tool takes besides what it runs: where (`cwd`), its input, time limit,
//! the exit codes and result it expects and why it runs ([`ExecOptions`], flattened into each
//! tool's arguments and documented once), and the bounded shapes of what it runs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wc_domain::{Cursor, RelativePath, WorkMode};
use wc_runner_protocol::DEFAULT_LIST_FILES;
use wc_runner_protocol::WorkSpec;

use super::{
    DEFAULT_TIMEOUT_MS, MAX_ACCEPTED_EXIT_CODES, MAX_PURPOSE_CHARS, Request, ResultExpectation,
    invalid,
};
use crate::kernel::context::ToolContext;
use crate::result::ToolError;
use crate::workflow::exec_context::ExecutionContext;

/// The files or directories a Git tool looks at, flattened into its arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PathFilter {
    /// Only these files or directories (at most 100); default the whole project.
    #[schemars(length(max = 100))]
    paths: Option<Vec<RelativePath>>,
}

impl PathFilter {
    /// The paths named; empty is the whole project.
    pub fn paths(self) -> Vec<RelativePath> {
        self.paths.unwrap_or_default()
    }
}

/// A page of a file listing, flattened into the arguments of the tools that list files.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FilePage {
    /// Files per page (1-2000, default 200).
    #[schemars(range(min = 1, max = 2000))]
    limit: Option<u32>,
    /// The previous page's next_cursor (same other arguments).
    cursor: Option<Cursor>,
}

impl FilePage {
    /// Files per page.
    pub fn limit(&self) -> u32 {
        self.limit.unwrap_or(DEFAULT_LIST_FILES)
    }

    /// Where the page starts.
    pub fn cursor(self) -> Option<String> {
        self.cursor.map(String::from)
    }
}

/// The options every execution tool takes (`run_process`, `run_shell`, `run_script`,
/// `run_job`), flattened into its arguments.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ExecOptions {
    /// Directory relative to the project root (default: the session's default_cwd, else the
    /// root).
    pub cwd: Option<RelativePath>,
    /// Text written to standard input.
    pub stdin: Option<Stdin>,
    /// Time limit in ms (default 600000).
    #[schemars(range(min = 1, max = 3600000))]
    pub timeout_ms: Option<u64>,
    /// Exit codes besides 0 that count as success (e.g. 1 for grep finding nothing).
    pub accepted_exit_codes: Option<AcceptedExitCodes>,
    /// Expected result (default success).
    pub result_expectation: Option<ResultExpectation>,
    /// Why you run it (evidence only).
    pub purpose: Option<Purpose>,
}

impl ExecOptions {
    /// The call's request to run `spec` with these options, where a session's `defaults` fill
    /// what they leave out.
    pub fn request(
        self,
        ctx: &ToolContext,
        mode: WorkMode,
        spec: WorkSpec,
        defaults: &ExecutionContext,
    ) -> Result<Request, ToolError> {
        Ok(Request {
            tool: ctx.tool,
            mode,
            spec,
            cwd: cwd(self.cwd.as_ref(), defaults)?,
            stdin: self.stdin.map(String::from),
            timeout_ms: timeout(self.timeout_ms)?,
            expectation: self.result_expectation.unwrap_or_default(),
            accepted_exit_codes: self.accepted_exit_codes.unwrap_or_default(),
            purpose: self.purpose.map(Purpose::into_string),
            min_tests: None,
        })
    }
}

/// Text written to a process's standard input.
pub type Stdin = wc_domain::Text<0, 65536>;

/// Why a caller runs something, for evidence: one line of at most [`MAX_PURPOSE_CHARS`]
/// characters.
pub type Purpose = wc_domain::Line<0, { MAX_PURPOSE_CHARS }>;

/// Raw shell text: at most 16,000 UTF-8 bytes, not blank, without NUL bytes; checked where
/// it is used ([`ShellText::check`]) so the refusal names the argument.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct ShellText(String);

impl ShellText {
    /// The text, when it keeps its bounds (`pointer` names the argument in a refusal).
    pub fn check(self, pointer: &str) -> Result<String, ToolError> {
        check_shell_text(pointer, &self.0)?;
        Ok(self.0)
    }
}

impl JsonSchema for ShellText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ShellText".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": wc_runner_protocol::MAX_SHELL_TEXT_BYTES,
            "pattern": "^[^\\u0000]*[^\\u0000 \\t\\n\\r\\u000B\\u000C][^\\u0000]*$",
            "x-problem": "must hold a command (not blank) and no NUL character",
        })
    }
}

/// The spec that runs `command` with `shell`, else the session's default shell, else `sh`.
pub fn shell_spec(
    command: ShellText,
    shell: Option<ShellChoice>,
    defaults: &ExecutionContext,
) -> Result<WorkSpec, ToolError> {
    let command = command.check("/command")?;
    let shell = shell
        .or(defaults.default_shell.map(ShellChoice::from_session))
        .unwrap_or_default();
    Ok(WorkSpec::Shell {
        shell: shell.protocol(),
        command,
    })
}

/// A program and its arguments (no shell): 1-256 strings of at most 1,024 bytes, the first
/// not empty, none with a NUL byte. Parsing is the check.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Vec<String>")]
pub struct Argv(Vec<String>);

impl Argv {
    /// The strings, program first.
    pub fn into_inner(self) -> Vec<String> {
        self.0
    }
}

impl TryFrom<Vec<String>> for Argv {
    type Error = String;

    fn try_from(argv: Vec<String>) -> Result<Self, String> {
        match argv.first() {
            None => return Err("argv is empty: give the program first".into()),
            Some(p) if p.is_empty() => return Err("argv[0], the program, is empty".into()),
            _ => {}
        }
        if argv.len() > 256 {
            return Err("argv has more than 256 strings".into());
        }
        if let Some(i) = argv.iter().position(|a| a.len() > 1024) {
            return Err(format!("argv[{i}] is over 1024 bytes"));
        }
        if let Some(i) = argv.iter().position(|a| a.contains('\0')) {
            return Err(format!("argv[{i}] contains a NUL byte"));
        }
        Ok(Argv(argv))
    }
}

impl JsonSchema for Argv {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Argv".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "array",
            "minItems": 1,
            "maxItems": 256,
            "items": {
                "type": "string",
                "maxLength": 1024,
                "pattern": wc_domain::Text::<0, 1024>::PATTERN,
                "x-problem": wc_domain::Text::<0, 1024>::PROBLEM,
            },
            "prefixItems": [{ "type": "string", "minLength": 1 }],
        })
    }
}

/// Exit codes a caller counts as success besides 0 (a boolean predicate's 1, say): at most
/// [`MAX_ACCEPTED_EXIT_CODES`], each 0-255. Parsing is the check, so a value of this type is
/// always within its bounds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<i32>", into = "Vec<i32>")]
pub struct AcceptedExitCodes(Vec<i32>);

impl AcceptedExitCodes {
    /// The codes, in the caller's order.
    pub fn as_slice(&self) -> &[i32] {
        &self.0
    }
}

impl TryFrom<Vec<i32>> for AcceptedExitCodes {
    type Error = String;

    fn try_from(codes: Vec<i32>) -> Result<Self, String> {
        if codes.len() > MAX_ACCEPTED_EXIT_CODES {
            return Err(format!(
                "at most {MAX_ACCEPTED_EXIT_CODES} accepted exit codes"
            ));
        }
        if let Some(c) = codes.iter().find(|c| !(0..=255).contains(*c)) {
            return Err(format!("exit code {c} is outside 0-255"));
        }
        Ok(AcceptedExitCodes(codes))
    }
}

impl From<AcceptedExitCodes> for Vec<i32> {
    fn from(codes: AcceptedExitCodes) -> Vec<i32> {
        codes.0
    }
}

impl JsonSchema for AcceptedExitCodes {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AcceptedExitCodes".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "array",
            "maxItems": MAX_ACCEPTED_EXIT_CODES,
            "items": { "type": "integer", "minimum": 0, "maximum": 255 },
        })
    }
}

/// A shell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ShellChoice {
    /// POSIX sh.
    #[default]
    Sh,
    /// GNU bash.
    Bash,
}

impl ShellChoice {
    /// The protocol shell.
    pub fn protocol(self) -> wc_runner_protocol::Shell {
        match self {
            ShellChoice::Sh => wc_runner_protocol::Shell::Sh,
            ShellChoice::Bash => wc_runner_protocol::Shell::Bash,
        }
    }

    /// The session default, as a choice.
    pub fn from_session(s: crate::workflow::exec_context::Shell) -> Self {
        match s {
            crate::workflow::exec_context::Shell::Sh => ShellChoice::Sh,
            crate::workflow::exec_context::Shell::Bash => ShellChoice::Bash,
        }
    }
}

/// Checks raw shell text against the model-facing bound.
pub fn check_shell_text(pointer: &str, text: &str) -> Result<(), ToolError> {
    if text.len() > wc_runner_protocol::MAX_SHELL_TEXT_BYTES {
        return Err(invalid(
            pointer,
            "maxBytes",
            format!(
                "shell text is {} bytes; the limit is {} UTF-8 bytes (put longer programs in run_script)",
                text.len(),
                wc_runner_protocol::MAX_SHELL_TEXT_BYTES
            ),
        ));
    }
    if text
        .chars()
        .all(|c| matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{b}' | '\u{c}'))
    {
        return Err(invalid(pointer, "minLength", "shell text is empty".into()));
    }
    if text.contains('\0') {
        return Err(invalid(
            pointer,
            "noNul",
            "shell text contains a NUL byte".into(),
        ));
    }
    Ok(())
}

/// The cwd of a call: explicit, else the session default (a project path: execution tools
/// refuse a session whose defaults name a remote resource); `None` is the project root.
pub fn cwd(
    explicit: Option<&RelativePath>,
    defaults: &ExecutionContext,
) -> Result<Option<RelativePath>, ToolError> {
    let path = match (explicit, &defaults.default_cwd) {
        (Some(p), _) => p.clone(),
        (None, Some(raw)) => crate::workflow::exec_context::project_cwd(raw)
            .map_err(|e| invalid("/cwd", "projectRelativePath", format!("cwd {e}")))?,
        (None, None) => return Ok(None),
    };
    Ok((!path.is_root()).then_some(path))
}

/// The timeout of a call: the argument, else the default; bounded by the protocol.
pub fn timeout(ms: Option<u64>) -> Result<u64, ToolError> {
    let ms = ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if ms == 0 || ms > wc_runner_protocol::MAX_TIMEOUT_MS {
        return Err(invalid(
            "/timeout_ms",
            "range",
            format!(
                "timeout_ms must be 1-{}",
                wc_runner_protocol::MAX_TIMEOUT_MS
            ),
        ));
    }
    Ok(ms)
}
