//! The uniform recorder: authorizes the business session (`session_id`) and the recording
//! session (`recording_session_id`) independently, and appends the call's event pairs.
//!
//! A call is recorded where an explicit `recording_session_id` names a session (role
//! `recorder`), and in its business session only when its spec says the tool works there
//! ([`BusinessPair`]): execution and `work_on_project` always, `session_handoff_summary` in
//! place of a missing recorder, the session tools never (their `session_id` is a target). Each
//! session a call lands in gets exactly one `tool_call_started` / `tool_call_finished` pair per
//! role, all sharing one invocation id, each pair with its own call id. The tool's own effect
//! (a message posted, a session finished) is the tool's evidence, written by the tool.
//!
//! A mutating tool's `started` events are committed before it runs (durable intent before
//! effect), and its `finished` events complete those pairs whatever the call did to the
//! session meanwhile (finishing it, say). A read-only tool has no effect to order against, so
//! its pair is written in one transaction after the read, with the true start time in the
//! payload, and only into a session that is still active then: a finished or closed session
//! takes no new calls, and a read of one leaves it as it was.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use uuid::Uuid;
use wc_domain::{EventRole, Mode, ProjectId, SessionId};
use wc_store::sessions::{NewEvent, SessionRow};

use super::spec::{BusinessPair, SessionUse, ToolSpec};
use super::telemetry::ExecutionState;
use super::wrapper::WrapperMeta;
use crate::AppState;
use crate::auth::Principal;
use crate::redaction::redact_json;
use crate::result::{ErrorKind, ToolError, ToolResult};
use crate::workflow::{authority, mutation};

/// Largest argument summary kept in a `tool_call_started` event.
const MAX_ARGUMENT_SUMMARY_BYTES: usize = 2048;
/// Longest string kept in an argument summary.
const MAX_SUMMARY_STRING_CHARS: usize = 256;

/// One session's part in a call: which session, in which role, under which call id.
#[derive(Debug, Clone)]
struct Pair {
    session: Arc<SessionRow>,
    role: EventRole,
    call_id: Uuid,
}

/// What the recorder established before dispatch.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The authorized business session.
    pub business: Option<Arc<SessionRow>>,
    /// The authorized recording session.
    pub recorder: Option<Arc<SessionRow>>,
    /// The invocation id shared by every event of this call.
    pub invocation_id: Uuid,
    pairs: Vec<Pair>,
    started_at: DateTime<Utc>,
    arguments: Value,
    deferred_start: bool,
}

/// A bounded, redacted summary of the arguments for the ledger.
fn summarize(args: &Value) -> Value {
    fn cut(v: &mut Value) {
        match v {
            Value::String(s) => {
                // The ledger is `jsonb`, which cannot hold U+0000.
                if s.contains('\0') {
                    *s = s.replace('\0', "\u{FFFD}");
                }
                if s.chars().count() > MAX_SUMMARY_STRING_CHARS {
                    let kept: String = s.chars().take(MAX_SUMMARY_STRING_CHARS).collect();
                    *s = format!("{kept}…");
                }
            }
            Value::Array(items) => items.iter_mut().for_each(cut),
            Value::Object(map) => map.values_mut().for_each(cut),
            _ => {}
        }
    }
    let mut v = args.clone();
    redact_json(&mut v);
    cut(&mut v);
    let bytes = serde_json::to_vec(&v)
        .map(|b| b.len())
        .unwrap_or(usize::MAX);
    if bytes > MAX_ARGUMENT_SUMMARY_BYTES {
        json!({ "omitted": "too_large", "bytes": bytes })
    } else {
        v
    }
}

fn mode_denied(field: &'static str, tool: &str) -> ToolError {
    ToolError::new(
        ErrorKind::ModeDenied,
        format!("the session named by {field} is read_only; {tool} changes the project and needs a normal session"),
    )
    .with("field", field)
    .with("mode", "read_only")
}

/// Argument `name` as its domain type, when the call gives it. The arguments were validated
/// against the tool's schema, which the type generates, so a refusal here means a tool's
/// schema and its type disagree.
fn typed_arg<T: std::str::FromStr<Err = wc_domain::ParseError>>(
    args: &Value,
    name: &str,
) -> Result<Option<T>, ToolError> {
    match args.get(name).and_then(Value::as_str) {
        None => Ok(None),
        Some(raw) => raw.parse().map(Some).map_err(|e: wc_domain::ParseError| {
            ToolError::new(
                ErrorKind::InvalidArguments,
                format!("argument /{name}: {e}"),
            )
            .with("pointer", format!("/{name}"))
            .with("rule", "pattern")
        }),
    }
}

