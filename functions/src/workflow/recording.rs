//! The uniform recorder, the kernel's recorder port: appends a call's event pairs to the
//! sessions [`super::authority::Authority`] authorized.
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
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;
use wc_domain::{EventKind, EventRole, SessionId};
use wc_store::sessions::{NewEvent, SessionRow};

use super::mutation;
use crate::deps::Deps;
use crate::kernel::ports::{self, CallFacts, Outcome, PortFuture, Sessions};
use crate::kernel::spec::{BusinessPair, ToolSpec};
use crate::redaction::redact_json;
use crate::result::{ErrorKind, ToolError};

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
#[derive(Debug)]
struct Recording {
    pairs: Vec<Pair>,
    started_at: DateTime<Utc>,
    arguments: Value,
}

/// A bounded, redacted summary of the arguments for the ledger; `private` fields are
/// replaced by their size.
fn summarize(args: &Value, private: &[&str]) -> Value {
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
    if let Some(map) = v.as_object_mut() {
        for field in private {
            if let Some(value) = map.get_mut(*field) {
                let bytes = value.as_str().map_or_else(
                    || serde_json::to_vec(value).map_or(0, |b| b.len()),
                    str::len,
                );
                *value = json!({ "omitted": "private", "bytes": bytes });
            }
        }
    }
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

/// The kernel's recorder: one event pair per session and role a call lands in.
#[derive(Debug, Default)]
pub struct LedgerRecorder;

impl ports::Recorder for LedgerRecorder {
    fn begin<'a>(
        &'a self,
        deps: &'a Deps,
        call: &'a CallFacts<'a>,
        sessions: &'a Sessions,
        args: &'a Value,
    ) -> PortFuture<'a, Result<Box<dyn ports::Recording>, ToolError>> {
        Box::pin(async move {
            let recording = begin(&deps.pool, call, sessions, args).await?;
            Ok(Box::new(recording) as Box<dyn ports::Recording>)
        })
    }

    fn finished_events(
        &self,
        suspended: &Value,
        spec: &ToolSpec,
        outcome: Outcome<'_>,
    ) -> Vec<(SessionId, Vec<NewEvent>)> {
        resumed_events(suspended, spec, &outcome)
    }
}

impl ports::Recording for Recording {
    fn finish<'a>(
        self: Box<Self>,
        deps: &'a Deps,
        call: &'a CallFacts<'a>,
        outcome: Outcome<'a>,
    ) -> PortFuture<'a, ()> {
        Box::pin(async move { end(&deps.pool, &self, call, &outcome).await })
    }

    fn suspend(&self, call: &CallFacts<'_>) -> Value {
        let pairs: Vec<SuspendedPair> = self
            .pairs
            .iter()
            .map(|p| SuspendedPair {
                session_id: p.session.id.clone(),
                role: p.role,
                call_id: p.call_id,
            })
            .collect();
        json!({ "invocation_id": call.invocation_id, "pairs": pairs })
    }
}

/// A pair of a suspended recording: its `started` event is committed.
#[derive(Debug, Serialize, Deserialize)]
struct SuspendedPair {
    session_id: SessionId,
    role: EventRole,
    call_id: Uuid,
}

/// A recording suspended while its call runs as a task.
#[derive(Debug, Deserialize)]
struct Suspended {
    invocation_id: Uuid,
    pairs: Vec<SuspendedPair>,
}

/// The `finished` events a suspended recording owes, per session, recorder pair first (the
/// reverse of its start order, as [`Recording::events`] orders them).
fn resumed_events(
    suspended: &Value,
    spec: &ToolSpec,
    outcome: &Outcome<'_>,
) -> Vec<(SessionId, Vec<NewEvent>)> {
    let Ok(s) = serde_json::from_value::<Suspended>(suspended.clone()) else {
        tracing::warn!(
            tool = spec.meta.name,
            "a task's suspended recording does not parse; its end is not recorded"
        );
        return Vec::new();
    };
    let mut by_session: BTreeMap<SessionId, Vec<NewEvent>> = BTreeMap::new();
    for pair in s.pairs.iter().rev() {
        by_session
            .entry(pair.session_id.clone())
            .or_default()
            .push(finished_event(
                spec,
                s.invocation_id,
                pair.role,
                pair.call_id,
                outcome,
            ));
    }
    by_session.into_iter().collect()
}

