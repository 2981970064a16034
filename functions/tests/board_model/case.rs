//! One case: its session and observer, each operation prepared against the model, sent, and
//! its result verified (two racing operations explained by one of their orders), and the
//! final checks.

use super::*;

pub(super) struct Case<'e> {
    pub(super) env: &'e Env,
    pub(super) session_id: String,
    pub(super) model: Model,
    /// The stored board after the previous operation.
    pub(super) last: Stored,
    /// A token of the empty board, for the final full-history observation.
    pub(super) origin: (String, i64),
    /// Whether stored assignment revisions are checked too (otherwise only what clients see).
    pub(super) check_assignment_revisions: bool,
    pub(super) trace: String,
}

impl<'e> Case<'e> {
    async fn start(env: &'e Env, n: u64, check_assignment_revisions: bool) -> Check<Case<'e>> {
        let at = At {
            inst: Inst::A,
            surface: Surface::Mcp,
        };
        let r = env
            .call(
                at,
                "work_on_project",
                json!({ "project": PROJECT, "instruction": format!("board model case {n}") }),
                None,
            )
            .await?;
        let session_id = text(&output(&r, "work_on_project")?["session_id"], "session_id")?;
        let last = stored(&env.db, &session_id).await;
        ensure!(last.rows.is_empty(), "a fresh session has messages");
        let r = env
            .call(
                at,
                "observe_session_messages",
                json!({ "session_id": session_id }),
                None,
            )
            .await?;
        let out = output(&r, "baseline")?;
        ensure_eq!(out["baseline"], json!(true), "baseline flag");
        let token = text(&out["token"], "baseline token")?;
        let model = Model {
            observer: Some(Observer {
                token: token.clone(),
                cursor_rev: last.session_rev,
                pending: BTreeMap::new(),
            }),
            ..Model::default()
        };
        let origin = (token, last.session_rev);
        Ok(Case {
            env,
            session_id,
            model,
            last,
            origin,
            check_assignment_revisions,
            trace: String::new(),
        })
    }

    pub(super) fn note(&mut self, line: impl AsRef<str>) {
        let _ = writeln!(self.trace, "      {}", line.as_ref());
    }

    async fn step(&mut self, n: usize, op: &Op) -> Check<()> {
        if !matches!(op, Op::Skip) {
            let _ = writeln!(self.trace, "  {n:>2}: {op:?}");
        }
        self.model.begin(n);
        let versions: Vec<u64> = self.model.msgs.iter().map(|m| m.version).collect();
        match op {
            Op::Skip => {}
            Op::Observe {
                at,
                limit,
                drain,
                wait_ms,
                rebaseline,
            } => {
                self.observe(*at, *limit, *drain, *wait_ms, *rebaseline)
                    .await?
            }
            Op::List { at, filter, limit } => self.list(*at, *filter, *limit).await?,
            Op::Race(x, y) => return self.race(n, x, y, &versions).await,
            single => {
                let p = self.prepare(n, single);
                if let Some(req) = self.request(&p) {
                    let r = self
                        .env
                        .call(req.at, req.tool, req.args, req.wrapper)
                        .await?;
                    self.verify(&p, &r, false)?;
                } else {
                    self.note("skipped: nothing to name");
                }
            }
        }
        self.check_stored(&versions).await
    }

    /// Two operations at once, on instance A and instance B: their results must be those of
    /// one of the two orders in which they could have run.
    async fn race(&mut self, n: usize, x: &Op, y: &Op, versions: &[u64]) -> Check<()> {
        let (px, py) = (self.prepare(n, x), self.prepare(n, y));
        self.note(format!("racing {px:?}\n        with {py:?}"));
        let (rx, ry) = match (self.request(&px), self.request(&py)) {
            (Some(rx), Some(ry)) => (rx, ry),
            (one, other) => {
                self.note("one of the two has nothing to name: the other runs alone");
                let (p, req) = match one {
                    Some(req) => (&px, req),
                    None => match other {
                        Some(req) => (&py, req),
                        None => return Ok(()),
                    },
                };
                let r = self
                    .env
                    .call(req.at, req.tool, req.args, req.wrapper)
                    .await?;
                self.verify(p, &r, false)?;
                return self.check_stored(versions).await;
            }
        };
        let (ax, ay) = tokio::join!(
            self.env.call(rx.at, rx.tool, rx.args, rx.wrapper),
            self.env.call(ry.at, ry.tool, ry.args, ry.wrapper),
        );
        let (ax, ay) = (ax?, ay?);
        // The stored board (message numbers, revisions) must agree with the same order.
        let now = stored(&self.env.db, &self.session_id).await;
        let saved = (self.model.clone(), self.trace.len());
        self.note("as if the first ran first:");
        let first = self
            .verify(&px, &ax, true)
            .and_then(|()| self.verify(&py, &ay, true))
            .and_then(|()| self.compare_stored(&now, versions));
        let Err(e1) = first else {
            self.last = now;
            return Ok(());
        };
        self.model = saved.0;
        self.trace.truncate(saved.1);
        self.note("as if the second ran first:");
        let second = self
            .verify(&py, &ay, true)
            .and_then(|()| self.verify(&px, &ax, true))
            .and_then(|()| self.compare_stored(&now, versions));
        self.last = now;
        second.map_err(|e2| {
            format!(
                "no order of the racing operations explains their results\n  first then \
                 second: {e1}\n  second then first: {e2}\n  results:\n    {ax}\n    {ay}"
            )
        })
    }

    /// Resolves an operation's targets against the model as it is before the operation.
    fn prepare(&self, n: usize, op: &Op) -> Prepared {
        let m = &self.model;
        match *op {
            Op::Post {
                at,
                kind,
                reply_to,
                ack_required,
                priority,
            } => Prepared::Post {
                at,
                kind,
                parent: reply_to.and_then(|t| m.pick(t)),
                ack_required,
                priority,
                body: format!("{} posted by op {n} on {:?}", kind.as_str(), at.inst),
            },
            Op::Resolve { at, target } => match m.pick(target) {
                Some(target) => Prepared::Resolve { at, target },
                None => Prepared::Nothing,
            },
            Op::GetAssignment { at, target } => {
                match m.pick_among(target, |x| x.kind == Kind::Todo) {
                    Some(target) => Prepared::GetAssignment { at, target },
                    None => Prepared::Nothing,
                }
            }
            Op::Complete {
                at,
                todo,
                fence,
                key,
                answer,
            } => {
                let candidates = m.todos_with_fences();
                if candidates.is_empty() {
                    // No fence known yet: fetch one first.
                    return match m.pick_among(Target::Existing(todo), |x| x.kind == Kind::Todo) {
                        Some(target) => Prepared::GetAssignment { at, target },
                        None => Prepared::Nothing,
                    };
                }
                let t = candidates[todo as usize % candidates.len()];
                let fences = &m.fences[&t];
                let latest = || fences.last().cloned().expect("fences");
                let (fence, foreign) = match fence {
                    FenceChoice::Latest => (latest(), false),
                    FenceChoice::Older(k) => (fences[k as usize % fences.len()].clone(), false),
                    FenceChoice::Foreign(o) => {
                        let others: Vec<usize> =
                            candidates.iter().copied().filter(|&c| c != t).collect();
                        if others.is_empty() {
                            (latest(), false)
                        } else {
                            let other = others[o as usize % others.len()];
                            (m.fences[&other].last().cloned().expect("fences"), true)
                        }
                    }
                };
                Prepared::Complete {
                    at,
                    todo: t,
                    fence,
                    foreign,
                    key,
                    answer,
                }
            }
            Op::Ack {
                inst,
                carrier,
                ref targets,
            } => Prepared::Ack {
                inst,
                carrier,
                picked: targets
                    .iter()
                    .map(|&t| m.pick_among(t, |x| x.ack_required).unwrap_or(Err(BOGUS)))
                    .collect(),
            },
            Op::Skip | Op::Observe { .. } | Op::List { .. } | Op::Race(..) => Prepared::Nothing,
        }
    }

    pub(super) fn id_of(&self, target: Result<usize, &'static str>) -> String {
        match target {
            Ok(i) => self.model.msgs[i].id.clone(),
            Err(bogus) => bogus.to_owned(),
        }
    }

    /// The call a prepared operation makes (`None`: nothing to do).
    fn request(&self, p: &Prepared) -> Option<Request> {
        let session_id = &self.session_id;
        Some(match p {
            Prepared::Nothing => return None,
            Prepared::Post {
                at,
                kind,
                parent,
                ack_required,
                priority,
                body,
            } => {
                let mut args = json!({
                    "session_id": session_id,
                    "kind": kind.as_str(),
                    "body": body,
                    "ack_required": ack_required,
                });
                if let Some(p) = priority {
                    args["priority"] = json!(p.as_str());
                }
                if let Some(parent) = parent {
                    args["reply_to"] = json!(self.id_of(*parent));
                }
                Request::new(*at, "post_session_message", args)
            }
            Prepared::Resolve { at, target } => Request::new(
                *at,
                "resolve_session_message",
                json!({ "session_id": session_id, "message_id": self.id_of(*target) }),
            ),
            Prepared::GetAssignment { at, target } => Request::new(
                *at,
                "get_session_assignment",
                json!({ "session_id": session_id, "message_id": self.id_of(*target) }),
            ),
            Prepared::Complete {
                at,
                todo,
                fence,
                key,
                answer,
                ..
            } => Request::new(
                *at,
                "complete_session_message",
                json!({
                    "session_id": session_id,
                    "message_id": self.model.msgs[*todo].id,
                    "expected_assignment_fence": fence.token,
                    "completion_key": format!("key-{key}"),
                    "answer": ANSWERS[*answer as usize],
                }),
            ),
            Prepared::Ack {
                inst,
                carrier,
                picked,
            } => {
                let (tool, args) = match carrier {
                    Carrier::List => (
                        "list_session_messages",
                        json!({ "session_id": session_id, "limit": 1 }),
                    ),
                    Carrier::RuntimeStatus => ("runtime_status", json!({})),
                };
                let ids: Vec<String> = picked.iter().map(|&p| self.id_of(p)).collect();
                Request {
                    at: At {
                        inst: *inst,
                        surface: Surface::Mcp,
                    },
                    tool,
                    args,
                    wrapper: Some(json!({
                        "recording_session_id": session_id,
                        "ack_session_message_ids": ids,
                    })),
                }
            }
        })
    }

    /// Checks a prepared operation's result against the model and applies its effect to the
    /// model. `racing`: another operation ran at the same time, so projections that are not
    /// read in one snapshot with the change (`session_attention`) are not compared.
    fn verify(&mut self, p: &Prepared, r: &Value, racing: bool) -> Check<()> {
        match p {
            Prepared::Nothing => Ok(()),
            Prepared::Post {
                kind,
                parent,
                ack_required,
                priority,
                body,
                ..
            } => self.verify_post(*kind, *parent, *ack_required, *priority, body, r),
            Prepared::Resolve { target, .. } => self.verify_resolve(*target, r),
            Prepared::GetAssignment { target, .. } => self.verify_assignment(*target, r),
            Prepared::Complete {
                todo,
                fence,
                foreign,
                key,
                answer,
                ..
            } => self.verify_complete(*todo, fence, *foreign, *key, *answer, r),
            Prepared::Ack { picked, .. } => self.verify_ack(picked, r, racing),
        }
    }

    /// After the last operation: the whole board listed, the observer caught up, and a full
    /// observation of the case's history from the empty board.
    async fn finish(&mut self, n: usize) -> Check<()> {
        let _ = writeln!(self.trace, "  final checks");
        self.model.begin(n);
        let a = At {
            inst: Inst::A,
            surface: Surface::Mcp,
        };
        let b = At {
            inst: Inst::B,
            surface: Surface::Mcp,
        };
        self.list(a, Filter::All, Some(200)).await?;
        self.observe(b, 4, true, None, false).await?;
        // The full history: every message exactly once, in the order of its latest change.
        let (mut token, base) = self.origin.clone();
        ensure_eq!(
            self.last.session_rev - base,
            self.model.total_changes as i64,
            "the session revision counts every observable change of the case"
        );
        let mut seen: Vec<usize> = Vec::new();
        for page in 0.. {
            ensure!(page < 200, "the full observation never caught up");
            let at = if page % 2 == 0 { a } else { b };
            let r = self
                .env
                .call(
                    at,
                    "observe_session_messages",
                    json!({ "session_id": self.session_id, "token": token, "limit": 3 }),
                    None,
                )
                .await?;
            let out = output(&r, "full observation")?;
            for v in out["messages"].as_array().into_iter().flatten() {
                let id = text(&v["message_id"], "message_id")?;
                let i = *self
                    .model
                    .by_id
                    .get(&id)
                    .ok_or_else(|| format!("full observation: unknown message {id}"))?;
                ensure!(
                    !seen.contains(&i),
                    "full observation: #{} {id} returned twice",
                    i + 1
                );
                seen.push(i);
                self.model.check_view(i, v, "full observation")?;
            }
            token = text(&out["token"], "token")?;
            if out["has_more"] != true {
                break;
            }
        }
        ensure_eq!(
            seen.len(),
            self.model.msgs.len(),
            "full observation delivered {:?}",
            seen.iter().map(|i| i + 1).collect::<Vec<_>>()
        );
        let order: Vec<usize> = seen
            .iter()
            .map(|&i| self.model.msgs[i].changed_at)
            .collect();
        ensure!(
            order.windows(2).all(|w| w[0] <= w[1]),
            "full observation is not in the order of the latest changes: {:?} (ops {order:?})",
            seen.iter().map(|i| i + 1).collect::<Vec<_>>()
        );
        Ok(())
    }
}

pub(super) async fn run_case(
    env: &Env,
    n: u64,
    ops: &[Op],
    check_assignment_revisions: bool,
) -> Result<(), (String, String)> {
    let mut case = Case::start(env, n, check_assignment_revisions)
        .await
        .map_err(|e| (e, String::new()))?;
    for (i, op) in ops.iter().enumerate() {
        if let Err(e) = case.step(i, op).await {
            return Err((format!("op {i}: {e}"), case.trace));
        }
    }
    if let Err(e) = case.finish(ops.len()).await {
        return Err((format!("final check: {e}"), case.trace));
    }
    Ok(())
}
