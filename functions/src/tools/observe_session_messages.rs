//! `observe_session_messages`: the board's changes since an observation token.
//!
//! Without a token the call establishes a baseline: the current token and no history. With a
//! token it returns the retained messages whose latest observable change came after it, each at
//! its current state, oldest change first; the returned token advances only through the last
//! change returned while `has_more`. `history_lost` says the cursor predates changes retention
//! removed. An optional bounded wait re-reads durable state (woken early by a hint when
//! notifications are on) and holds no lock or transaction while it waits; a wait that ends with
//! nothing new is a successful, unchanged result. A call that waited answers only once its
//! caller's credential was checked again: one revoked, or no longer granted the session,
//! during the wait gets the refusal its next request would get instead of the messages.

use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use wc_domain::SessionId;
use wc_macros::{tool, tool_args};
use wc_store::board;

use crate::auth::Scope;
use crate::board::{self as b, MessageView};
use crate::kernel::context::ToolContext;
use crate::result::{ErrorKind, ToolError};
use crate::tokens::TokenProblem;

/// Longest wait a caller may ask for, in milliseconds.
pub const MAX_WAIT_MS: u32 = 25_000;
/// Margin kept between the end of a wait and the dispatch deadline.
const DEADLINE_MARGIN: Duration = Duration::from_secs(2);

#[tool_args]
pub struct Args {
    /// The session.
    pub session_id: SessionId,
    /// The token of the previous observation; omit it to establish a baseline.
    #[schemars(length(min = 1, max = 4096))]
    pub token: Option<String>,
    /// Wait up to this long for a change when there is none yet (0-25,000 ms; never past the
    /// call's deadline).
    #[schemars(range(min = 0, max = 25000))]
    pub wait_ms: Option<u32>,
    /// Most changed messages to return (default 50, at most 200).
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u32>,
}

/// Output of `observe_session_messages`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The session.
    pub session_id: SessionId,
    /// Pass it to the next observation.
    pub token: String,
    /// Messages changed after the given token, oldest change first, each at its current state.
    pub messages: Vec<MessageView>,
    /// Whether more changes follow; observe again with the returned token.
    pub has_more: bool,
    /// Whether changes after the given token were removed by retention and cannot be shown.
    pub history_lost: bool,
    /// Whether this was a baseline (no token given): no history is returned.
    pub baseline: bool,
    /// How long the call waited for a change.
    pub waited_ms: u64,
}

/// Observe a Workflow Session's message board: without a token get a baseline token; with one, the
/// messages changed since, has_more, history_lost and the next token. May wait up to 25 s for a
/// change.
#[tool(reads, Session, "Observe session messages", session = Reads)]
async fn observe_session_messages(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    let keys = b::keys(&ctx.deps).await?;
    let binding = b::binding(&session);
    let limit = i64::from(args.limit.unwrap_or(50).clamp(1, 200));
    let current = |changes: &board::Changes| changes.session.message_observation_revision;
    let Some(token) = args.token else {
        let now = board::changes(&ctx.deps.pool, &session.id, i64::MAX, 0)
            .await?
            .ok_or_else(gone)?;
        return Ok(Output {
            session_id: session.id.clone(),
            token: keys.observation_token(binding, current(&now)),
            messages: Vec::new(),
            has_more: false,
            history_lost: false,
            baseline: true,
            waited_ms: 0,
        });
    };
    // Integrity, session and incarnation now; the revision below, against the first snapshot
    // (the session as it is now, not as the kernel loaded it).
    let cursor = keys
        .open_observation_token(binding, i64::MAX, &token)
        .map_err(|p| b::bad_token(ErrorKind::InvalidObservationToken, "token", p))?;
    let deadline = ctx.dispatch_deadline.saturating_sub(DEADLINE_MARGIN);
    let wait =
        Duration::from_millis(u64::from(args.wait_ms.unwrap_or(0).min(MAX_WAIT_MS))).min(deadline);
    let started = Instant::now();
    // Registered before the first read, so a change committed in between still wakes it.
    let mut waiter = (!wait.is_zero()).then(|| ctx.deps.wake.on_board(&session.id));
    let mut waited = false;
    let changes = loop {
        let changes = board::changes(&ctx.deps.pool, &session.id, cursor, limit)
            .await?
            .ok_or_else(gone)?;
        if cursor > current(&changes) {
            return Err(b::bad_token(
                ErrorKind::InvalidObservationToken,
                "token",
                TokenProblem::FutureRevision,
            ));
        }
        let left = wait.saturating_sub(started.elapsed());
        match &mut waiter {
            Some(w) if current(&changes) == cursor && !left.is_zero() => {
                waited = true;
                w.wait(left).await;
            }
            _ => break changes,
        }
    };
    if waited {
        let caller = ctx.readmitted().await?;
        if !caller.scopes.contains(Scope::ProjectRead) {
            return Err(ToolError::new(
                ErrorKind::InsufficientScope,
                "observe_session_messages needs the project:read scope",
            )
            .with("scope", Scope::ProjectRead.as_str()));
        }
        crate::workflow::authority::require_usable(&caller, &session, "session_id")?;
    }
    let next = match (changes.has_more, changes.messages.last()) {
        (true, Some(last)) => last.observation_revision,
        _ => current(&changes),
    };
    Ok(Output {
        session_id: session.id.clone(),
        token: keys.observation_token(binding, next),
        history_lost: cursor < changes.session.message_history_lost_through,
        messages: changes.messages.iter().map(MessageView::from).collect(),
        has_more: changes.has_more,
        baseline: false,
        waited_ms: started.elapsed().as_millis() as u64,
    })
}

fn gone() -> ToolError {
    ToolError::new(ErrorKind::UnknownSessionId, "the session no longer exists")
        .with("field", "session_id")
}
