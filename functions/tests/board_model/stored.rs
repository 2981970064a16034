//! The stored board, read with SQL, and its invariants after every operation: the message set,
//! numbers, statuses and counters, and how the operation moved observation and assignment
//! revisions.

use super::*;

#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) observation_revision: i64,
    pub(super) assignment_revision: i64,
    pub(super) status: String,
    pub(super) acked: bool,
    pub(super) number: i64,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Stored {
    pub(super) session_rev: i64,
    /// The session row's board counters: (posted, retained, open ACK-required).
    pub(super) counters: (i64, i32, i32),
    pub(super) rows: HashMap<String, Row>,
}

pub(super) async fn stored(db: &TestDatabase, session_id: &str) -> Stored {
    let client = db.pool().get().await.unwrap();
    let session = client
        .query_one(
            "SELECT message_observation_revision, messages_posted, messages_retained, \
               open_ack_required FROM workflow_sessions WHERE id = $1",
            &[&session_id],
        )
        .await
        .unwrap();
    let session_rev: i64 = session.get(0);
    let counters = (session.get(1), session.get(2), session.get(3));
    let rows = client
        .query(
            "SELECT id, observation_revision, assignment_revision, status, \
               first_ack_observed_at IS NOT NULL, number \
             FROM session_messages WHERE session_id = $1",
            &[&session_id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get::<_, String>(0),
                Row {
                    observation_revision: r.get(1),
                    assignment_revision: r.get(2),
                    status: r.get(3),
                    acked: r.get(4),
                    number: r.get(5),
                },
            )
        })
        .collect();
    Stored {
        session_rev,
        counters,
        rows,
    }
}

impl Case<'_> {
    /// The stored board against the model, and how this operation moved its revisions.
    pub(super) async fn check_stored(&mut self, versions: &[u64]) -> Check<()> {
        let now = stored(&self.env.db, &self.session_id).await;
        let checked = self.compare_stored(&now, versions);
        self.last = now;
        checked
    }

    /// The stored board `now` against the model, and how the operation moved its revisions
    /// since the previous one (`versions`: the todos' assignment versions before it).
    pub(super) fn compare_stored(&self, now: &Stored, versions: &[u64]) -> Check<()> {
        let prev = &self.last;
        let m = &self.model;
        ensure_eq!(
            now.rows.len(),
            m.msgs.len(),
            "stored messages: {:?}",
            now.rows.keys().collect::<Vec<_>>()
        );
        let mut revisions = BTreeSet::new();
        for (i, msg) in m.msgs.iter().enumerate() {
            let row = now
                .rows
                .get(&msg.id)
                .ok_or_else(|| format!("message {} is not stored", msg.id))?;
            ensure_eq!(
                row.status,
                msg.status.as_str(),
                "stored status of {}",
                msg.id
            );
            ensure_eq!(row.acked, msg.acked, "stored ACK of {}", msg.id);
            ensure_eq!(row.number, i as i64 + 1, "stored number of {}", msg.id);
            ensure!(
                revisions.insert(row.observation_revision),
                "observation revision {} is not unique (message {})",
                row.observation_revision,
                msg.id
            );
            ensure!(
                row.observation_revision <= now.session_rev,
                "message {} has revision {} beyond the session's {}",
                msg.id,
                row.observation_revision,
                now.session_rev
            );
            let changed = m.changes.contains(&i);
            match prev.rows.get(&msg.id) {
                Some(before) if !changed => ensure_eq!(
                    row.observation_revision,
                    before.observation_revision,
                    "observation revision of {} moved without an observable change",
                    msg.id
                ),
                _ => ensure!(
                    row.observation_revision > prev.session_rev,
                    "message {} changed observably but its revision {} is not after the \
                     previous session revision {}",
                    msg.id,
                    row.observation_revision,
                    prev.session_rev
                ),
            }
            if let (Some(before), Some(&version)) = (prev.rows.get(&msg.id), versions.get(i))
                && self.check_assignment_revisions
                && msg.kind == Kind::Todo
                && msg.status == Status::Open
            {
                let moved = row.assignment_revision != before.assignment_revision;
                let changed = msg.version != version;
                ensure!(
                    moved == changed,
                    "open todo #{} {}: its assignment-local state (own status, direct replies \
                     and their statuses) {} in this operation, but its stored assignment \
                     revision {} ({} -> {}), so fences issued for it before {}",
                    i + 1,
                    msg.id,
                    if changed { "changed" } else { "did not change" },
                    if moved { "moved" } else { "did not move" },
                    before.assignment_revision,
                    row.assignment_revision,
                    if changed {
                        "stay valid though they should be stale"
                    } else {
                        "went stale though they should stay valid"
                    }
                );
            }
        }
        let open_ack_required = m
            .msgs
            .iter()
            .filter(|x| x.ack_required && x.status == Status::Open)
            .count();
        ensure_eq!(
            now.counters,
            (
                m.msgs.len() as i64,
                m.msgs.len() as i32,
                open_ack_required as i32
            ),
            "the session's board counters (posted, retained, open ACK-required)"
        );
        ensure_eq!(
            now.session_rev - prev.session_rev,
            m.changes.len() as i64,
            "session observation revision moved by the wrong amount (observable changes: {:?})",
            m.changes
                .iter()
                .map(|&i| m.msgs[i].id.as_str())
                .collect::<Vec<_>>()
        );
        Ok(())
    }
}
