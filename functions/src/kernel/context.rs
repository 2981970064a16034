//! What a tool sees of the world: the caller, its dependency bundle, the clock and the window.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Registry;
use crate::auth::Principal;
use crate::deps::Deps;

/// A source of the current time; tests may pin it.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A host window, known only as a domain-separated hash of the host's window metadata and
/// the principal. The raw value is never stored, logged or returned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientWindow(String);

impl ClientWindow {
    /// Hashes the raw `_meta["openai/session"]` value for `principal`: SHA-256 over a domain
    /// tag and length-prefixed fields, so no field can bleed into another.
    pub fn derive(principal: &Principal, raw: &str) -> ClientWindow {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for field in [
            "wc.client-window.v1",
            principal.kind.as_str(),
            principal.authority_group.as_str(),
            raw,
        ] {
            h.update((field.len() as u64).to_be_bytes());
            h.update(field.as_bytes());
        }
        ClientWindow(hex::encode(h.finalize()))
    }

    /// The hex digest.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Where a call says how it is doing while it runs, when its caller asked: progress (an MCP
/// request with a `progressToken`) and the work's output as it arrives (one that set a log
/// level that takes `info`). Reports are awaited in order, before the call's answer.
pub trait Progress: Send + Sync {
    /// Reports `progress` (greater than every earlier report) of `total`, when known.
    fn report(
        &self,
        progress: f64,
        total: Option<f64>,
        message: String,
    ) -> super::future::PortFuture<'_, ()>;

    /// Whether the caller takes output lines ([`Self::output`]); when not, none is read.
    fn wants_output(&self) -> bool;

    /// Passes on `text`, the next output of the work's `stream` (`stdout` or `stderr`).
    fn output(&self, stream: &'static str, text: String) -> super::future::PortFuture<'_, ()>;
}

/// Everything a tool may use for one call.
#[derive(Clone)]
pub struct ToolContext {
    /// The tool called.
    pub tool: &'static str,
    /// Pool, configuration, wake-ups, publisher, authenticator and token keys.
    pub deps: Deps,
    /// The registered tools.
    pub registry: Arc<Registry>,
    /// The caller.
    pub principal: Arc<Principal>,
    /// The host window, when the host named one.
    pub window: Option<ClientWindow>,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// The hard deadline of this dispatch, from its start.
    pub dispatch_deadline: std::time::Duration,
    /// Id shared by everything this one invocation records.
    pub invocation_id: uuid::Uuid,
    /// The business session named by `session_id`, loaded and authorized by the session authority port.
    pub business: Option<Arc<wc_store::sessions::SessionRow>>,
    /// The recording session named by `recording_session_id`, authorized by the session authority port. It is
    /// provenance only: never a business target, guard or source of execution defaults.
    pub recorder: Option<Arc<wc_store::sessions::SessionRow>>,
    /// The task this call may become: offered by the surface, kept only for a tool that
    /// supports tasks, with when it takes one.
    pub task: Option<(Arc<super::task::TaskOffer>, super::task::TaskWhen)>,
    /// Where the call reports its progress, when its caller asked.
    pub progress: Option<Arc<dyn Progress>>,
}

impl ToolContext {
    /// The task offer a call that queues work takes: `background` work always, and work whose
    /// `timeout_ms` exceeds the offer's threshold when the tool takes long calls as tasks.
    pub fn task_offer(
        &self,
        background: bool,
        timeout_ms: u64,
    ) -> Option<&Arc<super::task::TaskOffer>> {
        use super::task::TaskWhen;
        let (offer, when) = self.task.as_ref()?;
        let long = u128::from(timeout_ms) > offer.threshold.as_millis();
        let takes = background || (*when == TaskWhen::BackgroundOrLong && long);
        takes.then_some(offer)
    }

    /// The caller as its credential admits it now, for a call that waited before answering:
    /// a credential revoked meanwhile is `invalid_token`, the refusal its next request gets.
    pub async fn readmitted(&self) -> Result<Principal, crate::result::ToolError> {
        use crate::auth::AuthError;
        use crate::result::{ErrorKind, ToolError};
        self.deps
            .auth
            .readmit(&self.principal)
            .await
            .map_err(|e| match e {
                AuthError::Missing | AuthError::Invalid => ToolError::new(
                    ErrorKind::InvalidToken,
                    "the credential of this call was revoked while it waited",
                ),
                AuthError::Store(e) => ToolError::from(e),
                other => ToolError::internal(other),
            })
    }

    /// The board actor of this call: the tool, under this invocation.
    pub fn board_actor(&self, tool: &str) -> wc_store::board::Actor {
        wc_store::board::Actor::new(self.invocation_id, tool)
    }

    /// The business session the session authority loaded and authorized for argument `session_id`.
    pub fn business_session(
        &self,
        session_id: &wc_domain::SessionId,
    ) -> Result<Arc<wc_store::sessions::SessionRow>, crate::result::ToolError> {
        match &self.business {
            Some(s) if &s.id == session_id => Ok(s.clone()),
            _ => Err(crate::result::ToolError::new(
                crate::result::ErrorKind::UnknownSessionId,
                "session_id names no session this caller can use",
            )
            .with("field", "session_id")),
        }
    }
}
