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

    /// True for serialization failures and deadlocks: the transaction may simply be retried.
    pub fn is_transient_conflict(&self) -> bool {
        matches!(
            self.sqlstate(),
            Some(&SqlState::T_R_SERIALIZATION_FAILURE) | Some(&SqlState::T_R_DEADLOCK_DETECTED)
        )
    }

    /// True when the error is a unique-constraint violation.
    pub fn is_unique_violation(&self) -> bool {
        matches!(self.sqlstate(), Some(&SqlState::UNIQUE_VIOLATION))
    }
}
