//! Reference documents generated from the code, so they cannot drift: `docs/TOOLS.md` from
//! the tool registry and `docs/ERRORS.md` from the error kinds. `wc-admin docs tools|errors`
//! prints them; a test fails when the committed files differ.

use std::fmt::Write;

use serde_json::Value;

use crate::kernel::Registry;
use crate::kernel::spec::{BusinessPair, Category, SessionUse};
use crate::result::ErrorKind;

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).expect("schemas serialize")
}

/// `docs/TOOLS.md`: every runtime tool (fixtures excluded) with its schemas.
pub fn tools_markdown(runtime: &Registry) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Runtime tools\n");
    let _ = writeln!(
        out,
        "Generated from the tool registry by `wc-admin docs tools`; do not edit by hand.\n\n\
         Every tool answers `{{success, output, error}}`: `output` (shaped as below) on success\n\
         and on an execution that ended without success, `error` (`{{kind, message, …}}`, kinds in\n\
         ERRORS.md) on failure. On MCP that object is the\n\
         `structuredContent` (and the one text block); on REST it is the response body. Every MCP\n\
         tool also accepts the wrapper metadata `recording_session_id` and\n\
         `ack_session_message_ids`, and on the stateless 2026-07-28 contract `context_request`\n\
         (listed only there); REST accepts `recording_session_id`.\n\n\
         The schemas below are complete, as the OpenAPI document publishes them and the argument\n\
         validator checks them. MCP's `tools/list` gives a model the compact form of each input\n\
         schema (no patterns or string lengths, no `null` branches, the `project`/`session_id`\n\
         target described once in the server's instructions) and one shared output schema, the\n\
         `{{success, output, error}}` envelope; a value the compact form allows is still refused\n\
         here, with a sentence that says why.\n"
    );
    let _ = writeln!(
        out,
        "## Execution results\n\n\
         `run_process`, `run_shell` and `run_script` (and `job_status` for an ended job) answer\n\
         `success: true` only when the execution completed and its exit status counts as success:\n\
         0, or one of the call's `accepted_exit_codes` (at most {max_codes}, each 0-255). Any other end is\n\
         `success: false` with an `error.kind` naming it — `exit_nonzero`, `killed_by_signal`,\n\
         `timed_out`, `cancelled`, `execution_rejected` (the runner refused to start it, e.g. a cwd\n\
         that resolves outside the project root), `spawn_failed`, `lost` — and the same `output`\n\
         as a success (exit code, signal, stdout/stderr, truncation flags, job id, duration). MCP\n\
         marks such a result `isError: true`; REST answers it with HTTP 200, because the request was\n\
         carried out. A run still going when the synchronous wait ends (about 20 s), and a\n\
         `run_job` handle, are `success: true` with `execution_state` `queued` or `running`.\n\n\
         `result_expectation` (`success`, `failure`, `observe`) never changes `success`: it is\n\
         recorded before the run and only classifies the outcome (`output.expectation.matched` and\n\
         `actionable`, and the ledger's evidence). An expected failure is still `success: false`;\n\
         use `accepted_exit_codes` when an exit status is itself the answer.\n",
        max_codes = crate::execution::MAX_ACCEPTED_EXIT_CODES,
    );
    let attention =
        serde_json::to_string_pretty(&Value::Object(crate::kernel::spec::schema_for::<
            crate::board::SessionAttention,
        >()))
        .expect("schemas serialize");
    let _ = writeln!(
        out,
        "## Message board\n\n\
         Each Workflow Session has a message board (`post_session_message`, `list_session_messages`,\n\
         `resolve_session_message`, `get_session_assignment`, `complete_session_message`,\n\
         `observe_session_messages`). Bounds: a body is 1-{body} characters (secrets redacted\n\
         before storage); a board retains the newest {retained} messages, removing resolved or\n\
         completed ones first (oldest first) and the oldest open one only when none is closed;\n\
         an observer whose cursor predates a removed change gets `history_lost`; an assignment shows at most {replies} direct replies (a todo with more,\n\
         or one whose replies retention removed, cannot be completed); observation tokens and\n\
         assignment fences are at most {token} characters; `wait_ms` is at most 25,000.\n\n\
         A call recorded in a session (`recording_session_id`) whose board has open ACK-required\n\
         messages carries `session_attention` next to `success`: the oldest {attn} such messages\n\
         (bodies cut to {excerpt} characters) not acknowledged in this request's\n\
         `ack_session_message_ids` (MCP wrapper metadata, at most 8 ids). Acknowledging records only\n\
         that an ACK was observed; resolving the message ends the re-projection.\n\n\
         ```json\n{attention}\n```\n",
        body = crate::board::MAX_BODY_CHARS,
        retained = wc_store::board::MAX_RETAINED_MESSAGES,
        replies = wc_store::board::MAX_ASSIGNMENT_REPLIES,
        token = crate::tokens::MAX_TOKEN_CHARS,
        attn = crate::board::MAX_ATTENTION_MESSAGES,
        excerpt = crate::board::ATTENTION_EXCERPT_CHARS,
    );
    let _ = writeln!(
        out,
        "## Recording\n\n\
         A call is recorded (a `tool_call_started` / `tool_call_finished` pair in its ledger) in\n\
         the Workflow Session an explicit `recording_session_id` names, which must be active. A\n\
         tool's own `session_id` is recorded in only when the table's last column says so: tools\n\
         that act on the project in that session (execution, `work_on_project`) always, and\n\
         `session_handoff_summary` when the call names no recorder; for every other tool\n\
         `session_id` is the target it reads or changes, authorized on its own, and it keeps only\n\
         the tool's effect (a message posted, the session finished). A finished or closed session\n\
         takes no new calls: reading one leaves it as it was.\n"
    );
    let _ = writeln!(
        out,
        "## Tasks\n\n\
         On the 2026-07-28 contract a `tools/call` whose request `_meta` declares the tasks\n\
         extension (`io.modelcontextprotocol/tasks` in its client capabilities) may be answered\n\
         with a durable task handle (`resultType: \"task\"`) instead of the result: poll\n\
         `tasks/get` on any instance until `completed` (its `result` is the `CallToolResult` the\n\
         call would have given had it waited, a tool error included), `failed` or `cancelled`;\n\
         `tasks/cancel` stops the task's work as `stop_job` does. A task is its creator's\n\
         authority group's only and lives for `ttlMs` (`WC_TASK_TTL_SECS`, default one day).\n\
         Which calls become tasks is each tool's `execution.taskSupport` below (`optional`, with\n\
         the condition under which a call takes one; a tool without the line never does); a\n\
         request that does not declare the extension, and every older revision, gets the\n\
         blocking answer.\n\n\
         **Task notifications.** Instead of polling, a client that declares the extension may\n\
         `subscriptions/listen` with `notifications.taskIds` (at most 16): the acknowledgement\n\
         names those that are the caller's own live tasks (others are left out, as `tasks/get`\n\
         would refuse them); then each one's `notifications/tasks` — what `tasks/get` answers —\n\
         at once and whenever its status or input requests change. The stream ends with its\n\
         result when every named task has ended, or after `WC_LISTEN_MAX_MS` (default 25 s;\n\
         listen again). Task ids without the extension declared are `-32021`.\n\n\
         **Progress.** An MCP `tools/call` whose `_meta` carries a `progressToken` is answered\n\
         as an event stream while an execution waits: `notifications/progress` about once a\n\
         second (`progress` the seconds since it was queued, `total` its timeout, `message` where\n\
         it is), then the result. A working task's `statusMessage` says the same. A 2026-07-28\n\
         request whose `_meta` log level (`io.modelcontextprotocol/logLevel`) takes `info` also\n\
         hears the work's output as it arrives, as `notifications/message` lines (logger\n\
         `stdout` or `stderr`; whole characters; up to 256 KiB a stream, the rest stays in the\n\
         result and `job_log`). Without either the answer is one JSON object.\n"
    );
    let specs: Vec<_> = runtime
        .specs()
        .iter()
        .filter(|s| s.meta.category != Category::Conformance)
        .collect();
    let _ = writeln!(
        out,
        "| tool | category | scopes | read-only | consequential | REST operation | recorded in `session_id` |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for s in &specs {
        let m = &s.meta;
        let scopes: Vec<&str> = m.scopes.iter().map(|x| x.as_str()).collect();
        let op = if crate::rest::openapi::is_named(m.name) {
            format!("`POST /api/actions/{}`", m.name)
        } else {
            "via `callRuntimeTool`".to_owned()
        };
        let recorded = match (s.session, s.business_pair) {
            (SessionUse::None | SessionUse::Creates, _) => "—",
            (_, BusinessPair::Always) => "always",
            (_, BusinessPair::UnlessRecorded) => "without a recorder",
            (_, BusinessPair::Never) => "no (target)",
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} | {} |",
            m.name,
            m.category.as_str(),
            if scopes.is_empty() {
                "—".to_owned()
            } else {
                scopes.join(", ")
            },
            if m.read_only() { "yes" } else { "no" },
            if m.is_consequential() { "yes" } else { "no" },
            op,
            recorded
        );
    }
    for s in &specs {
        let m = &s.meta;
        let _ = writeln!(
            out,
            "\n## `{}` — {}\n\n{}\n",
            m.name, m.title, m.description
        );
        if let Some(task) = s.task {
            let _ = writeln!(
                out,
                "`execution.taskSupport`: `optional` — {}.\n",
                task.when.describe()
            );
        }
        let _ = writeln!(
            out,
            "Input schema:\n\n```json\n{}\n```\n",
            pretty(&Value::Object((*s.input_schema).clone()))
        );
        let _ = writeln!(
            out,
            "Output schema:\n\n```json\n{}\n```",
            pretty(&Value::Object((*s.output_schema).clone()))
        );
    }
    out
}

