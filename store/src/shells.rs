//! Persistent shells of Workflow Sessions: which shell a session has open, on which runner
//! instance, in which state, and which work it serves.
//!
//! A shell is part of its session's aggregate: every change a caller asks for (open, a
//! command, close) is a [`sessions::change`] — the session row locked, the shell row checked
//! and written, and the work for the runner queued, in one transaction, so two function
//! instances asking at once take turns and the second sees the first's `busy`. What the runner
//! reports lands in the transaction that ends the work (`work`'s `shell_end`, on every terminal
//! path), after the session's evidence, so locks are always taken session first.
//! Instance replacement and upkeep end shells with one guarded statement each.

use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;
use wc_domain::{Lifecycle, ProjectId, SessionId, ShellId, ShellState};

use crate::change::{self, ChangeOutcome, RETRY};
use crate::work::{self, Enqueued, NewWork, OpenLimits, WorkRow};
use crate::{GenericClient, Pool, StoreError, sessions};

/// A persistent shell as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellRow {
    /// Id.
    pub id: ShellId,
    /// Its session.
    pub session_id: SessionId,
    /// Its project.
    pub project_id: ProjectId,
    /// The runner.
    pub client_id: String,
    /// The runner instance that owns the process.
    pub instance_id: Uuid,
    /// Fingerprint of the opener's authority group.
    pub owner_authority_fingerprint: String,
    /// `sh` or `bash`.
    pub dialect: String,
    /// The directory it was opened in, relative to the project root (`""` is the root).
    pub cwd: String,
    /// Its state.
    pub state: ShellState,
    /// The work it serves while opening or busy.
    pub busy_work_id: Option<Uuid>,
    /// Why it ended.
    pub end_reason: Option<String>,
    /// Opened at.
    pub created_at: DateTime<Utc>,
    /// Last opened, used or checked at.
    pub last_used_at: DateTime<Utc>,
    /// Ended at.
    pub ended_at: Option<DateTime<Utc>>,
}

const COLUMNS: &str = "id, session_id, project_id, client_id, instance_id, \
     owner_authority_fingerprint, dialect, cwd, state, busy_work_id, end_reason, created_at, \
     last_used_at, ended_at";

fn from_row(r: &Row) -> ShellRow {
    ShellRow {
        id: r.get("id"),
        session_id: r.get("session_id"),
        project_id: r.get("project_id"),
        client_id: r.get("client_id"),
        instance_id: r.get("instance_id"),
        owner_authority_fingerprint: r.get("owner_authority_fingerprint"),
        dialect: r.get("dialect"),
        cwd: r.get("cwd"),
        state: r.get("state"),
        busy_work_id: r.get("busy_work_id"),
        end_reason: r.get("end_reason"),
        created_at: r.get("created_at"),
        last_used_at: r.get("last_used_at"),
        ended_at: r.get("ended_at"),
    }
}

/// The shell `id`, if it exists.
pub async fn get(
    client: &impl GenericClient,
    id: &ShellId,
) -> Result<Option<ShellRow>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM persistent_shells WHERE id = $1::text"
        ))
        .await?;
    Ok(client
        .query_opt(&stmt, &[&id.as_str()])
        .await?
        .as_ref()
        .map(from_row))
}

/// A shell to open: its row, written `opening` and serving `work` (its open).
#[derive(Debug, Clone)]
pub struct NewShell {
    /// Fresh id.
    pub id: ShellId,
    /// The instance asked to open it.
    pub instance_id: Uuid,
    /// `sh` or `bash`.
    pub dialect: String,
    /// The directory asked for, relative to the root (`""` is the root).
    pub cwd: String,
}

/// What a caller asks of a shell, decided under its session's lock.
#[derive(Debug, Clone)]
pub enum ShellStep {
    /// Open a new one (the session must have no open shell).
    Open(NewShell),
    /// Run a command: `ready → busy`, serving the work.
    Exec(ShellId),
    /// Ask its runner how it is (no change of state).
    Status(ShellId),
    /// End it: terminal `closed` at once, the runner told to release it.
    Close(ShellId),
}

