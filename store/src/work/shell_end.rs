//! The end of persistent-shell work lands on the shell it served, in the transaction that ends
//! the work (every terminal path of `work` comes through [`work_ended`]), after the sessions'
//! evidence: locks are taken session first, shell second, as the shells module's `submit` takes
//! them.

use serde_json::Value;
use wc_domain::{ShellState, WorkState};
use wc_runner_protocol::WorkSpec;

use super::WorkRow;
use crate::{GenericClient, StoreError};

/// Applies the end of shell work to its shell, in the transaction that ends the work (after its
/// session's evidence). `answer` is the runner's answer when it gave one (only for a single
/// ended row). Other work is left alone.
///
/// - An open or a command hands the shell back: the answer's state (`ready`, or terminal),
///   else `lost` when the work was lost or stopped (its fate unknown), else — refused before
///   the runner touched it — `ready` again, or `closed` (`open_failed`) for an open.
/// - A status check that found the shell ended ends it too.
pub(super) async fn work_ended(
    tx: &impl GenericClient,
    ended: &[WorkRow],
    answer: Option<&Value>,
) -> Result<(), StoreError> {
    for row in ended {
        let WorkSpec::PersistentShell(shell_op) = &row.item.spec else {
            continue;
        };
        let shell_id = shell_op.target().shell_id.as_str();
        let answered = answer
            .filter(|_| ended.len() == 1)
            .filter(|a| a["op"] == "shell")
            .and_then(|a| a["state"].as_str())
            .and_then(|s| ShellState::parse(s).ok());
        let op = shell_op.name();
        let next = match (op, answered) {
            ("shell_open" | "shell_exec", Some(state)) => state,
            ("shell_open" | "shell_exec", None) => match row.state {
                WorkState::Lost | WorkState::Cancelled => ShellState::Lost,
                _ if op == "shell_open" => ShellState::Closed,
                _ => ShellState::Ready,
            },
            ("shell_status", Some(state)) if state.is_terminal() => {
                end_checked(tx, shell_id, state).await?;
                continue;
            }
            _ => continue,
        };
        let reason = end_reason(op, next, row);
        let cwd = answer
            .filter(|_| op == "shell_open")
            .and_then(|a| a["cwd"].as_str());
        let stmt = tx
            .prepare_cached(
                "UPDATE persistent_shells SET state = $3::text, busy_work_id = NULL, \
                     cwd = coalesce($5, cwd), last_used_at = now(), \
                     end_reason = CASE WHEN $3::text IN ('closed', 'exited', 'poisoned', 'lost') \
                                       THEN $4 END, \
                     ended_at = CASE WHEN $3::text IN ('closed', 'exited', 'poisoned', 'lost') \
                                     THEN now() END, \
                     version = version + 1 \
                 WHERE id = $1::text AND busy_work_id = $2",
            )
            .await?;
        tx.execute(&stmt, &[&shell_id, &row.id, &next.as_str(), &reason, &cwd])
            .await?;
    }
    Ok(())
}

/// Why a shell ended through the end of its work `row` (`None` when it did not end).
fn end_reason(op: &str, next: ShellState, row: &WorkRow) -> Option<String> {
    let reason = match next {
        ShellState::Exited => "exited",
        ShellState::Poisoned => "poisoned",
        ShellState::Closed if op == "shell_open" => "open_failed",
        ShellState::Closed => "closed",
        ShellState::Lost => row.end_reason.map_or("lost", |r| r.as_str()),
        ShellState::Opening | ShellState::Ready | ShellState::Busy => return None,
    };
    Some(reason.to_owned())
}

/// Ends a shell a status check found ended, unless it has ended already.
async fn end_checked(
    tx: &impl GenericClient,
    shell_id: &str,
    state: ShellState,
) -> Result<(), StoreError> {
    let stmt = tx
        .prepare_cached(
            "UPDATE persistent_shells SET state = $2::text, end_reason = $2::text, \
                 busy_work_id = NULL, ended_at = now(), version = version + 1 \
             WHERE id = $1::text AND state IN ('opening', 'ready', 'busy')",
        )
        .await?;
    tx.execute(&stmt, &[&shell_id, &state.as_str()]).await?;
    Ok(())
}
