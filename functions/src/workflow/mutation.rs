//! The tools' way to change a session: [`wc_store::sessions::mutate`] with a decision that may
//! refuse with a typed [`ToolError`], and the store's outcomes mapped to tool errors once.

use wc_domain::SessionId;
use wc_store::ChangeOutcome;
use wc_store::sessions::{self, Appended, Decision, Mutated, NewEvent, SessionRow};

use crate::result::{ErrorKind, ToolError};

/// `session_closed` for a session that is no longer active.
pub fn closed(row: &SessionRow) -> ToolError {
    ToolError::new(
        ErrorKind::SessionClosed,
        format!("the session is {}", row.lifecycle),
    )
    .with("lifecycle", row.lifecycle.as_str())
}

/// Runs `decide` on the locked session row and writes what it decides; returns its value and
/// the row as written (or as found, when nothing was written).
pub async fn mutate<T, F>(
    pool: &wc_store::Pool,
    id: &SessionId,
    decide: F,
) -> Result<(T, SessionRow), ToolError>
where
    T: Send + 'static,
    F: Fn(&SessionRow) -> Decision<Result<T, ToolError>> + Send + Sync + 'static,
{
    match sessions::mutate(pool, id, decide).await? {
        ChangeOutcome::Applied {
            value: Mutated::Done(Ok(value), row),
            ..
        } => Ok((value, row)),
        ChangeOutcome::Applied {
            value: Mutated::Done(Err(e), _),
            ..
        } => Err(e),
        ChangeOutcome::Applied {
            value: Mutated::NotFound,
            ..
        } => Err(ToolError::new(
            ErrorKind::UnknownSessionId,
            "the session no longer exists",
        )),
        ChangeOutcome::Conflict { .. } => Err(ToolError::new(
            ErrorKind::Conflict,
            "the session is busy; retry",
        )),
    }
}

/// Appends `events` to session `id` in one statement ([`sessions::append`]); with
/// `require_active`, a session that is no longer active refuses with `session_closed`.
pub async fn append(
    pool: &wc_store::Pool,
    id: &SessionId,
    events: &[NewEvent],
    require_active: bool,
) -> Result<SessionRow, ToolError> {
    let client = pool.get().await.map_err(wc_store::StoreError::from)?;
    match sessions::append(&client, id, events, require_active).await? {
        Appended::Done(row) => Ok(row),
        Appended::Inactive(row) => Err(closed(&row)),
        Appended::NotFound => Err(ToolError::new(
            ErrorKind::UnknownSessionId,
            "the session no longer exists",
        )),
    }
}
