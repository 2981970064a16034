//! Transactions that cost two round trips, or one: `BEGIN` travels with the first statement
//! and `COMMIT` with the last writes, or the whole transaction goes at once.
//!
//! A change that locks a busy row (a session's board) holds the lock from the statement that
//! takes it until the commit. Sent one request at a time, that is the lock statement's reply,
//! each write's round trip, and the `COMMIT`'s; pipelined, it is one reply, the writes and the
//! commit executed back to back by the server, and the WAL flush.
//!
//! tokio-postgres sends a request when its future is first polled and executes requests in
//! that order. [`PipelinedTx::begin_with`] polls `BEGIN` first, so whatever `first` sends
//! runs inside the transaction. [`PipelinedTx::commit_with`] polls the writes before `COMMIT`,
//! so it needs writes that send their request on their first poll: executions of statements
//! already prepared, never a `&str` query (whose execution would be sent only after its
//! prepare round trip, behind the `COMMIT`). A write that fails before sending fails the join
//! before `COMMIT` is polled; one the server refuses aborts the transaction, and the server
//! answers the `COMMIT` with a rollback. Writes joined together should be joined `biased`
//! (polled in their order every time), so that the error reported is the first write's to
//! fail, not a later one's "current transaction is aborted".
//!
//! The transaction owns its pooled connection. Dropped while open (the caller's future was
//! cancelled, or a write failed), it detaches the connection from the pool and closes it, and
//! the server rolls the transaction back: a connection inside a transaction never returns to
//! the pool.

use std::future::Future;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};

use deadpool_postgres::Object;

use crate::StoreError;

/// A transaction on an owned pooled connection; see the module documentation.
pub struct PipelinedTx {
    client: Option<Object>,
    open: AtomicBool,
}

impl PipelinedTx {
    /// A transaction on `client`; nothing is sent until [`PipelinedTx::begin_with`].
    pub fn new(client: Object) -> Self {
        Self {
            client: Some(client),
            open: AtomicBool::new(false),
        }
    }

    fn client(&self) -> &Object {
        self.client
            .as_ref()
            .expect("the connection lives as long as the transaction")
    }

    /// Sends `BEGIN` and then `first` (which uses this transaction's connection) in one round
    /// trip, and returns what `first` returned.
    pub async fn begin_with<T, F>(&self, first: F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>>,
    {
        self.open.store(true, Ordering::SeqCst);
        let (begin, out) = tokio::join!(biased; self.client().batch_execute("BEGIN"), first);
        begin?;
        out
    }

    /// Sends the writes of `last` and then `COMMIT` in one round trip. `last` must send every
    /// request on its first poll (executions of prepared statements only).
    ///
    /// A connection that breaks once `COMMIT` may have been sent leaves the outcome unknown:
    /// [`StoreError::CommitUncertain`].
    pub async fn commit_with<T, F>(&self, last: F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>>,
    {
        // `COMMIT` is sent on the join's first poll unless a write failed before sending.
        // From then on a connection failure (an error without SQLSTATE), whichever request
        // reports it, leaves the outcome unknown.
        let sent = AtomicBool::new(false);
        let uncertain = |e: StoreError| match e {
            StoreError::Database(e) if e.code().is_none() && sent.load(Ordering::SeqCst) => {
                StoreError::CommitUncertain(std::sync::Arc::new(e))
            }
            other => other,
        };
        let commit = async {
            sent.store(true, Ordering::SeqCst);
            self.client()
                .batch_execute("COMMIT")
                .await
                .map_err(StoreError::from)
        };
        // Biased: polled in this order every time, so an error of the writes (whose replies
        // come first) is the one reported, never the rollback it caused.
        let (out, ()) = tokio::try_join!(biased; last, commit).map_err(uncertain)?;
        self.open.store(false, Ordering::SeqCst);
        Ok(out)
    }

    /// Runs `first` and then `only` as a whole transaction in one round trip: `BEGIN`,
    /// `first`, `only`, `COMMIT`, all sent before the first reply comes back. Both must send
    /// their request on their first poll (executions of prepared statements, or parameterless
    /// `batch_execute`s). `only` runs on a snapshot taken after `first` finished, so `first`
    /// can take the row locks that `only`'s reads rely on. If the server refuses either, the
    /// `COMMIT` becomes a rollback and the first error is returned. A connection that breaks
    /// leaves the outcome unknown: [`StoreError::CommitUncertain`].
    pub async fn once_after<S, T, FS, F>(&self, first: FS, only: F) -> Result<(S, T), StoreError>
    where
        FS: Future<Output = Result<S, StoreError>>,
        F: Future<Output = Result<T, StoreError>>,
    {
        self.open.store(true, Ordering::SeqCst);
        let (begin, first, out, commit) = tokio::join!(
            biased;
            self.client().batch_execute("BEGIN"),
            first,
            only,
            self.client().batch_execute("COMMIT"),
        );
        // `COMMIT` was sent with the rest: from here a connection failure (an error without
        // SQLSTATE), whichever request reports it, leaves the outcome unknown.
        let uncertain = |e: StoreError| match e {
            StoreError::Database(e) if e.code().is_none() => {
                StoreError::CommitUncertain(std::sync::Arc::new(e))
            }
            other => other,
        };
        // A COMMIT that was answered ended the transaction, committed or rolled back; one
        // that was not leaves it open, and the connection is closed on drop.
        commit.map_err(|e| uncertain(e.into()))?;
        self.open.store(false, Ordering::SeqCst);
        begin.map_err(|e| uncertain(e.into()))?;
        let first = first.map_err(uncertain)?;
        let out = out.map_err(uncertain)?;
        Ok((first, out))
    }

    /// Commits (one round trip).
    pub async fn commit(&self) -> Result<(), StoreError> {
        self.commit_with(async { Ok(()) }).await
    }

    /// Rolls back (one round trip).
    pub async fn rollback(&self) -> Result<(), StoreError> {
        self.client().batch_execute("ROLLBACK").await?;
        self.open.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// Whether the transaction has begun and not yet ended.
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }
}

impl Deref for PipelinedTx {
    type Target = Object;

    fn deref(&self) -> &Object {
        self.client()
    }
}

impl Drop for PipelinedTx {
    fn drop(&mut self) {
        if self.is_open()
            && let Some(client) = self.client.take()
        {
            // Closing the connection ends the transaction on the server (a rollback) and
            // keeps the connection, still inside it, out of the pool.
            drop(Object::take(client));
        }
    }
}
