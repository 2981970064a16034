//! The connection pool. Built once per process; connections open lazily on first use.

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime, Timeouts};
use tokio_postgres::NoTls;

use crate::StoreError;
use crate::config::DatabaseConfig;

/// Builds the pool. Nothing connects until the first request needs a connection.
pub fn build_pool(cfg: &DatabaseConfig) -> Result<Pool, StoreError> {
    let mut pg = cfg.url.pg_config();
    pg.application_name("wc");
    pg.connect_timeout(cfg.acquire_timeout);
    let manager = Manager::from_config(
        pg,
        NoTls,
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
