//! `post_session_message` and `resolve_session_message` results against the model.

use super::*;

impl Case<'_> {
    pub(super) fn verify_post(
        &mut self,
        kind: Kind,
        parent: Option<Result<usize, &'static str>>,
        ack_required: bool,
        priority: Option<Priority>,
        body: &str,
        r: &Value,
    ) -> Check<()> {
        let parent = match parent {
            Some(Err(_)) => {
                self.note("unknown reply_to");
                return failed(r, "unknown_message", "post replying to nothing");
            }
            None if kind == Kind::Answer => {
                self.note("answer without reply_to");
                return failed(r, "invalid_arguments", "answer without reply_to");
            }
            Some(Ok(p)) => Some(p),
            None => None,
        };
        let out = output(r, "post_session_message")?;
        let id = text(&out["message_id"], "message_id")?;
        ensure!(
            id.starts_with("wc_msg_") && id.len() == 29 && !self.model.by_id.contains_key(&id),
            "post returned a bad or reused id {id}"
        );
        let i = self.model.post(
            id.clone(),
            kind,
            parent,
            ack_required,
            priority.unwrap_or(Priority::Normal),
            body.to_owned(),
        );
        self.note(format!("posted #{} {id}", i + 1));
        ensure_eq!(out["message_id"], out["message"]["message_id"], "post ids");
        self.model.check_view(i, &out["message"], "post")
    }

    pub(super) fn verify_resolve(
        &mut self,
        target: Result<usize, &'static str>,
        r: &Value,
    ) -> Check<()> {
        let Ok(i) = target else {
            return failed(r, "unknown_message", "resolve of nothing");
        };
        let out = output(r, "resolve_session_message")?;
        let was_open = self.model.msgs[i].status == Status::Open;
        self.note(format!("resolve #{} (open: {was_open})", i + 1));
        if was_open {
            self.model.close(i, Status::Resolved);
        }
        let what = format!("resolve #{}", i + 1);
        ensure_eq!(
            out["state_changed"],
            json!(was_open),
            "{what}: state_changed"
        );
        ensure_eq!(
            out["status"],
            json!(self.model.msgs[i].status.as_str()),
            "{what}: status"
        );
        ensure_eq!(
            out["message_id"],
            json!(self.model.msgs[i].id),
            "{what}: message_id"
        );
        self.model.check_view(i, &out["message"], &what)
    }
}