impl ShellStep {
    /// The shell it is about.
    pub fn shell_id(&self) -> &ShellId {
        match self {
            ShellStep::Open(new) => &new.id,
            ShellStep::Exec(id) | ShellStep::Status(id) | ShellStep::Close(id) => id,
        }
    }
}

/// What [`submit`] did.
#[derive(Debug, Clone)]
pub enum Submitted {
    /// The shell row is written and the work queued (the shell as it is now).
    Queued(Box<ShellRow>, Box<WorkRow>),
    /// Nothing to ask the runner: the shell is terminal (for a close, already ended).
    Ended(Box<ShellRow>),
    /// The shell is running another command (or still opening); nothing was written.
    Busy(Box<ShellRow>),
    /// The session already has an open shell; nothing was written.
    AlreadyOpen(Box<ShellRow>),
    /// No such shell in this session; nothing was written.
    UnknownShell,
    /// The session no longer exists; nothing was written.
    SessionNotFound,
    /// The session is not active; nothing was written.
    SessionInactive(Lifecycle),
    /// An open-work limit was reached; nothing was written.
    OverLimit(work::OverLimit),
    /// The owner already has this many open shells (at or over its limit); nothing was
    /// written.
    TooManyShells(i64),
}

/// Decides `step` for a shell of `session_id` under the session's lock and, when the runner
/// has something to do, queues `work` (its item names the shell) in the same transaction. The
/// shell must belong to that session and to the work's owner.
pub async fn submit(
    pool: &Pool,
    session_id: &SessionId,
    step: &ShellStep,
    work: &NewWork,
    limits: OpenLimits,
) -> Result<ChangeOutcome<Submitted>, StoreError> {
    let ran = sessions::change(pool, session_id, |tx, session| {
        let (step, work) = (step.clone(), work.clone());
        Box::pin(async move {
            let Some(session) = session else {
                return Ok(Submitted::SessionNotFound);
            };
            if !session.is_active() && !matches!(step, ShellStep::Close(_)) {
                return Ok(Submitted::SessionInactive(session.lifecycle));
            }
            let current = get(&**tx, step.shell_id()).await?.filter(|s| {
                s.session_id == session.id
                    && s.owner_authority_fingerprint == work.owner_authority_fingerprint
            });
            match (&step, current) {
                (ShellStep::Open(_), Some(_)) => return Ok(Submitted::UnknownShell),
                (ShellStep::Open(_), None) => {
                    if let Some(open) = open_in(&**tx, &session.id).await? {
                        return Ok(Submitted::AlreadyOpen(Box::new(open)));
                    }
                    let open = open_of_owner(&**tx, &work.owner_authority_fingerprint).await?;
                    if open >= limits.shells_per_owner {
                        return Ok(Submitted::TooManyShells(open));
                    }
                }
                (_, None) => return Ok(Submitted::UnknownShell),
                (_, Some(shell)) if shell.state.is_terminal() => {
                    return Ok(Submitted::Ended(Box::new(shell)));
                }
                (ShellStep::Exec(_), Some(shell)) if shell.state != ShellState::Ready => {
                    return Ok(Submitted::Busy(Box::new(shell)));
                }
                _ => {}
            }
            let queued = match work::insert(&**tx, &work, limits).await? {
                Ok(row) => row,
                Err(over) => return Ok(Submitted::OverLimit(over)),
            };
            let shell = write_step(&**tx, &step, &work, &session.id).await?;
            Ok(Submitted::Queued(Box::new(shell), Box::new(queued)))
        })
    })
    .await;
    ChangeOutcome::of(ran, &RETRY)
}

/// How many open shells `owner` has over all its sessions.
async fn open_of_owner(client: &impl GenericClient, owner: &str) -> Result<i64, StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT count(*) FROM persistent_shells WHERE owner_authority_fingerprint = $1::text \
             AND state IN ('opening', 'ready', 'busy')",
        )
        .await?;
    Ok(client.query_one(&stmt, &[&owner]).await?.get(0))
}

