//! The dependency bundle of request handling: what a tool (or a route) may reach beyond its
//! arguments. Built once per process, cloned per call (every field is a handle), and holding
//! no request state.

use std::sync::Arc;

use wc_store::Pool;
use wc_store::outbox::QueuePublisher;

use crate::auth::Authenticator;
use crate::config::ServerConfig;
use crate::tokens::TokenKeys;
use crate::wake::Wakeups;

/// Pool, configuration, wake-ups, the SQS publisher, the authenticator and the token keys.
#[derive(Clone)]
pub struct Deps {
    /// The database pool.
    pub pool: Pool,
    /// Configuration, read once per process.
    pub config: Arc<ServerConfig>,
    /// Wake-ups for waits on durable state (hints only; see [`crate::wake`]).
    pub wake: Wakeups,
    /// Sends staged SQS work messages after commit; `None` when no runner uses SQS.
    pub publisher: Option<Arc<dyn QueuePublisher>>,
    /// Resolves and re-checks callers' credentials.
    pub auth: Authenticator,
    /// What ending work writes beside it (its evidence, the end of the task waiting for it),
    /// given to every store call that ends work.
    pub work_ends: Arc<dyn wc_store::work::WorkEnding>,
    /// Keys of observation tokens and assignment fences, derived once from the configured or
    /// database-kept secret ([`crate::board::keys`]).
    pub token_keys: Arc<tokio::sync::OnceCell<TokenKeys>>,
}

impl std::fmt::Debug for Deps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deps")
            .field("auth", &self.auth)
            .field("publisher", &self.publisher.is_some())
            .finish_non_exhaustive()
    }
}

impl Deps {
    /// A pooled database connection.
    pub async fn client(&self) -> Result<wc_store::Client, wc_store::StoreError> {
        Ok(self.pool.get().await?)
    }

    /// The bundle over `pool` with `config`, ending work as `work_ends` says: OAuth
    /// verification when configured, wake-ups by polling, no SQS publisher.
    pub fn new(
        pool: Pool,
        config: ServerConfig,
        work_ends: Arc<dyn wc_store::work::WorkEnding>,
    ) -> Self {
        let oauth = config
            .oauth
            .clone()
            .map(|s| Arc::new(crate::auth::OAuthVerifier::new(s)));
        Self {
            auth: Authenticator::new(pool.clone(), oauth, config.allow_anonymous),
            pool,
            config: Arc::new(config),
            wake: Wakeups::polling(),
            publisher: None,
            work_ends,
            token_keys: Arc::default(),
        }
    }
}
