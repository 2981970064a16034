//! The connection pool. Built once per process; connections open lazily on first use, each
//! through the process's [`Connector`] (TLS per `sslmode`, a fresh IAM auth token when enabled).

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime, Timeouts};

use crate::StoreError;
use crate::config::DatabaseConfig;
use crate::connect::{Connector, PoolConnect};

/// Builds the pool. Nothing connects until the first request needs a connection; a CA bundle
/// that cannot be used is reported now.
pub fn build_pool(cfg: &DatabaseConfig) -> Result<Pool, StoreError> {
    build_pool_with(cfg, Connector::new(cfg)?)
}

/// Builds the pool over an existing `connector` (made from the same `cfg`).
pub fn build_pool_with(cfg: &DatabaseConfig, connector: Connector) -> Result<Pool, StoreError> {
    let mut pg = connector.config();
    pg.application_name("wc");
    pg.connect_timeout(cfg.acquire_timeout);
    let manager = Manager::from_connect(
        pg,
        PoolConnect(connector),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(cfg.max_connections)
        .runtime(Runtime::Tokio1)
        .timeouts(Timeouts {
            wait: Some(cfg.acquire_timeout),
            create: Some(cfg.acquire_timeout),
            recycle: Some(cfg.acquire_timeout),
        })
        .build()
        .map_err(|e| StoreError::Config(format!("cannot build pool: {e}")))
}