/// The session's open shell, if any.
async fn open_in(
    client: &impl GenericClient,
    session: &SessionId,
) -> Result<Option<ShellRow>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM persistent_shells WHERE session_id = $1::text \
             AND state IN ('opening', 'ready', 'busy')"
        ))
        .await?;
    Ok(client
        .query_opt(&stmt, &[&session.as_str()])
        .await?
        .as_ref()
        .map(from_row))
}

/// Writes what `step` does to the shell row (the checks were made; each write is guarded by
/// the state they checked, so it never lands on a shell that moved since).
async fn write_step(
    client: &impl GenericClient,
    step: &ShellStep,
    work: &NewWork,
    session: &SessionId,
) -> Result<ShellRow, StoreError> {
    let row = match step {
        ShellStep::Open(new) => {
            let stmt = client
                .prepare_cached(&format!(
                    "INSERT INTO persistent_shells (id, session_id, project_id, client_id, \
                         instance_id, owner_authority_fingerprint, dialect, cwd, state, busy_work_id) \
                     VALUES ($1::text, $2::text, $3::text, $4, $5, $6::text, $7, $8, 'opening', $9) \
                     RETURNING {COLUMNS}"
                ))
                .await?;
            client
                .query_one(
                    &stmt,
                    &[
                        &new.id.as_str(),
                        &session.as_str(),
                        &work.project_id.as_str(),
                        &work.client_id,
                        &new.instance_id,
                        &work.owner_authority_fingerprint,
                        &new.dialect,
                        &new.cwd,
                        &work.id,
                    ],
                )
                .await?
        }
        ShellStep::Exec(id) => {
            let stmt = client
                .prepare_cached(&format!(
                    "UPDATE persistent_shells SET state = 'busy', busy_work_id = $2, \
                         last_used_at = now(), version = version + 1 \
                     WHERE id = $1::text AND state = 'ready' RETURNING {COLUMNS}"
                ))
                .await?;
            let written = client.query_opt(&stmt, &[&id.as_str(), &work.id]).await?;
            change::guarded(written, "persistent_shells")?
        }
        ShellStep::Status(id) => {
            let stmt = client
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM persistent_shells WHERE id = $1::text"
                ))
                .await?;
            client.query_one(&stmt, &[&id.as_str()]).await?
        }
        ShellStep::Close(id) => {
            let stmt = client
                .prepare_cached(&format!(
                    "UPDATE persistent_shells SET state = 'closed', end_reason = 'closed', \
                         busy_work_id = NULL, ended_at = now(), version = version + 1 \
                     WHERE id = $1::text AND state IN ('opening', 'ready', 'busy') RETURNING {COLUMNS}"
                ))
                .await?;
            let written = client.query_opt(&stmt, &[&id.as_str()]).await?;
            change::guarded(written, "persistent_shells")?
        }
    };
    Ok(from_row(&row))
}

/// Makes the open shells of `client_id`'s instances other than `current` `lost`
/// (`instance_replaced`): their processes belonged to a runner process that is gone. Returns
/// how many.
pub(crate) async fn lose_replaced(
    tx: &impl GenericClient,
    client_id: &str,
    current: Uuid,
) -> Result<u64, StoreError> {
    let stmt = tx
        .prepare_cached(
            "UPDATE persistent_shells SET state = 'lost', end_reason = 'instance_replaced', \
                 busy_work_id = NULL, ended_at = now(), version = version + 1 \
             WHERE client_id = $1 AND instance_id <> $2 AND state IN ('opening', 'ready', 'busy')",
        )
        .await?;
    Ok(tx.execute(&stmt, &[&client_id, &current]).await?)
}

