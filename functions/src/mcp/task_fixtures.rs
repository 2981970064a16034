//! Task fixtures of the conformance suite's `tasks-*` scenarios. Each is a real durable task
//! row, created, polled, answered and cancelled through [`super::tasks`] like any wc task; in
//! place of runner work its row holds a plan: a due time and the result or protocol error it
//! ends with, or the input requests it waits for and how it answers them.
//!
//! - `greet` — no task: `Hello, {name}!` as plain text.
//! - `slow_compute {seconds, label}` — a task done after `seconds` (cancellable meanwhile);
//!   without the extension, the same wait inline (at most 20 s).
//! - `failing_job` — a task (required) that completes after 1 s with a tool error.
//! - `protocol_error_job` — a task that fails with a JSON-RPC internal error.
//! - `confirm_delete {filename}`, `multi_input` — tasks waiting for one and two elicitations.
//! - `test_tool_with_task` — a multi round-trip request for `user_name`, then a task greeting
//!   that name (required).

use chrono::Utc;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use wc_domain::TaskStatus;
use wc_store::tasks::{Ending, NewTask, Step, TaskRow};

use super::WcMcp;
use super::fixtures::{Exchange, Flow, Round, ask_name, elicit, elicited, meta, run_flow};
use super::handler::{declares_tasks, is_modern, principal, server_meta};
use crate::kernel::context::ToolContext;
use crate::kernel::spec::ToolSpec;
use crate::result::{ErrorKind, ToolError};

/// The plan key that marks a fixture task.
const FIXTURE: &str = "fixture";

/// Whether `row` is a fixture task (its plan names one).
pub(super) fn is_task_fixture(row: &TaskRow) -> bool {
    row.plan.get(FIXTURE).is_some()
}

/// Text output of a fixture.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Text {
    /// The text.
    pub text: String,
}

/// `greet`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GreetArgs {
    /// Who to greet.
    pub name: Option<String>,
}

/// `slow_compute`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SlowArgs {
    /// How long the computation takes.
    #[schemars(range(min = 0, max = 3600))]
    pub seconds: Option<f64>,
    /// A label echoed in the result.
    pub label: Option<String>,
}

/// `confirm_delete`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteArgs {
    /// The file to delete (nothing is deleted).
    pub filename: Option<String>,
}

/// Arguments of the task-only fixtures (ignored).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AnyArgs {}

/// The fixtures' specs, for listings (their calls are answered by [`call`]).
pub fn tools() -> Vec<ToolSpec> {
    let task_only = |_: ToolContext, _: AnyArgs| async {
        Err::<Text, _>(ToolError::new(
            ErrorKind::Unsupported,
            "this fixture runs only as a task (2026-07-28 with the tasks extension)",
        ))
    };
    vec![
        ToolSpec::new(
            meta("greet", "Greet", "Returns Hello, {name}!"),
            |_: ToolContext, a: GreetArgs| async move {
                Ok::<_, ToolError>(Text {
                    text: format!("Hello, {}!", a.name.as_deref().unwrap_or("World")),
                })
            },
        ),
        ToolSpec::new(
            meta(
                "slow_compute",
                "Slow compute",
                "A task that finishes after `seconds`.",
            ),
            |_: ToolContext, a: SlowArgs| async move {
                let seconds = a.seconds.unwrap_or(0.0).clamp(0.0, 20.0);
                tokio::time::sleep(std::time::Duration::from_secs_f64(seconds)).await;
                Ok::<_, ToolError>(Text {
                    text: computed(a.label.as_deref(), seconds),
                })
            },
        ),
        ToolSpec::new(
            meta(
                "failing_job",
                "Failing job",
                "A task that completes with a tool error.",
            ),
            task_only,
        ),
        ToolSpec::new(
            meta(
                "protocol_error_job",
                "Protocol error job",
                "A task that fails with a protocol error.",
            ),
            task_only,
        ),
        ToolSpec::new(
            meta(
                "confirm_delete",
                "Confirm delete",
                "A task that asks to confirm a deletion.",
            ),
            |_: ToolContext, a: DeleteArgs| async move {
                Err::<Text, _>(ToolError::new(
                    ErrorKind::Unsupported,
                    format!(
                        "deleting {} is asked only in a task (2026-07-28 with the tasks extension)",
                        a.filename.as_deref().unwrap_or("a file")
                    ),
                ))
            },
        ),
        ToolSpec::new(
            meta(
                "multi_input",
                "Multi input",
                "A task that asks two questions at once.",
            ),
            task_only,
        ),
        ToolSpec::new(
            meta(
                "test_tool_with_task",
                "Tool with task",
                "Asks a name, then greets it as a task.",
            ),
            task_only,
        ),
    ]
}