/// Decides the call's pairs and, for a mutating tool, commits the `started` events. A
/// session that closed since it was authorized refuses the call here, before any effect.
async fn begin(
    pool: &wc_store::Pool,
    call: &CallFacts<'_>,
    sessions: &Sessions,
    args: &Value,
) -> Result<Recording, ToolError> {
    let spec = call.spec;
    let Sessions { business, recorder } = sessions;
    let mut pairs = Vec::new();
    if let Some(r) = recorder {
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
    // refused by the authority, and a read of a finished or closed session leaves it as it is.
    if business_records && let Some(b) = business.as_ref().filter(|b| b.is_active()) {
        pairs.push(Pair {
            session: b.clone(),
            role: EventRole::Business,
            call_id: Uuid::now_v7(),
        });
    }
    // The summary is read only by the pairs' `started` events.
    let arguments = if pairs.is_empty() {
        Value::Null
    } else {
        summarize(args, spec.private_arguments)
    };
    let recording = Recording {
        pairs,
        started_at: Utc::now(),
        arguments,
    };
    if !deferred_start(spec) && !recording.pairs.is_empty() {
        // Durable intent before effect; a session that closed meanwhile refuses the call.
        for (id, events) in recording.events(call, None) {
            mutation::append(pool, id, &events, true).await?;
        }
    }
    Ok(recording)
}

/// Appends the `finished` events (and, for a read-only tool, the `started` ones too). The
/// tool's result is never changed by a ledger failure; the failure is logged.
async fn end(
    pool: &wc_store::Pool,
    recording: &Recording,
    call: &CallFacts<'_>,
    outcome: &Outcome<'_>,
) {
    let spec = call.spec;
    // A pair whose start is committed is completed whatever became of its session; a read's
    // pair starts now, so its session must still be active.
    let require_active = deferred_start(spec);
    for (id, events) in recording.events(call, Some(outcome)) {
        match mutation::append(pool, id, &events, require_active).await {
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

impl Recording {
    /// This call's events to append now, per session (one transaction each): at the start
    /// (`finished` is `None`) the `started` events of a mutating tool; at the end the
    /// `finished` events, preceded by the `started` ones for a read-only tool. Recorder events
    /// come before business events when both roles land in one session, so the business pair
    /// nests inside the recorder's.
    fn events(
        &self,
        call: &CallFacts<'_>,
        finished: Option<&Outcome<'_>>,
    ) -> BTreeMap<&SessionId, Vec<NewEvent>> {
        let mut by_session: BTreeMap<&SessionId, Vec<NewEvent>> = BTreeMap::new();
        if finished.is_none() || deferred_start(call.spec) {
            for pair in &self.pairs {
                by_session
                    .entry(&pair.session.id)
                    .or_default()
                    .push(started_event(self, call, pair));
            }
        }
        if let Some(done) = finished {
            for pair in self.pairs.iter().rev() {
                by_session
                    .entry(&pair.session.id)
                    .or_default()
                    .push(finished_event(
                        call.spec,
                        call.invocation_id,
                        pair.role,
                        pair.call_id,
                        done,
                    ));
            }
        }
        by_session
    }
}

/// A read-only tool's pair is written after the read, in one transaction: it has no effect
/// to order its intent before.
fn deferred_start(spec: &ToolSpec) -> bool {
    spec.meta.read_only()
}

fn started_event(recording: &Recording, call: &CallFacts<'_>, pair: &Pair) -> NewEvent {
    let spec = call.spec;
    NewEvent {
        kind: EventKind::ToolCallStarted,
        call_id: pair.call_id,
        invocation_id: call.invocation_id,
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
    spec: &ToolSpec,
    invocation_id: Uuid,
    role: EventRole,
    call_id: Uuid,
    done: &Outcome<'_>,
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
    if (done.result.success || spec.facts_on_failure)
        && let (Some(facts), Some(output), Value::Object(fields)) =
            (spec.ledger_facts, &done.result.output, &mut payload)
    {
        fields.extend(facts(output));
    }
    NewEvent {
        kind: EventKind::ToolCallFinished,
        call_id,
        invocation_id,
        role,
        tool_name: Some(spec.meta.name.to_owned()),
        payload,
    }
}