/// Ends, in one statement, at most `limit` open shells that can no longer be used: those
/// whose runner has not been seen for `lease` or has another instance now (`lost`,
/// `runner_disconnected`: a runner that drops off ends its shells, as it ends its leases),
/// those whose session is no longer active (`closed`, `session_ended`) and `ready` ones unused
/// for `idle` (`closed`, `idle_expired`). Returns them so their runners can be told.
pub async fn end_idle_and_orphaned(
    client: &impl GenericClient,
    idle: std::time::Duration,
    lease: std::time::Duration,
    limit: i64,
) -> Result<Vec<ShellRow>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "WITH due AS ( \
                 SELECT s.id, \
                     CASE WHEN r.instance_id IS DISTINCT FROM s.instance_id \
                               OR r.last_seen_at IS NULL \
                               OR r.last_seen_at < now() - $2 * interval '1 second' \
                            THEN 'runner_disconnected' \
                          WHEN w.lifecycle <> 'active' THEN 'session_ended' \
                          ELSE 'idle_expired' END AS reason \
                 FROM persistent_shells s \
                 JOIN workflow_sessions w ON w.id = s.session_id \
                 LEFT JOIN runners r ON r.client_id = s.client_id \
                 WHERE s.state IN ('opening', 'ready', 'busy') \
                   AND (w.lifecycle <> 'active' \
                        OR r.instance_id IS DISTINCT FROM s.instance_id \
                        OR r.last_seen_at IS NULL \
                        OR r.last_seen_at < now() - $2 * interval '1 second' \
                        OR (s.state = 'ready' AND s.last_used_at < now() - $1 * interval '1 second')) \
                 ORDER BY s.last_used_at LIMIT $3 FOR UPDATE OF s SKIP LOCKED) \
             UPDATE persistent_shells p SET \
                 state = CASE WHEN due.reason = 'runner_disconnected' THEN 'lost' ELSE 'closed' END, \
                 end_reason = due.reason, busy_work_id = NULL, ended_at = now(), \
                 version = version + 1 \
             FROM due WHERE p.id = due.id RETURNING {}",
            prefixed("p")
        ))
        .await?;
    Ok(client
        .query(&stmt, &[&idle.as_secs_f64(), &lease.as_secs_f64(), &limit])
        .await?
        .iter()
        .map(from_row)
        .collect())
}

/// Ends the open shell of `session` (`session_ended`) when its session finished or closed;
/// returns it so its runner can be told.
pub async fn end_for_session(
    client: &impl GenericClient,
    session: &SessionId,
) -> Result<Vec<ShellRow>, StoreError> {
    end_open(client, "session_id", session.as_str(), "session_ended").await
}

/// Ends the shell `id` (`closed`) unless it has ended; the shell as it ended, or `None`.
pub async fn close(
    client: &impl GenericClient,
    id: &ShellId,
) -> Result<Option<ShellRow>, StoreError> {
    Ok(end_open(client, "id", id.as_str(), "closed").await?.pop())
}

/// Ends (`closed`, for `reason`) the open shells whose `column` is `value`, in one guarded
/// statement.
async fn end_open(
    client: &impl GenericClient,
    column: &'static str,
    value: &str,
    reason: &str,
) -> Result<Vec<ShellRow>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "UPDATE persistent_shells SET state = 'closed', end_reason = $2::text, \
                 busy_work_id = NULL, ended_at = now(), version = version + 1 \
             WHERE {column} = $1::text AND state IN ('opening', 'ready', 'busy') \
             RETURNING {COLUMNS}"
        ))
        .await?;
    Ok(client
        .query(&stmt, &[&value, &reason])
        .await?
        .iter()
        .map(from_row)
        .collect())
}

/// Deletes shells that ended more than `keep` ago.
pub async fn prune_ended(
    client: &impl GenericClient,
    keep: std::time::Duration,
) -> Result<u64, StoreError> {
    let stmt = client
        .prepare_cached(
            "DELETE FROM persistent_shells WHERE ended_at < now() - $1 * interval '1 second'",
        )
        .await?;
    Ok(client.execute(&stmt, &[&keep.as_secs_f64()]).await?)
}

fn prefixed(table: &str) -> String {
    COLUMNS
        .split(", ")
        .map(|c| format!("{table}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Queues `work` (a close for a shell that has already ended in Postgres) with no session
/// change: upkeep telling a runner to release what it may still hold.
pub async fn queue_release(pool: &Pool, work: &NewWork) -> Result<Option<WorkRow>, StoreError> {
    match work::enqueue(pool, work, None, OpenLimits::NONE).await? {
        ChangeOutcome::Applied {
            value: Enqueued::Queued(row, None),
            ..
        } => Ok(Some(*row)),
        _ => Ok(None),
    }
}