/// `docs/ERRORS.md`: the stable `error.kind` strings.
pub fn errors_markdown() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Error kinds\n");
    let _ = writeln!(
        out,
        "Generated by `wc-admin docs errors`; do not edit by hand.\n\n\
         A tool that ran (or was refused after it was identified) answers\n\
         `{{\"success\": false, \"error\": {{\"kind\", \"message\", …}}}}`. `kind` is one of the stable\n\
         strings below; new kinds may be added, existing ones are never renamed. The REST surface\n\
         answers with the HTTP status shown; MCP always carries the result in `structuredContent`\n\
         with `isError: true`.\n\n\
         The execution kinds (`execution_rejected`, `spawn_failed`, `exit_nonzero`,\n\
         `killed_by_signal`, `timed_out`, `cancelled`, `lost`) say how an execution ended when it did\n\
         not succeed. Their result still carries the execution's `output` (exit code, signal,\n\
         stdout/stderr, truncation flags, job id, duration), and REST answers them with 200: the\n\
         request was valid and carried out; the program's end is the answer.\n"
    );
    let _ = writeln!(out, "| kind | HTTP (REST) | failure class | what to do |");
    let _ = writeln!(out, "|---|---|---|---|");
    for k in ErrorKind::ALL {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            k.as_str(),
            k.http_status(),
            k.failure_kind(),
            k.recovery_kind()
        );
    }
    let _ = writeln!(
        out,
        "\nProtocol-level failures are not tool results. MCP: `-32700` malformed JSON (HTTP 400),\n\
         `-32600` not a JSON-RPC 2.0 request (HTTP 400), `-32601` unknown or removed method (HTTP 404\n\
         on 2026-07-28), `-32602` invalid params (missing `_meta`, unknown tool, malformed wrapper\n\
         metadata), `-32020` `Mcp-Method`/`Mcp-Name` header mismatch (HTTP 400), `-32022` unsupported\n\
         protocol version (the supported list is in `error.data`). HTTP routes answer\n\
         `{{\"error\": {{\"kind\", \"message\", \"request_id\"}}}}` with kinds `unauthorized` and\n\
         `invalid_token` (401, with `WWW-Authenticate`), `insufficient_scope` (403),\n\
         `payload_too_large` (413), `request_timeout` (408: the body did not arrive within the body\n\
         deadline), `bad_request` (400), `not_found` (404), `unavailable` (503; with `Retry-After`\n\
         when the server is at its concurrent-request or request-body limit), `rate_limited` (429,\n\
         with `Retry-After`: a caller at its share of concurrent requests or listen streams, or on\n\
         the runner API a delivered work id whose caller holds its share of the runner) and\n\
         `internal` (500, opaque: the cause is in the log under the request id). These shapes are\n\
         the same on `/mcp`, where they come before the JSON-RPC layer.\n\n\
         A message that is not valid HTTP is refused by the HTTP layer before wc reads it: a\n\
         header value holding a control byte (NUL, CR, LF; RFC 9110 §5.5) gets a bare 400 and the\n\
         connection closes. Clients send such values in the\n\
         `Mcp-*` headers in the spec's `=?base64?…?=` form, which wc decodes; inside JSON any\n\
         character is allowed, and a task id with control bytes is the ordinary `-32602`."
    );
    out
}