fn computed(label: Option<&str>, seconds: f64) -> String {
    format!("Computed {} in {seconds} s", label.unwrap_or("the result"))
}

fn required() -> McpError {
    McpError::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

fn text_result(text: &str, is_error: bool) -> Value {
    let mut result = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    result.meta = Some(server_meta());
    serde_json::to_value(result).expect("results serialize")
}

/// A plan that ends the task at `due_ms` (epoch milliseconds) with `result` or `error`.
fn timer(name: &str, after_ms: i64, result: Option<Value>, error: Option<Value>) -> Value {
    json!({
        FIXTURE: name,
        "due_ms": Utc::now().timestamp_millis() + after_ms,
        "result": result,
        "error": error,
    })
}

/// Answers a fixture task tool on the 2026-07-28 wire (`None`: not a task fixture, or an
/// older revision, which takes the kernel path).
pub(super) async fn call(
    handler: &WcMcp,
    params: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Option<Result<CallToolResponse, McpError>> {
    if !is_modern(ctx) {
        return None;
    }
    let args = params.arguments.clone().unwrap_or_default();
    let declared = declares_tasks(ctx);
    let (plan, requests, message): (Value, Option<Value>, &str) = match &*params.name {
        "greet" => {
            // The scenarios read the first content block as plain text.
            let name = args.get("name").and_then(Value::as_str).unwrap_or("World");
            let text = format!("Hello, {name}!");
            return Some(
                serde_json::from_value(text_result(&text, false))
                    .map(CallToolResponse::Complete)
                    .map_err(|e| McpError::internal_error(e.to_string(), None)),
            );
        }
        "slow_compute" => {
            if !declared {
                return None;
            }
            let seconds = args
                .get("seconds")
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
                .max(0.0);
            let label = args.get("label").and_then(Value::as_str);
            let text = computed(label, seconds);
            (
                timer(
                    "slow_compute",
                    (seconds * 1000.0) as i64,
                    Some(text_result(&text, false)),
                    None,
                ),
                None,
                "computing",
            )
        }
        "failing_job" => {
            if !declared {
                return Some(Err(required()));
            }
            let result = text_result(
                "failing_job failed on purpose: the job reported an error",
                true,
            );
            (
                timer("failing_job", 1000, Some(result), None),
                None,
                "running",
            )
        }
        "protocol_error_job" => {
            if !declared {
                return Some(Err(McpError::internal_error(
                    "protocol_error_job fails on purpose",
                    None,
                )));
            }
            let error = json!({"code": -32603, "message": "protocol_error_job fails on purpose"});
            (
                timer("protocol_error_job", 500, None, Some(error)),
                None,
                "running",
            )
        }
        "confirm_delete" => {
            let filename = args
                .get("filename")
                .and_then(Value::as_str)
                .unwrap_or("the file")
                .to_owned();
            let ask = confirm(&format!("Delete {filename}?"));
            if !declared {
                // Without tasks, the same question as a multi round-trip request.
                let flow = Flow {
                    rounds: vec![vec![confirm(&format!("Delete {filename}?"))]],
                    optional: false,
                    finish: |a| answered_confirm(a, "the file"),
                };
                return Some(inline(&flow, params, ctx));
            }
            (
                json!({FIXTURE: "confirm_delete", "filename": filename}),
                Some(json!({ask.key: ask.request})),
                "waiting for confirmation",
            )
        }
        "multi_input" => {
            if !declared {
                let flow = Flow {
                    rounds: vec![vec![
                        ask_name("name", "What is your name?"),
                        confirm("Proceed?"),
                    ]],
                    optional: false,
                    finish: thanks,
                };
                return Some(inline(&flow, params, ctx));
            }
            let name = ask_name("name", "What is your name?");
            let confirm = confirm("Proceed?");
            (
                json!({FIXTURE: "multi_input"}),
                Some(json!({name.key: name.request, confirm.key: confirm.request})),
                "waiting for two answers",
            )
        }
        "test_tool_with_task" => {
            if !declared {
                return Some(Err(required()));
            }
            let flow = Flow {
                rounds: vec![vec![ask_name("user_name", "What is your name?")]],
                optional: false,
                finish: |a| format!("Hello, {}!", elicited(a, "user_name", "name")),
            };
            let exchange = Exchange {
                surface: "tools/call",
                name: &params.name,
                input_responses: params.input_responses.as_ref(),
                request_state: params.request_state.as_deref(),
            };
            match run_flow(&flow, &exchange, ctx) {
                Err(e) => return Some(Err(e)),
                Ok(Round::Ask(ask)) => return Some(Ok(CallToolResponse::InputRequired(ask))),
                Ok(Round::Done(answers)) => {
                    let text = (flow.finish)(&answers);
                    (
                        timer(
                            "test_tool_with_task",
                            200,
                            Some(text_result(&text, false)),
                            None,
                        ),
                        None,
                        "greeting",
                    )
                }
            }
        }
        _ => return None,
    };
    Some(create(handler, &params.name, plan, requests, message, ctx).await)
}

fn confirm(message: &str) -> super::fixtures::Ask {
    elicit(
        "confirm",
        message,
        json!({"confirm": {"type": "boolean"}}),
        &["confirm"],
    )
}

fn confirmed(answers: &Map<String, Value>) -> bool {
    answers
        .get("confirm")
        .and_then(|a| a.pointer("/content/confirm"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn answered_confirm(answers: &Map<String, Value>, file: &str) -> String {
    if confirmed(answers) {
        format!("Deleted {file}")
    } else {
        format!("Kept {file}")
    }
}

fn thanks(answers: &Map<String, Value>) -> String {
    format!(
        "Thanks, {} (confirmed: {})",
        elicited(answers, "name", "name"),
        confirmed(answers)
    )
}

/// A fixture answered without a task: its questions as a multi round-trip request.
fn inline(
    flow: &Flow,
    params: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    let exchange = Exchange {
        surface: "tools/call",
        name: &params.name,
        input_responses: params.input_responses.as_ref(),
        request_state: params.request_state.as_deref(),
    };
    Ok(match run_flow(flow, &exchange, ctx)? {
        Round::Ask(ask) => CallToolResponse::InputRequired(ask),
        Round::Done(answers) => {
            let text = (flow.finish)(&answers);
            let result: CallToolResult = serde_json::from_value(text_result(&text, false))
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
            CallToolResponse::Complete(result)
        }
    })
}

async fn create(
    handler: &WcMcp,
    tool: &str,
    plan: Value,
    input_requests: Option<Value>,
    message: &str,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    let who = principal(ctx)?;
    let state = handler.state();
    let offer = super::tasks::offer(state);
    let new = NewTask {
        id: offer.id.clone(),
        owner_authority_fingerprint: super::tasks::owner(&who),
        tool: tool.to_owned(),
        work_id: None,
        session_id: None,
        recording: Value::Null,
        plan,
        input_requests,
        status_message: Some(message.to_owned()),
        ttl_ms: offer.ttl.as_millis() as i64,
        poll_interval_ms: offer.poll_interval.as_millis() as i32,
    };
    let client = state
        .deps
        .client()
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let row = wc_store::tasks::insert(&client, &new)
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    Ok(CallToolResponse::Task(super::tasks::created(&row)))
}

/// Moves a fixture task along its plan: a due timer ends it; a task whose input requests
/// are all answered completes with what the answers say.
pub(super) async fn advance(state: &crate::AppState, row: TaskRow) -> Result<TaskRow, McpError> {
    let plan = row.plan.clone();
    let ending = if let Some(due) = plan.get("due_ms").and_then(Value::as_i64) {
        if Utc::now().timestamp_millis() < due {
            return Ok(row);
        }
        let error = plan.get("error").filter(|e| !e.is_null()).cloned();
        Ending {
            status: if error.is_some() {
                TaskStatus::Failed
            } else {
                TaskStatus::Completed
            },
            result: plan.get("result").filter(|r| !r.is_null()).cloned(),
            error,
            status_message: Some("done".into()),
            events: Vec::new(),
        }
    } else {
        if row.status != TaskStatus::Working {
            return Ok(row);
        }
        let answers: Map<String, Value> =
            row.input_responses.as_object().cloned().unwrap_or_default();
        let text = match plan.get(FIXTURE).and_then(Value::as_str) {
            Some("confirm_delete") => answered_confirm(
                &answers,
                plan.get("filename")
                    .and_then(Value::as_str)
                    .unwrap_or("the file"),
            ),
            _ => thanks(&answers),
        };
        Ending {
            status: TaskStatus::Completed,
            result: Some(text_result(&text, false)),
            error: None,
            status_message: Some("done".into()),
            events: Vec::new(),
        }
    };
    super::tasks::change(state, &row, move |_| Some(Step::End(ending.clone()))).await
}
