//! Schema migrations, embedded from `migrations/` at build time.
//!
//! Migrations run as a one-off (`wc-admin migrate`, or at `wc-local` start), never on a request
//! path. Concurrent migrators serialize on a session advisory lock held by a dedicated connection
//! that is closed afterwards, so two racing runs both succeed and each migration applies once.

use crate::StoreError;
use crate::config::DatabaseConfig;
use crate::connect::Connector;

mod embedded {
    refinery::embed_migrations!("../migrations");
}

/// Advisory lock key shared by every migrator ("wc-migr" in ASCII).
const MIGRATION_LOCK_KEY: i64 = 0x0077_632d_6d69_6772;

/// What a migration run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// Migrations applied by this run, as `V<version>__<name>`.
    pub applied: Vec<String>,
    /// Schema level after the run.
    pub level: i32,
}

/// The schema level the embedded migrations bring a database to.
pub fn expected_level() -> i32 {
    embedded::migrations::runner()
        .get_migrations()
        .iter()
        .map(|m| m.version())
        .max()
        .unwrap_or(0)
}

/// A stable digest of the embedded migrations (names, versions and checksums).
pub fn fingerprint() -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for m in embedded::migrations::runner().get_migrations() {
        h.update(format!("{}:{}:{};", m.version(), m.name(), m.checksum()).as_bytes());
    }
    hex::encode(h.finalize())
}

/// Applies every pending migration to the database of `db`.
pub async fn migrate(db: &DatabaseConfig) -> Result<MigrationReport, StoreError> {
    migrate_up_to(db, None).await
}

/// Applies the pending migrations up to schema level `level` (every one with `None`), as
/// [`migrate`] does: how an upgrade is tested from an older schema holding data.
pub async fn migrate_up_to(
    db: &DatabaseConfig,
    level: Option<i32>,
) -> Result<MigrationReport, StoreError> {
    let connector = Connector::new(db)?;
    let mut pg = connector.config();
    pg.application_name("wc-migrate");
    let (mut client, connection) = connector.connect(&pg).await?;
    let conn = tokio::spawn(connection);
    let result = migrate_locked(&mut client, level).await;
    drop(client);
    let _ = conn.await;
    result
}

async fn migrate_locked(
    client: &mut tokio_postgres::Client,
    level: Option<i32>,
) -> Result<MigrationReport, StoreError> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK_KEY])
        .await?;
    let report = embedded::migrations::runner()
        .set_abort_divergent(true)
        .set_abort_missing(true)
        .set_target(level.map_or(refinery::Target::Latest, refinery::Target::Version))
        .run_async(client)
        .await;
    // The lock dies with the connection anyway; unlocking keeps the next migrator prompt.
    client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK_KEY])
        .await?;
    let report = report.map_err(|e| StoreError::Migration(e.to_string()))?;
    let level = current_level(client).await?.unwrap_or(0);
    Ok(MigrationReport {
        applied: report
            .applied_migrations()
            .iter()
            .map(|m| format!("V{}__{}", m.version(), m.name()))
            .collect(),
        level,
    })
}

/// The highest applied migration, or `None` on a database that was never migrated.
pub async fn current_level(client: &tokio_postgres::Client) -> Result<Option<i32>, StoreError> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass('refinery_schema_history') IS NOT NULL",
            &[],
        )
        .await?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let row = client
        .query_one("SELECT max(version) FROM refinery_schema_history", &[])
        .await?;
    Ok(row.get::<_, Option<i32>>(0))
}