/// Authorizes the sessions of `call` and, for a mutating tool, commits the `started` events.
/// Every refusal happens here, before any effect.
pub async fn begin(
    state: &AppState,
    spec: &ToolSpec,
    principal: &Principal,
    wrapper: &WrapperMeta,
    args: &Value,
) -> Result<Recording, ToolError> {
    let session_id = typed_arg::<SessionId>(args, "session_id")?;
    let project = typed_arg::<ProjectId>(args, "project")?;
    let business = match (spec.session, &session_id) {
        (SessionUse::None, _) | (_, None) => None,
        (use_, Some(id)) => {
            let row = authority::load(&state.pool, principal, id, "session_id").await?;
            if matches!(use_, SessionUse::Changes | SessionUse::Works) {
                authority::require_active(&row, "session_id")?;
            }
            if let Some(project) = &project {
                authority::require_project(&row, project, "session_id")?;
            }
            Some(row)
        }
    };
    // The request's project: the explicit argument, else the business session's.
    let request_project = project.or_else(|| business.as_ref().map(|b| b.project.clone()));
    let recorder = match &wrapper.recording_session_id {
        None => None,
        Some(id) => {
            // Recording in the business session itself: it was just loaded and authorized for
            // this caller, and authority does not depend on the argument's role.
            let row = match &business {
                Some(b) if b.id == *id => b.clone(),
                _ => authority::load(&state.pool, principal, id, "recording_session_id").await?,
            };
            authority::require_active(&row, "recording_session_id")?;
            if let Some(project) = &request_project {
                authority::require_project(&row, project, "recording_session_id")?;
            }
            Some(row)
        }
    };
    // A read-only session records no project-changing work. Session management tools are
    // exempt: they change only the session itself.
    let changes_project = !spec.meta.read_only && !spec.session.is_session_management();
    if changes_project {
        if business.as_ref().is_some_and(|b| b.mode == Mode::ReadOnly) {
            return Err(mode_denied("session_id", spec.meta.name));
        }
        if recorder.as_ref().is_some_and(|r| r.mode == Mode::ReadOnly) {
            return Err(mode_denied("recording_session_id", spec.meta.name));
        }
    }
    let mut pairs = Vec::new();
    if let Some(r) = &recorder {
        pairs.push(Pair {
            session: r.clone(),
            role: EventRole::Recorder,
            call_id: Uuid::now_v7(),
        });
    }
    let business_records = match spec.business_pair {
        BusinessPair::Never => false,
        BusinessPair::Always => true,
        BusinessPair::UnlessRecorded => recorder.is_none(),
    };
    // A business session that is not active takes no pair: a tool that needs it active was
    // refused above, and a read of a finished or closed session leaves it as it is.
    if business_records && let Some(b) = business.as_ref().filter(|b| b.is_active()) {
        pairs.push(Pair {
            session: b.clone(),
            role: EventRole::Business,
            call_id: Uuid::now_v7(),
        });
    }
    let recording = Recording {
        business,
        recorder,
        invocation_id: Uuid::now_v7(),
        pairs,
        started_at: Utc::now(),
        arguments: summarize(args),
        deferred_start: spec.meta.read_only,
    };
    if !recording.deferred_start && !recording.pairs.is_empty() {
        // Durable intent before effect; a session that closed meanwhile refuses the call.
        for (id, events) in recording.events(spec, None) {
            mutation::append(&state.pool, id, &events, true).await?;
        }
    }
    Ok(recording)
}

/// Appends the `finished` events (and, for a read-only tool, the `started` ones too). The
/// tool's result is never changed by a ledger failure; the failure is logged.
pub async fn end(
    state: &AppState,
    recording: &Recording,
    spec: &ToolSpec,
    result: &ToolResult,
    execution: ExecutionState,
    duration_ms: u64,
) {
    let outcome = Finished {
        result,
        execution,
        duration_ms,
    };
    // A pair whose start is committed is completed whatever became of its session; a read's
    // pair starts now, so its session must still be active.
    let require_active = recording.deferred_start;
    for (id, events) in recording.events(spec, Some(&outcome)) {
        match mutation::append(&state.pool, id, &events, require_active).await {
            Ok(_) => {}
            Err(e) if e.kind == ErrorKind::SessionClosed => {
                tracing::debug!(
                    tool = spec.meta.name,
                    "the session closed during a read; its call is not recorded"
                );
            }
            Err(e) => {
                tracing::warn!(tool = spec.meta.name, error = %crate::telemetry::loggable(&e.message), "could not record tool_call_finished");
            }
        }
    }
}

struct Finished<'a> {
    result: &'a ToolResult,
    execution: ExecutionState,
    duration_ms: u64,
}

impl Recording {
    /// This call's events to append now, per session (one transaction each): at the start
    /// (`finished` is `None`) the `started` events of a mutating tool; at the end the
    /// `finished` events, preceded by the `started` ones for a read-only tool. Recorder events
    /// come before business events when both roles land in one session, so the business pair
    /// nests inside the recorder's.
    fn events(
        &self,
        spec: &ToolSpec,
        finished: Option<&Finished<'_>>,
    ) -> BTreeMap<&SessionId, Vec<NewEvent>> {
        let mut by_session: BTreeMap<&SessionId, Vec<NewEvent>> = BTreeMap::new();
        if finished.is_none() || self.deferred_start {
            for pair in &self.pairs {
                by_session
                    .entry(&pair.session.id)
                    .or_default()
                    .push(started_event(self, spec, pair));
            }
        }
        if let Some(done) = finished {
            for pair in self.pairs.iter().rev() {
                by_session
                    .entry(&pair.session.id)
                    .or_default()
                    .push(finished_event(self, spec, pair, done));
            }
        }
        by_session
    }
}

fn started_event(recording: &Recording, spec: &ToolSpec, pair: &Pair) -> NewEvent {
    NewEvent {
        kind: "tool_call_started".into(),
        call_id: pair.call_id,
        invocation_id: recording.invocation_id,
        role: pair.role,
        tool_name: Some(spec.meta.name.to_owned()),
        payload: json!({
            "tool": spec.meta.name,
            "started_at": recording.started_at,
            "arguments": recording.arguments,
        }),
    }
}

fn finished_event(
    recording: &Recording,
    spec: &ToolSpec,
    pair: &Pair,
    done: &Finished<'_>,
) -> NewEvent {
    let mut payload = json!({
        "tool": spec.meta.name,
        "success": done.result.success,
        "execution_state": done.execution,
        "duration_ms": done.duration_ms,
    });
    if let Some(e) = &done.result.error {
        payload["error_kind"] = json!(e.kind.as_str());
    }
    NewEvent {
        kind: "tool_call_finished".into(),
        call_id: pair.call_id,
        invocation_id: recording.invocation_id,
        role: pair.role,
        tool_name: Some(spec.meta.name.to_owned()),
        payload,
    }
}
