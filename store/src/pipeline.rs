//! Transactions that cost two round trips, or one: `BEGIN` travels with the first statement
//! and `COMMIT` with the last writes, or the whole transaction goes at once.
//!
//! A change that locks a busy row (a session's board) holds the lock from the statement that
//! takes it until the commit. Sent one request at a time, that is the lock statement's reply,
//! each write's round trip, and the `COMMIT`'s; pipelined, it is one reply, the writes and the
//! commit executed back to back by the server, and the WAL flush. A private strategy of the
//! store: every read–decide–write change begins with its lock ([`crate::change::locked`]), and
//! a batch of posts is sent whole ([`crate::board::post`]).
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
pub(crate) struct PipelinedTx {
    client: Option<Object>,
    open: AtomicBool,
}

impl PipelinedTx {
    /// A transaction on `client`; nothing is sent until [`PipelinedTx::begin_with`].
    pub(crate) fn new(client: Object) -> Self {
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
    pub(crate) async fn begin_with<T, F>(&self, first: F) -> Result<T, StoreError>
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
    async fn commit_with<T, F>(&self, last: F) -> Result<T, StoreError>
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
    pub(crate) async fn once_after<S, T, FS, F>(
        &self,
        first: FS,
        only: F,
    ) -> Result<(S, T), StoreError>
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
    pub(crate) async fn commit(&self) -> Result<(), StoreError> {
        self.commit_with(async { Ok(()) }).await
    }

    /// Whether the transaction has begun and not yet ended.
    fn is_open(&self) -> bool {
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

/// Against a real Postgres: `BEGIN` with the first statement, `COMMIT` with the last writes,
/// all or nothing, and never a connection back in the pool inside a transaction.
#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::testing::TestDatabase;

    async fn scratch(db: &TestDatabase) {
        let client = db.pool().get().await.unwrap();
        client
            .batch_execute(
                "CREATE TABLE scratch (id int PRIMARY KEY, v text NOT NULL); \
                 INSERT INTO scratch VALUES (0, 'row to lock')",
            )
            .await
            .unwrap();
    }

    async fn values(db: &TestDatabase) -> Vec<(i32, String)> {
        let client = db.pool().get().await.unwrap();
        client
            .query("SELECT id, v FROM scratch ORDER BY id", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    }

    /// Connections of this database that sit inside a transaction with nothing running.
    async fn idle_in_transaction(db: &TestDatabase) -> i64 {
        let client = db.pool().get().await.unwrap();
        client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND state LIKE 'idle in transaction%'",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    }

    /// A begun transaction on a fresh scratch table, with its insert statement prepared.
    async fn begun(db: &TestDatabase) -> (PipelinedTx, tokio_postgres::Statement) {
        scratch(db).await;
        let tx = PipelinedTx::new(db.pool().get().await.unwrap());
        let insert = tx
            .prepare_cached("INSERT INTO scratch VALUES ($1, $2)")
            .await
            .unwrap();
        tx.begin_with(async { Ok(()) }).await.unwrap();
        (tx, insert)
    }

    /// A transaction on a fresh scratch table that began by locking row 0, in one round trip.
    async fn locked(db: &TestDatabase) -> PipelinedTx {
        scratch(db).await;
        let tx = PipelinedTx::new(db.pool().get().await.unwrap());
        let lock = tx
            .prepare_cached("SELECT v FROM scratch WHERE id = $1 FOR UPDATE")
            .await
            .unwrap();
        let v: String = tx
            .begin_with(async { Ok(tx.query_one(&lock, &[&0]).await?.get(0)) })
            .await
            .unwrap();
        assert_eq!(v, "row to lock");
        assert!(tx.is_open());
        tx
    }

    /// Nothing was written and no connection was left inside a transaction.
    async fn assert_untouched(db: &TestDatabase) {
        assert_eq!(values(db).await, vec![(0, "row to lock".into())]);
        assert_eq!(idle_in_transaction(db).await, 0);
    }

    #[tokio::test]
    async fn writes_sent_with_the_commit_land_together() {
        let db = TestDatabase::new().await;
        let tx = locked(&db).await;
        let insert = tx
            .prepare_cached("INSERT INTO scratch VALUES ($1, $2)")
            .await
            .unwrap();
        let (a, b) = tx
            .commit_with(async {
                let (a, b) = tokio::try_join!(
                    tx.execute(&insert, &[&1, &"one"]),
                    tx.execute(&insert, &[&2, &"two"]),
                )?;
                Ok((a, b))
            })
            .await
            .unwrap();
        assert_eq!((a, b), (1, 1));
        assert!(!tx.is_open());
        drop(tx);
        assert_eq!(
            values(&db).await,
            vec![
                (0, "row to lock".into()),
                (1, "one".into()),
                (2, "two".into())
            ]
        );
        assert_eq!(idle_in_transaction(&db).await, 0);
    }

    #[tokio::test]
    async fn a_write_the_server_refuses_rolls_back_the_writes_sent_before_it() {
        let db = TestDatabase::new().await;
        let (tx, insert) = begun(&db).await;
        // The second insert violates the primary key after the first one ran: the server aborts
        // the transaction and answers the COMMIT sent behind them with a rollback.
        let err = tx
            .commit_with(async {
                tokio::try_join!(
                    tx.execute(&insert, &[&7, &"sent first"]),
                    tx.execute(&insert, &[&0, &"duplicate key"]),
                )?;
                Ok(())
            })
            .await
            .unwrap_err();
        assert!(err.is_unique_violation(), "{err:?}");
        assert!(tx.is_open(), "the transaction did not end in a commit");
        drop(tx);
        assert_untouched(&db).await;
    }

    #[tokio::test]
    async fn a_write_that_fails_before_it_is_sent_keeps_the_commit_from_being_sent() {
        let db = TestDatabase::new().await;
        let (tx, insert) = begun(&db).await;
        let err = tx
            .commit_with(async {
                tokio::try_join!(
                    async { Ok::<_, StoreError>(tx.execute(&insert, &[&8, &"sent first"]).await?) },
                    async {
                        Err::<u64, _>(StoreError::CorruptRow {
                            table: "scratch",
                            detail: "refused before sending".into(),
                        })
                    },
                )?;
                Ok(())
            })
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::CorruptRow { .. }), "{err:?}");
        drop(tx);
        assert_untouched(&db).await;
    }

    #[tokio::test]
    async fn a_transaction_dropped_while_holding_a_lock_releases_it_and_its_connection() {
        let db = TestDatabase::new().await;
        {
            let tx = locked(&db).await;
            tx.execute("UPDATE scratch SET v = 'never committed' WHERE id = 0", &[])
                .await
                .unwrap();
            // Cancelled here: the caller's future is dropped with the transaction open.
        }
        // Another writer gets the row at once and sees the original value.
        let other = db.new_pool();
        let client = other.get().await.unwrap();
        client
            .batch_execute("SET lock_timeout = '5s'")
            .await
            .unwrap();
        let v: String = tokio::time::timeout(
            Duration::from_secs(10),
            client.query_one("SELECT v FROM scratch WHERE id = 0 FOR UPDATE", &[]),
        )
        .await
        .expect("the lock was released")
        .unwrap()
        .get(0);
        assert_eq!(v, "row to lock");
        // Every pooled connection is usable outside a transaction.
        for _ in 0..4 {
            let c = db.pool().get().await.unwrap();
            c.batch_execute("BEGIN; COMMIT").await.unwrap();
        }
        assert_eq!(idle_in_transaction(&db).await, 0);
    }

    #[tokio::test]
    async fn a_whole_transaction_in_one_round_trip_commits_or_rolls_back_and_stays_usable() {
        let db = TestDatabase::new().await;
        scratch(&db).await;
        let tx = PipelinedTx::new(db.pool().get().await.unwrap());
        let insert = tx
            .prepare_cached("INSERT INTO scratch VALUES ($1, $2)")
            .await
            .unwrap();
        let ((), n) = tx
            .once_after(
                async {
                    Ok(tx
                        .batch_execute("SET LOCAL synchronous_commit TO OFF")
                        .await?)
                },
                async { Ok(tx.execute(&insert, &[&3, &"three"]).await?) },
            )
            .await
            .unwrap();
        assert_eq!(n, 1);
        assert!(!tx.is_open());
        // Refused: the COMMIT behind it rolls back, the statement's own error is returned, and
        // the connection is outside any transaction and usable for the next one.
        let err = tx
            .once_after(async { Ok(()) }, async {
                Ok(tx.execute(&insert, &[&3, &"again"]).await?)
            })
            .await
            .unwrap_err();
        assert!(err.is_unique_violation(), "{err:?}");
        assert!(!tx.is_open());
        tx.once_after(async { Ok(()) }, async {
            Ok(tx.execute(&insert, &[&4, &"four"]).await?)
        })
        .await
        .unwrap();
        drop(tx);
        assert_eq!(
            values(&db).await,
            vec![
                (0, "row to lock".into()),
                (3, "three".into()),
                (4, "four".into())
            ]
        );
        assert_eq!(idle_in_transaction(&db).await, 0);
    }

    #[tokio::test]
    async fn the_statement_after_the_lock_sees_what_the_previous_holder_committed() {
        let db = TestDatabase::new().await;
        // The holder changes row 0 and keeps it locked for a while.
        let holder = locked(&db).await;
        holder
            .execute("UPDATE scratch SET v = 'by the holder' WHERE id = 0", &[])
            .await
            .unwrap();
        let waiter = PipelinedTx::new(db.new_pool().get().await.unwrap());
        let (lock, read) = tokio::try_join!(
            waiter.prepare_cached("SELECT v FROM scratch WHERE id = 0 FOR UPDATE"),
            // A plain read, no lock of its own: it shows the row as of its snapshot.
            waiter.prepare_cached("SELECT v FROM scratch WHERE id = 0"),
        )
        .unwrap();
        let waiting = tokio::spawn(async move {
            let (locked, read) = waiter
                .once_after(
                    async { Ok(waiter.query_one(&lock, &[]).await?.get::<_, String>(0)) },
                    async { Ok(waiter.query_one(&read, &[]).await?.get::<_, String>(0)) },
                )
                .await
                .unwrap();
            assert!(!waiter.is_open());
            (locked, read)
        });
        // The server shows the waiter blocked on the holder's row lock: from then on, finishing
        // early would mean the lock did not wait.
        await_lock_wait(&db).await;
        assert!(
            !waiting.is_finished(),
            "the lock did not wait for the holder"
        );
        holder.commit().await.unwrap();
        let (locked, read) = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the waiter got the lock")
            .unwrap();
        assert_eq!(locked, "by the holder");
        // Taken after the lock was granted, the second statement's snapshot includes the commit
        // the lock waited for.
        assert_eq!(read, "by the holder");
        assert_eq!(idle_in_transaction(&db).await, 0);
    }

    /// Waits until some session of the test database waits on a lock (as `pg_stat_activity`
    /// shows it). Fails only on a hang.
    async fn await_lock_wait(db: &TestDatabase) {
        let client = db.pool().get().await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let waiting: i64 = client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE datname = current_database() AND wait_event_type = 'Lock'",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            if waiting > 0 {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "nobody ever waited on the lock"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
