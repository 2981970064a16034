//! Database health as the HTTP health check reports it.

use std::time::Duration;

use deadpool_postgres::Pool;

use crate::{StoreError, migrate};

/// What the database looks like from here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseHealth {
    /// Highest applied migration, `None` if never migrated.
    pub schema_level: Option<i32>,
    /// The level this build expects.
    pub expected_level: i32,
}

/// Checks the database answers within `timeout` and reads its schema level.
pub async fn check(pool: &Pool, timeout: Duration) -> Result<DatabaseHealth, StoreError> {
    let probe = async {
        let client = pool.get().await?;
        let schema_level = migrate::current_level(&client).await?;
        Ok::<_, StoreError>(DatabaseHealth {
            schema_level,
            expected_level: migrate::expected_level(),
        })
    };
    match tokio::time::timeout(timeout, probe).await {
        Ok(result) => result,
        Err(_) => Err(StoreError::Timeout(timeout)),
    }
}
