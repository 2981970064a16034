//! What every route handler may use ([`AppState`]), derived from code and configuration only.
//! Built by [`crate::app`], the composition root; route modules read it, never build it.

use std::sync::Arc;

use axum::extract::FromRef;
use wc_store::outbox::QueuePublisher;

use crate::auth::Authenticator;
use crate::deps::Deps;
use crate::http::limits::Admission;
use crate::kernel::ToolRuntime;
use crate::wake::Wakeups;

/// Everything a request handler may use. Cloned per request; holds no request state.
#[derive(Clone)]
pub struct AppState {
    /// Pool, configuration, wake-ups, publisher, authenticator and token keys: what tools get.
    pub deps: Deps,
    /// The tool kernel.
    pub runtime: Arc<ToolRuntime>,
    /// The serialized OpenAPI document, built by the REST surface on first request, so the
    /// other functions never pay for it at start-up.
    pub openapi: Arc<std::sync::OnceLock<axum::body::Bytes>>,
    /// What this process admits at once (requests, body bytes); see [`crate::http::limits`].
    pub admission: Arc<Admission>,
}

impl AppState {
    /// The same state with `wake` as its wake-up hub.
    pub fn with_wakeups(mut self, wake: Wakeups) -> Self {
        self.deps.wake = wake;
        self
    }

    /// The same state sending SQS work messages through `publisher`.
    pub fn with_publisher(mut self, publisher: Option<Arc<dyn QueuePublisher>>) -> Self {
        self.deps.publisher = publisher;
        self
    }
}

impl FromRef<AppState> for Authenticator {
    fn from_ref(state: &AppState) -> Self {
        state.deps.auth.clone()
    }
}

impl FromRef<AppState> for Arc<Admission> {
    fn from_ref(state: &AppState) -> Self {
        state.admission.clone()
    }
}
