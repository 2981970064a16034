//! The reference model of the board: its messages, the fences issued, the accepted completions
//! and the observer's position, and how a message or assignment view is checked against it.

use super::*;

#[derive(Debug, Clone)]
pub(super) struct Msg {
    pub(super) id: String,
    pub(super) kind: Kind,
    pub(super) priority: Priority,
    pub(super) reply_to: Option<usize>,
    pub(super) ack_required: bool,
    pub(super) body: String,
    pub(super) status: Status,
    /// Whether an ACK of it was observed.
    pub(super) acked: bool,
    /// Direct replies, in posting order.
    pub(super) replies: Vec<usize>,
    /// Todos: bumped by every assignment-local change (its status, its direct replies and
    /// their statuses). Only equality matters.
    pub(super) version: u64,
    /// Todos: the answer that completed it.
    pub(super) answer: Option<usize>,
    /// The operation of its latest observable change.
    pub(super) changed_at: usize,
}

/// A fence as issued, with the assignment version it proves.
#[derive(Debug, Clone)]
pub(super) struct Fence {
    pub(super) token: String,
    pub(super) version: u64,
}

/// An accepted completion, by key.
#[derive(Debug, Clone)]
pub(super) struct Accepted {
    pub(super) todo: usize,
    pub(super) answer: u8,
    pub(super) output: Value,
}

/// The observer's position: its token, the revision the token carries (the test's own
/// bookkeeping, from SQL), and the changes after it not yet delivered (message → the operation
/// of its latest change).
#[derive(Debug, Clone)]
pub(super) struct Observer {
    pub(super) token: String,
    pub(super) cursor_rev: i64,
    pub(super) pending: BTreeMap<usize, usize>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Model {
    pub(super) msgs: Vec<Msg>,
    pub(super) by_id: HashMap<String, usize>,
    /// Fences issued per todo, oldest first.
    pub(super) fences: BTreeMap<usize, Vec<Fence>>,
    pub(super) completions: BTreeMap<u8, Accepted>,
    /// The current operation.
    pub(super) op: usize,
    /// Observable changes of the current operation (a message once per change).
    pub(super) changes: Vec<usize>,
    /// Every observable change of the case.
    pub(super) total_changes: usize,
    pub(super) observer: Option<Observer>,
}

impl Model {
    pub(super) fn begin(&mut self, op: usize) {
        self.op = op;
        self.changes.clear();
    }

    /// Records an observable change of message `i`.
    pub(super) fn touch(&mut self, i: usize) {
        self.msgs[i].changed_at = self.op;
        self.changes.push(i);
        self.total_changes += 1;
        if let Some(o) = &mut self.observer {
            o.pending.insert(i, self.op);
        }
    }

    /// Assignment-local state of todo `i` changed.
    fn bump(&mut self, i: usize) {
        if self.msgs[i].kind == Kind::Todo {
            self.msgs[i].version += 1;
        }
    }

    pub(super) fn post(
        &mut self,
        id: String,
        kind: Kind,
        reply_to: Option<usize>,
        ack_required: bool,
        priority: Priority,
        body: String,
    ) -> usize {
        let i = self.msgs.len();
        self.msgs.push(Msg {
            id: id.clone(),
            kind,
            priority,
            reply_to,
            ack_required,
            body,
            status: Status::Open,
            acked: false,
            replies: Vec::new(),
            version: 0,
            answer: None,
            changed_at: self.op,
        });
        self.by_id.insert(id, i);
        self.touch(i);
        if let Some(p) = reply_to {
            self.msgs[p].replies.push(i);
            self.bump(p);
        }
        i
    }

    /// Closes open message `i` as `status`: its own status changed, and so did the status of a
    /// direct reply of its parent.
    pub(super) fn close(&mut self, i: usize, status: Status) {
        self.msgs[i].status = status;
        self.touch(i);
        self.bump(i);
        if let Some(p) = self.msgs[i].reply_to {
            self.bump(p);
        }
    }

    pub(super) fn complete(&mut self, todo: usize, answer_id: String, answer: u8) {
        self.close(todo, Status::Completed);
        let a = self.post(
            answer_id,
            Kind::Answer,
            Some(todo),
            false,
            Priority::Normal,
            ANSWERS[answer as usize].to_owned(),
        );
        self.msgs[todo].answer = Some(a);
    }

    pub(super) fn todos_with_fences(&self) -> Vec<usize> {
        self.fences.keys().copied().collect()
    }

    /// The message `t` names among all messages.
    pub(super) fn pick(&self, t: Target) -> Option<Result<usize, &'static str>> {
        self.pick_among(t, |_| true)
    }

