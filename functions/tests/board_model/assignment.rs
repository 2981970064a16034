//! `get_session_assignment` and fenced `complete_session_message` results against the model:
//! fences issued, replays, key conflicts, stale and applied completions.

use super::*;

impl Case<'_> {
    pub(super) fn verify_assignment(
        &mut self,
        target: Result<usize, &'static str>,
        r: &Value,
    ) -> Check<()> {
        let Ok(t) = target else {
            return failed(r, "unknown_message", "assignment of nothing");
        };
        let what = format!("get_session_assignment #{}", t + 1);
        if self.model.msgs[t].kind != Kind::Todo {
            self.note(format!("assignment of non-todo #{}", t + 1));
            failed(r, "not_a_todo", &what)?;
            ensure_eq!(
                r["error"]["message_kind"],
                json!(self.model.msgs[t].kind.as_str()),
                "{what}: message_kind"
            );
            return Ok(());
        }
        let out = output(r, &what)?;
        self.model.check_assignment(t, &out["assignment"], &what)?;
        self.take_fence(t, &out["assignment_fence"], &what)
    }

    /// Remembers the fence issued for todo `t` (null exactly when the todo is closed).
    fn take_fence(&mut self, t: usize, fence: &Value, what: &str) -> Check<()> {
        let open = self.model.msgs[t].status == Status::Open;
        ensure_eq!(
            fence.is_string(),
            open,
            "{what}: a fence is issued exactly for an open todo ({fence})"
        );
        if let Some(token) = fence.as_str() {
            let version = self.model.msgs[t].version;
            // One fence cannot prove two different assignments.
            if let Some(earlier) = self
                .model
                .fences
                .get(&t)
                .and_then(|f| f.iter().find(|e| e.token == token && e.version != version))
            {
                return Err(format!(
                    "{what}: the fence issued for #{} now is identical to the one issued at \
                     assignment version {}, though its assignment-local state changed since \
                     (now version {version})",
                    t + 1,
                    earlier.version
                ));
            }
            self.note(format!("fence for #{} at version {version}", t + 1));
            self.model.fences.entry(t).or_default().push(Fence {
                token: token.to_owned(),
                version,
            });
        }
        Ok(())
    }

    pub(super) fn verify_complete(
        &mut self,
        t: usize,
        fence: &Fence,
        foreign: bool,
        key: u8,
        answer: u8,
        r: &Value,
    ) -> Check<()> {
        let todo_id = self.model.msgs[t].id.clone();
        let status = self.model.msgs[t].status;
        let version = self.model.msgs[t].version;
        let what = format!(
            "complete #{} with key-{key}, answer {answer}, fence of version {} (todo at version \
             {version}, {status:?})",
            t + 1,
            fence.version,
        );
        if foreign {
            self.note("foreign fence");
            failed(r, "invalid_assignment_fence", &what)?;
            ensure_eq!(r["error"]["reason"], json!("wrong_message"), "{what}");
            return Ok(());
        }
        if let Some(earlier) = self.model.completions.get(&key).cloned() {
            if earlier.todo == t && earlier.answer == answer {
                self.note(format!("replay of key-{key}"));
                let out = output(r, &what)?;
                ensure_eq!(
                    *out,
                    earlier.output,
                    "{what}: a replay returns the original"
                );
                return Ok(());
            }
            self.note(format!("conflict on key-{key}"));
            return failed(r, "completion_key_conflict", &what);
        }
        let applies = status == Status::Open && fence.version == version;
        let out = output(r, &what)?.clone();
        ensure_eq!(out["message_id"], json!(todo_id), "{what}: message_id");
        ensure_eq!(
            out["state_changed"],
            json!(applies),
            "{what}: expected {}",
            if applies { "applied" } else { "stale" }
        );
        if applies {
            let answer_id = text(&out["answer_message_id"], "answer_message_id")?;
            ensure!(
                !self.model.by_id.contains_key(&answer_id),
                "{what}: answer id {answer_id} reused"
            );
            ensure_eq!(out["status"], json!("completed"), "{what}: status");
            ensure!(out["completed_at"].is_string(), "{what}: completed_at");
            ensure_eq!(out["assignment"], Value::Null, "{what}: assignment");
            ensure_eq!(out["assignment_fence"], Value::Null, "{what}: fence");
            self.note(format!("applied; answer {answer_id}"));
            self.model.complete(t, answer_id, answer);
            self.model.completions.insert(
                key,
                Accepted {
                    todo: t,
                    answer,
                    output: out,
                },
            );
        } else {
            self.note("stale");
            ensure_eq!(
                out["status"],
                json!(status.as_str()),
                "{what}: stale status"
            );
            ensure_eq!(
                out["answer_message_id"],
                Value::Null,
                "{what}: stale answer"
            );
            ensure_eq!(
                out["completed_at"],
                Value::Null,
                "{what}: stale completed_at"
            );
            self.model.check_assignment(t, &out["assignment"], &what)?;
            self.take_fence(t, &out["assignment_fence"], &what)?;
        }
        Ok(())
    }
}
