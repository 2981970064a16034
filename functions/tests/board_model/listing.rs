//! `list_session_messages` with a filter and a limit, compared whole with the model.

use super::*;

impl Case<'_> {
    pub(super) async fn list(&mut self, at: At, filter: Filter, limit: Option<u32>) -> Check<()> {
        let mut args = json!({ "session_id": self.session_id });
        let m = &self.model;
        let keep: Box<dyn Fn(&Msg) -> bool> = match filter {
            Filter::All => Box::new(|_| true),
            Filter::Status(s) => {
                args["status"] = json!(s.as_str());
                Box::new(move |msg| msg.status == s)
            }
            Filter::Kind(k) => {
                args["kind"] = json!(k.as_str());
                Box::new(move |msg| msg.kind == k)
            }
            Filter::ReplyTo(t) => match m.pick(t) {
                Some(Ok(p)) => {
                    args["reply_to"] = json!(m.msgs[p].id);
                    Box::new(move |msg| msg.reply_to == Some(p))
                }
                _ => {
                    args["reply_to"] = json!(BOGUS);
                    Box::new(|_| false)
                }
            },
        };
        if let Some(l) = limit {
            args["limit"] = json!(l);
        }
        let r = self
            .env
            .call(at, "list_session_messages", args.clone(), None)
            .await?;
        let what = format!("list {args}");
        let out = output(&r, &what)?;
        let matching: Vec<usize> = (0..m.msgs.len())
            .rev()
            .filter(|&i| keep(&m.msgs[i]))
            .collect();
        let shown: Vec<usize> = matching
            .iter()
            .copied()
            .take(limit.map_or(DEFAULT_LIMIT, |l| l as usize))
            .collect();
        let ids: Vec<&str> = out["messages"]
            .as_array()
            .ok_or_else(|| format!("{what}: messages"))?
            .iter()
            .map(|v| v["message_id"].as_str().unwrap_or("?"))
            .collect();
        let want: Vec<&str> = shown.iter().map(|&i| m.msgs[i].id.as_str()).collect();
        ensure_eq!(ids, want, "{what}: newest first");
        for (&i, v) in shown.iter().zip(out["messages"].as_array().unwrap()) {
            m.check_view(i, v, &what)?;
        }
        ensure_eq!(out["total"], json!(matching.len()), "{what}: total");
        ensure_eq!(out["returned"], json!(shown.len()), "{what}: returned");
        ensure_eq!(
            out["truncated"],
            json!(shown.len() < matching.len()),
            "{what}: truncated"
        );
        ensure_eq!(out["counts"], m.counts(), "{what}: counts");
        Ok(())
    }
}
