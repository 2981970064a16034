use tokio_postgres::error::SqlState;

/// Everything that can go wrong talking to the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No connection could be taken from the pool.
    #[error("database pool: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    /// The database answered with an error or the connection failed.
    #[error("database: {0}")]
    Database(#[from] tokio_postgres::Error),
    /// A dedicated connection could not be opened (TLS, IAM auth token, or the server).
    #[error(transparent)]
    Connect(#[from] crate::connect::ConnectError),
    /// Applying the embedded migrations failed.
    #[error("migration failed: {0}")]
    Migration(String),
    /// The database configuration is unusable.
    #[error("invalid database configuration: {0}")]
    Config(String),
    /// The database did not answer in time.
    #[error("database did not answer within {} ms", .0.as_millis())]
    Timeout(std::time::Duration),
    /// The connection failed while committing: the transaction may or may not have been
    /// committed, and nothing here can tell which.
    #[error("commit outcome unknown: {0}")]
    CommitUncertain(std::sync::Arc<tokio_postgres::Error>),
    /// The task writing this change together with others stopped before reporting its
    /// outcome: the change may or may not have been made.
    #[error("the writer of this change stopped before reporting its outcome")]
    WriterLost,
    /// A change decided on a row it read found, when it wrote, that the row's `version` had
    /// moved: another writer changed it in between. Nothing was written; the change is retried
    /// on a fresh read like a serialization failure.
    #[error("{table}: the row changed since it was read")]
    Stale {
        /// Table of the row.
        table: &'static str,
    },
    /// A row violated an invariant the schema should have made impossible.
    #[error("corrupt row in {table}: {detail}")]
    CorruptRow {
        /// Table the row came from.
        table: &'static str,
        /// What was wrong with it.
        detail: String,
    },
}

impl StoreError {
    /// The SQLSTATE of a database error, when there is one.
    pub fn sqlstate(&self) -> Option<&SqlState> {
        match self {
            StoreError::Database(e) => e.code(),
            _ => None,
        }
    }

    /// True for serialization failures, deadlocks and stale versions: the transaction may
    /// simply be retried.
    pub fn is_transient_conflict(&self) -> bool {
        matches!(self, StoreError::Stale { .. })
            || matches!(
                self.sqlstate(),
                Some(&SqlState::T_R_SERIALIZATION_FAILURE) | Some(&SqlState::T_R_DEADLOCK_DETECTED)
            )
    }

    /// True when the database could not serve the request for now, so a retry later may
    /// succeed: no connection could be had (pool timeout, refused or failed connection), the
    /// connection was lost while the request ran, the server is starting up, shutting down or
    /// out of connections, or the schema this server needs is missing (an unmigrated or
    /// partly migrated database: `undefined_table` and its kin). The one classification every
    /// boundary (HTTP errors, authentication, tool results) uses to answer `unavailable`.
    ///
    /// A commit whose outcome is unknown ([`StoreError::CommitUncertain`]) is not among them:
    /// retrying it blindly may apply a change twice.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Pool(_) | StoreError::Timeout(_) | StoreError::Connect(_) => true,
            StoreError::Database(e) => match e.code() {
                Some(code) => unavailable_state(code),
                // No SQLSTATE: the connection closed or its I/O failed, or a value did not
                // convert (a fault of ours).
                None => e.is_closed() || io_failure(e),
            },
            StoreError::Migration(_)
            | StoreError::Config(_)
            | StoreError::CommitUncertain(_)
            | StoreError::WriterLost
            | StoreError::Stale { .. }
            | StoreError::CorruptRow { .. } => false,
        }
    }

    /// True when the error is a unique-constraint violation.
    pub fn is_unique_violation(&self) -> bool {
        matches!(self.sqlstate(), Some(&SqlState::UNIQUE_VIOLATION))
    }
}

/// SQLSTATEs that mean "not now" rather than "not ever": connection exceptions (class 08),
/// operator intervention (a server shutting down or starting up), too many connections, and
/// the schema objects a migrated database has.
fn unavailable_state(code: &SqlState) -> bool {
    code.code().starts_with("08")
        || [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::UNDEFINED_TABLE,
            SqlState::UNDEFINED_COLUMN,
            SqlState::UNDEFINED_FUNCTION,
            SqlState::UNDEFINED_OBJECT,
            SqlState::INVALID_SCHEMA_NAME,
        ]
        .contains(code)
}

/// Whether an I/O error lies under `error` (the socket to the server failed).
fn io_failure(error: &tokio_postgres::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(e) = cause {
        if e.is::<std::io::Error>() {
            return true;
        }
        cause = e.source();
    }
    false
}

impl From<crate::config::ConfigError> for StoreError {
    fn from(e: crate::config::ConfigError) -> StoreError {
        StoreError::Config(e.0)
    }
}
