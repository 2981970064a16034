//! `observe_session_messages`: new baselines, and pages from the observer's token that deliver
//! every change exactly once, oldest change first.

use super::*;

impl Case<'_> {
    pub(super) async fn observe(
        &mut self,
        at: At,
        limit: u32,
        drain: bool,
        wait_ms: Option<u32>,
        rebaseline: bool,
    ) -> Check<()> {
        if rebaseline {
            let r = self
                .env
                .call(
                    at,
                    "observe_session_messages",
                    json!({ "session_id": self.session_id }),
                    None,
                )
                .await?;
            let out = output(&r, "baseline")?;
            ensure_eq!(out["baseline"], json!(true), "baseline flag");
            ensure_eq!(out["messages"], json!([]), "a baseline returns no history");
            ensure_eq!(out["has_more"], json!(false), "baseline has_more");
            self.model.observer = Some(Observer {
                token: text(&out["token"], "baseline token")?,
                cursor_rev: self.last.session_rev,
                pending: BTreeMap::new(),
            });
            self.note("new baseline");
            return Ok(());
        }
        for page in 0.. {
            ensure!(page < 100, "observation never caught up");
            let observer = self.model.observer.clone().expect("observer");
            let mut args = json!({
                "session_id": self.session_id,
                "token": observer.token,
                "limit": limit,
            });
            if let Some(w) = wait_ms {
                args["wait_ms"] = json!(w);
            }
            let r = self
                .env
                .call(at, "observe_session_messages", args, None)
                .await?;
            let what = format!("observation page {page} (limit {limit})");
            let out = output(&r, &what)?;
            ensure_eq!(out["baseline"], json!(false), "{what}: baseline");
            ensure_eq!(out["history_lost"], json!(false), "{what}: history_lost");
            let has_more = out["has_more"]
                .as_bool()
                .ok_or_else(|| format!("{what}: has_more"))?;
            let messages = out["messages"]
                .as_array()
                .ok_or_else(|| format!("{what}: messages"))?;
            let ids: Vec<String> = messages
                .iter()
                .map(|m| text(&m["message_id"], "message_id"))
                .collect::<Check<_>>()?;
            // What the stored revisions say this page must hold.
            let mut after: Vec<(i64, &String)> = self
                .last
                .rows
                .iter()
                .filter(|(_, r)| r.observation_revision > observer.cursor_rev)
                .map(|(id, r)| (r.observation_revision, id))
                .collect();
            after.sort();
            let expected: Vec<String> = after
                .iter()
                .take(limit as usize)
                .map(|(_, id)| (*id).clone())
                .collect();
            ensure_eq!(
                ids,
                expected,
                "{what}: the messages changed after revision {}, oldest change first",
                observer.cursor_rev
            );
            ensure_eq!(has_more, after.len() > limit as usize, "{what}: has_more");
            // Every change after the token is delivered exactly once before catching up.
            let mut pending = observer.pending.clone();
            for (id, view) in ids.iter().zip(messages) {
                let i = *self
                    .model
                    .by_id
                    .get(id)
                    .ok_or_else(|| format!("{what}: unknown message {id}"))?;
                let changed_at = self.model.msgs[i].changed_at;
                ensure_eq!(
                    pending.remove(&i),
                    Some(changed_at),
                    "{what}: #{} {id} was returned, but its latest change (op {changed_at}) \
                     was already delivered or precedes the token",
                    i + 1
                );
                self.model.check_view(i, view, &what)?;
            }
            if !has_more {
                ensure!(
                    pending.is_empty(),
                    "{what}: caught up but never delivered the changes of {:?}",
                    pending
                        .keys()
                        .map(|&i| self.model.msgs[i].id.as_str())
                        .collect::<Vec<_>>()
                );
            }
            let cursor_rev = match (has_more, ids.last()) {
                (true, Some(last)) => self.last.rows[last].observation_revision,
                _ => self.last.session_rev,
            };
            self.note(format!(
                "page {page}: {:?}, has_more {has_more}",
                ids.iter()
                    .map(|id| self.model.by_id[id] + 1)
                    .collect::<Vec<_>>()
            ));
            self.model.observer = Some(Observer {
                token: text(&out["token"], "token")?,
                cursor_rev,
                pending,
            });
            if !has_more || !drain {
                break;
            }
        }
        Ok(())
    }
}
