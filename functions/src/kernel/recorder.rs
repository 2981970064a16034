//! The uniform recorder: authorizes the business session (`session_id`) and the recording
//! session (`recording_session_id`) independently, and appends the call's event pairs to them.
//!
//! Each session a call touches gets exactly one `tool_call_started` / `tool_call_finished`
//! pair per role (`recorder` for the recording session, `business` for the tool's own target),
//! all sharing one invocation id, each pair with its own call id. A mutating tool's `started`
//! events are committed before it runs (durable intent before effect); a read-only tool has no
//! effect to order against, so its pair is written in one transaction after the read, with the
//! true start time in the payload.
//!
//! A tool whose effect is itself a change of its business session (the message board) may
//! declare `ToolSpec::with_inline_evidence`: its business pair is then handed to the tool
//! ([`InlinePair`]) and written inside the effect's own transaction, `started` and `finished`
//! around the effect's evidence, so intent and effect commit together and the busy session row
//! is locked once per call instead of three times. When the tool wrote nothing (a refusal, a
//! no-op) the kernel writes the pair afterwards, as for a read-only tool.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use uuid::Uuid;
use wc_domain::{EventRole, Mode, ProjectId, SessionId};
use wc_store::sessions::{NewEvent, SessionRow};

use super::result::{ErrorKind, ToolError, ToolResult};
use super::spec::{SessionUse, ToolSpec};
use super::telemetry::ExecutionState;
use super::wrapper::WrapperMeta;
use crate::AppState;
use crate::auth::Principal;
use crate::redaction::redact_json;
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
    /// Whether the session must still be active when the call starts (a recorder always;
    /// a business session unless the tool manages lifecycles).
    must_be_active: bool,
    /// Whether the tool may write this pair itself, inside its effect's transaction.
    inline: bool,
}

/// The business pair of a call, handed to a tool that writes it inside its own transaction.
#[derive(Debug)]
pub struct InlinePair {
    started: NewEvent,
    tool: &'static str,
    started_at: std::time::Instant,
    written: AtomicBool,
}

impl InlinePair {
    /// The `tool_call_started` and `tool_call_finished` events, the latter for a successful
    /// call that ends now.
    pub fn events(&self) -> [NewEvent; 2] {
        let finished = NewEvent {
            kind: "tool_call_finished".into(),
            payload: json!({
                "tool": self.tool,
                "success": true,
                "execution_state": ExecutionState::Completed,
                "duration_ms": self.started_at.elapsed().as_millis() as u64,
            }),
            ..self.started.clone()
        };
        [self.started.clone(), finished]
    }

    /// Records that the tool committed the pair; the kernel then writes nothing more.
    pub fn mark_written(&self) {
        self.written.store(true, Ordering::SeqCst);
    }

    fn written(&self) -> bool {
        self.written.load(Ordering::SeqCst)
    }
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
    /// The business pair, when the tool writes it itself.
    pub inline: Option<Arc<InlinePair>>,
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
            must_be_active: true,
            inline: false,
        });
    }
    if let Some(b) = &business {
        pairs.push(Pair {
            session: b.clone(),
            role: EventRole::Business,
            call_id: Uuid::now_v7(),
            must_be_active: spec.session != SessionUse::Manages,
            inline: spec.inline_evidence,
        });
    }
    let mut recording = Recording {
        business,
        recorder,
        invocation_id: Uuid::now_v7(),
        pairs,
        started_at: Utc::now(),
        arguments: summarize(args),
        deferred_start: spec.meta.read_only,
        inline: None,
    };
    recording.inline = recording.pairs.iter().find(|p| p.inline).map(|p| {
        Arc::new(InlinePair {
            started: started_event(&recording, spec, p),
            tool: spec.meta.name,
            started_at: std::time::Instant::now(),
            written: AtomicBool::new(false),
        })
    });
    if !recording.deferred_start && recording.pairs.iter().any(|p| !p.inline) {
        // Durable intent before effect; a session that closed meanwhile refuses the call.
        append(state, &recording, spec, None, true).await?;
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
    if recording.pairs.is_empty() {
        return;
    }
    let outcome = Finished {
        result,
        execution,
        duration_ms,
    };
    if let Err(e) = append(state, recording, spec, Some(&outcome), false).await {
        tracing::warn!(tool = spec.meta.name, error = %crate::telemetry::loggable(&e.message), "could not record tool_call_finished");
    }
}

struct Finished<'a> {
    result: &'a ToolResult,
    execution: ExecutionState,
    duration_ms: u64,
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

/// Appends this call's events, one transaction per session (recorder events before business
/// events when both roles land in one session, so the business pair nests inside).
async fn append(
    state: &AppState,
    recording: &Recording,
    spec: &ToolSpec,
    finished: Option<&Finished<'_>>,
    require_active: bool,
) -> Result<(), ToolError> {
    // Per session: its events, and whether it must still be active to take them.
    let mut by_session: BTreeMap<&SessionId, (Vec<NewEvent>, bool)> = BTreeMap::new();
    // Started events: recorder first, then business; finished events in reverse.
    // An inline pair is the tool's to write; if it did not, it is written whole at the end,
    // unless it was committed after all (the change committed but its reply was lost).
    let mut inline_written = recording.inline.as_ref().is_some_and(|p| p.written());
    if finished.is_some()
        && !inline_written
        && let Some(pair) = recording.pairs.iter().find(|p| p.inline)
    {
        let client = state.pool.get().await.map_err(wc_store::StoreError::from)?;
        inline_written =
            wc_store::sessions::call_recorded(&client, &pair.session.id, pair.call_id).await?;
    }
    let skip = |pair: &Pair, finishing: bool| pair.inline && (!finishing || inline_written);
    if finished.is_none() || recording.deferred_start {
        for pair in recording.pairs.iter().filter(|p| !skip(p, false)) {
            let entry = by_session.entry(&pair.session.id).or_default();
            entry.0.push(started_event(recording, spec, pair));
            entry.1 |= pair.must_be_active;
        }
    } else if !inline_written {
        for pair in recording.pairs.iter().filter(|p| p.inline) {
            let entry = by_session.entry(&pair.session.id).or_default();
            entry.0.push(started_event(recording, spec, pair));
        }
    }
    if let Some(done) = finished {
        for pair in recording.pairs.iter().rev().filter(|p| !skip(p, true)) {
            let entry = by_session.entry(&pair.session.id).or_default();
            entry.0.push(finished_event(recording, spec, pair, done));
        }
    }
    for (id, (events, must_be_active)) in by_session {
        mutation::append(&state.pool, id, &events, require_active && must_be_active).await?;
    }
    Ok(())
}
