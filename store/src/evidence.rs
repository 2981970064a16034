//! Reads across aggregates: a Workflow Session, its ledger, its message board and its open
//! work as of one moment. The one place that reads `sessions` with `board` and `work`, so
//! `sessions` never depends on either.

use deadpool_postgres::Pool;
use wc_domain::SessionId;

use crate::StoreError;
use crate::board::{self, BoardCounts};
use crate::sessions::{self, EventRow, RETAINED_EVENTS, SessionRow};
use crate::work::{self, OpenWork};

/// A session, its retained events (ascending by seq), its board's counts and its open work,
/// as of one moment.
pub type Snapshot = (SessionRow, Vec<EventRow>, BoardCounts, OpenWork);

/// One consistent snapshot of a session, all its retained events, its message board's
/// counts and its open work, read in a single read-only repeatable-read transaction.
pub async fn snapshot(pool: &Pool, id: &SessionId) -> Result<Option<Snapshot>, StoreError> {
    let mut client = pool.get().await?;
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let Some(row) = sessions::get(&tx, id).await? else {
        return Ok(None);
    };
    let mut events = sessions::recent_events(&tx, id, RETAINED_EVENTS).await?;
    events.reverse();
    let counts = board::counts(&tx, id).await?;
    let work = work::open_in_session(&tx, id).await?;
    tx.commit().await?;
    Ok(Some((row, events, counts, work)))
}
