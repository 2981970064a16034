//! Reads across aggregates: a Workflow Session, its ledger and its message board as of one
//! moment. The one place that reads both `sessions` and `board`, so `sessions` never depends
//! on `board`.

use deadpool_postgres::Pool;
use wc_domain::SessionId;

use crate::StoreError;
use crate::board::{self, BoardCounts};
use crate::sessions::{self, EventRow, RETAINED_EVENTS, SessionRow};

/// A session, its retained events (ascending by seq) and its board's counts, as of one moment.
pub type Snapshot = (SessionRow, Vec<EventRow>, BoardCounts);

/// One consistent snapshot of a session, all its retained events and its message board's
/// counts, read in a single read-only repeatable-read transaction.
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
    tx.commit().await?;
    Ok(Some((row, events, counts)))
}