    /// The message `t` names: `Existing` among the messages that satisfy `prefer` (all of
    /// them when none does), `Any` among all.
    pub(super) fn pick_among(
        &self,
        t: Target,
        prefer: impl Fn(&Msg) -> bool,
    ) -> Option<Result<usize, &'static str>> {
        let all: Vec<usize> = (0..self.msgs.len()).collect();
        let preferred: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&i| prefer(&self.msgs[i]))
            .collect();
        let (s, among) = match t {
            Target::Bogus => return Some(Err(BOGUS)),
            Target::Existing(s) if !preferred.is_empty() => (s, preferred),
            Target::Existing(s) | Target::Any(s) => (s, all),
        };
        (!among.is_empty()).then(|| Ok(among[s as usize % among.len()]))
    }

    pub(super) fn counts(&self) -> Value {
        let open = |f: &dyn Fn(&Msg) -> bool| {
            self.msgs
                .iter()
                .filter(|m| m.status == Status::Open && f(m))
                .count()
        };
        json!({
            "retained": self.msgs.len(),
            "open": open(&|_| true),
            "open_questions": open(&|m| m.kind == Kind::Question),
            "open_todos": open(&|m| m.kind == Kind::Todo),
            "open_ack_required": open(&|m| m.ack_required),
        })
    }

    /// Checks a message view against message `i`.
    pub(super) fn check_view(&self, i: usize, v: &Value, what: &str) -> Check<()> {
        let m = &self.msgs[i];
        ensure_eq!(v["message_id"], json!(m.id), "{what}: message_id");
        ensure_eq!(v["number"], json!(i + 1), "{what}: number of {}", m.id);
        ensure_eq!(
            v["kind"],
            json!(m.kind.as_str()),
            "{what}: kind of {}",
            m.id
        );
        ensure_eq!(
            v["priority"],
            json!(m.priority.as_str()),
            "{what}: priority of {}",
            m.id
        );
        ensure_eq!(
            v["ack_required"],
            json!(m.ack_required),
            "{what}: ack_required of {}",
            m.id
        );
        let reply_to = m.reply_to.map(|p| self.msgs[p].id.clone());
        ensure_eq!(
            v["reply_to"],
            json!(reply_to),
            "{what}: reply_to of {}",
            m.id
        );
        ensure_eq!(
            v["status"],
            json!(m.status.as_str()),
            "{what}: status of {}",
            m.id
        );
        ensure_eq!(v["body"], json!(m.body), "{what}: body of {}", m.id);
        ensure_eq!(
            v["body_redacted"],
            json!(false),
            "{what}: body_redacted of {}",
            m.id
        );
        ensure_eq!(
            v["author_session_id"],
            Value::Null,
            "{what}: author of unrecorded {}",
            m.id
        );
        ensure_eq!(
            !v["first_ack_observed_at"].is_null(),
            m.acked,
            "{what}: first_ack_observed_at of {}",
            m.id
        );
        let answer = m.answer.map(|a| self.msgs[a].id.clone());
        ensure_eq!(
            v["answer_message_id"],
            json!(answer),
            "{what}: answer_message_id of {}",
            m.id
        );
        let reply_count = (m.kind == Kind::Todo).then_some(m.replies.len());
        ensure_eq!(
            v["reply_count"],
            json!(reply_count),
            "{what}: reply_count of {}",
            m.id
        );
        ensure_eq!(
            !v["closed_at"].is_null(),
            m.status != Status::Open,
            "{what}: closed_at of {}",
            m.id
        );
        Ok(())
    }

    /// Checks an assignment view against todo `t`.
    pub(super) fn check_assignment(&self, t: usize, a: &Value, what: &str) -> Check<()> {
        let m = &self.msgs[t];
        self.check_view(t, &a["todo"], &format!("{what}: assignment todo"))?;
        let replies = a["replies"]
            .as_array()
            .ok_or_else(|| format!("{what}: no replies array: {a}"))?;
        let ids: Vec<&str> = replies
            .iter()
            .map(|r| r["message_id"].as_str().unwrap_or("?"))
            .collect();
        let want: Vec<&str> = m
            .replies
            .iter()
            .map(|&r| self.msgs[r].id.as_str())
            .collect();
        ensure_eq!(ids, want, "{what}: direct replies of {}", m.id);
        for (r, v) in m.replies.iter().zip(replies) {
            self.check_view(*r, v, &format!("{what}: reply"))?;
        }
        ensure_eq!(
            a["replies_total"],
            json!(m.replies.len()),
            "{what}: replies_total"
        );
        ensure_eq!(
            a["replies_truncated"],
            json!(false),
            "{what}: replies_truncated"
        );
        let open = m.status == Status::Open;
        ensure_eq!(a["completable"], json!(open), "{what}: completable");
        let reason = match m.status {
            Status::Open => Value::Null,
            Status::Resolved => json!("todo_resolved"),
            Status::Completed => json!("todo_completed"),
        };
        ensure_eq!(
            a["non_completable_reason"],
            reason,
            "{what}: non_completable_reason"
        );
        Ok(())
    }
}
