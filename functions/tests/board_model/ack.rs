//! ACKs carried by recorded calls: first ACKs observed, and the session attention that
//! re-projects the open ACK-required messages.

use super::*;

impl Case<'_> {
    pub(super) fn verify_ack(
        &mut self,
        picked: &[Result<usize, &'static str>],
        r: &Value,
        racing: bool,
    ) -> Check<()> {
        let ids: Vec<String> = picked.iter().map(|&p| self.id_of(p)).collect();
        let what = format!("ACK of {ids:?}");
        output(r, &what)?;
        let named: BTreeSet<usize> = picked.iter().filter_map(|p| p.ok()).collect();
        let first: Vec<usize> = named
            .iter()
            .copied()
            .filter(|&i| {
                let m = &self.model.msgs[i];
                m.ack_required && m.status == Status::Open && !m.acked
            })
            .collect();
        for &i in &first {
            self.model.msgs[i].acked = true;
            self.model.touch(i);
        }
        self.note(format!(
            "first ACKs: {:?}",
            first.iter().map(|i| i + 1).collect::<Vec<_>>()
        ));
        let attention = &r["session_attention"];
        let observed: BTreeSet<String> = match attention["ack_observed"].as_array() {
            Some(a) => a
                .iter()
                .filter_map(|v| v.as_str())
                .map(str::to_owned)
                .collect(),
            None => BTreeSet::new(),
        };
        let want: BTreeSet<String> = first
            .iter()
            .map(|&i| self.model.msgs[i].id.clone())
            .collect();
        ensure_eq!(observed, want, "{what}: session_attention.ack_observed");
        if racing {
            return Ok(());
        }
        // Attention re-projects the open ACK-required messages this request did not name.
        let unacked: Vec<&str> = self
            .model
            .msgs
            .iter()
            .filter(|m| m.ack_required && m.status == Status::Open && !ids.contains(&m.id))
            .map(|m| m.id.as_str())
            .collect();
        if attention.is_null() {
            ensure!(
                unacked.is_empty() && want.is_empty(),
                "{what}: no session_attention though {unacked:?} await an ACK"
            );
        } else {
            ensure_eq!(
                attention["session_id"],
                json!(self.session_id),
                "{what}: attention session"
            );
            ensure_eq!(
                attention["total"],
                json!(unacked.len()),
                "{what}: attention total"
            );
            let shown: Vec<&str> = attention["messages"]
                .as_array()
                .map(|a| a.iter().filter_map(|m| m["message_id"].as_str()).collect())
                .unwrap_or_default();
            let expected: Vec<&str> = unacked.iter().copied().take(5).collect();
            ensure_eq!(shown, expected, "{what}: attention messages");
        }
        Ok(())
    }
}
