//! The agent: register, receive work, run it, keep its leases, report it.
//!
//! One task per concern: the receive loop (long-poll or SQS), the heartbeat loop, and one task
//! per work item (execution, output flushing, the result report). Shutdown has two levels:
//! [`Stop::Drain`] stops taking work and lets running work finish while heartbeating;
//! [`Stop::Now`] cancels running work (SIGINT → SIGTERM → SIGKILL on each process group),
//! reports it cancelled, and exits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use uuid::Uuid;
use wc_retry::{Backoff, Jitter};
use wc_runner_protocol::{
    self as proto, HeartbeatRequest, HeartbeatResponse, HeldLease, InventoryRequest, Lease,
    LeaseStatus, OutputChunk, OutputRequest, PollRequest, PollResponse, RegisterRequest,
    RegisterResponse, ReportResponse, ResultRequest, Stream, WorkOutcome, WorkSpec,
};

use crate::client::{Api, ApiFailure};
use crate::config::{QueueBackend, RunnerConfig};
use crate::edit;
use crate::exec::{self, OutputPiece, StopPolicy};
use crate::explore;
use crate::git;
use crate::shell::Shells;
use crate::sqs::{Delivery, ReceiveSettings, SqsQueue};
use crate::validate;

/// How far the agent is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stop {
    /// Keep running.
    Run,
    /// Take no new work; finish running work, then exit.
    Drain,
    /// Cancel running work, report it, exit.
    Now,
}

/// Why the agent ended other than by being asked to.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The token was refused.
    #[error("{0}")]
    Unauthorized(String),
    /// A newer instance of this runner took over.
    #[error("{0}")]
    Replaced(String),
    /// The server refused the registration (protocol version, bad configuration).
    #[error("registration refused: {0}")]
    Refused(String),
    /// Jobs would be sandboxed and the sandbox cannot run here; nothing was registered.
    #[error("{0}")]
    SandboxUnusable(crate::sandbox::SandboxError),
    /// Setting up failed.
    #[error("{0}")]
    Setup(String),
}

/// Knobs tests shorten.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// Stop escalation timing.
    pub stop_policy: StopPolicy,
    /// Long-poll wait (the API poll, or SQS `WaitTimeSeconds`, whole seconds up to 20).
    pub poll_wait: Duration,
    /// Longest reconnect backoff.
    pub max_backoff: Duration,
    /// Longest time between output flushes of running work.
    pub flush_interval: Duration,
    /// How long a received SQS message stays hidden (whole seconds); extended every third of
    /// it while its work runs.
    pub sqs_visibility: Duration,
    /// Fixed SQS credentials instead of the default AWS chain (tests against a local server).
    pub sqs_credentials: Option<aws_sdk_sqs::config::Credentials>,
}

impl Default for AgentOptions {
    fn default() -> Self {
        Self {
            stop_policy: StopPolicy::default(),
            poll_wait: Duration::from_secs(20),
            max_backoff: Duration::from_secs(30),
            flush_interval: Duration::from_secs(1),
            sqs_visibility: Duration::from_secs(60),
            sqs_credentials: None,
        }
    }
}

impl AgentOptions {
    /// How the agent retries a call the server could not answer: delays doubling from 200 ms
    /// up to [`Self::max_backoff`], each at least half its bound, so runners that lost the
    /// server together come back spread out.
    fn reconnect(&self) -> Backoff {
        Backoff::new(Duration::from_millis(200), self.max_backoff).with_jitter(Jitter::UpToOneIn(2))
    }

    /// What the SQS receiver needs of these options.
    fn sqs_settings(&self) -> ReceiveSettings {
        ReceiveSettings {
            wait: self.poll_wait,
            visibility: self.sqs_visibility,
            credentials: self.sqs_credentials.clone(),
        }
    }
}

/// Shortest life of a waiting heartbeat before new work re-issues it.
const REISSUE_AFTER: Duration = Duration::from_secs(1);

/// Kept output buffered before an output request is sent.
const FLUSH_BYTES: usize = 256 * 1024;

/// Work running here: its lease and how to cancel it.
struct Running {
    token: Uuid,
    cancel: watch::Sender<bool>,
}

type Held = Arc<Mutex<HashMap<Uuid, Running>>>;

/// Work received: its lease and, from SQS, the message that delivered it.
struct Received {
    lease: Lease,
    delivery: Option<Delivery>,
}

struct Shared {
    api: Api,
    /// The SQS queue, when work arrives that way.
    sqs: Option<SqsQueue>,
    cfg: RunnerConfig,
    /// What every execution shares (projects, environment, sandbox).
    host: Arc<exec::Host>,
    /// The persistent shells this instance opened; all closed when it stops or is replaced.
    shells: Arc<Shells>,
    opts: AgentOptions,
    instance_id: Uuid,
    held: Held,
    /// Set when the agent must end with an error (replaced, unauthorized).
    fatal: Mutex<Option<AgentError>>,
    fatal_tx: watch::Sender<bool>,
    /// Signalled when work starts, so the heartbeat covers its lease soon.
    held_changed: tokio::sync::Notify,
}

impl Shared {
    fn fail(&self, e: AgentError) {
        // A replaced instance's shells are no longer anyone's: the server made them `lost`.
        if matches!(e, AgentError::Replaced(_)) {
            self.shells.close_all();
        }
        let mut f = self.fatal.lock().expect("fatal poisoned");
        if f.is_none() {
            tracing::error!(error = %e, "runner stopping");
            *f = Some(e);
        }
        let _ = self.fatal_tx.send(true);
    }

    fn cancel_all(&self) {
        for r in self.held.lock().expect("held poisoned").values() {
            let _ = r.cancel.send(true);
        }
    }

    fn held_leases(&self) -> Vec<HeldLease> {
        self.held
            .lock()
            .expect("held poisoned")
            .iter()
            .map(|(id, r)| HeldLease {
                work_id: *id,
                lease_token: r.token,
            })
            .collect()
    }
}

/// The kinds of work this host executes: explore and edit work only where they can be
/// confined, Git work only where it can be confined and `git` is found; jobs, validation and
/// persistent shells everywhere (they are confined by the sandbox, like every job).
fn work_kinds() -> Vec<proto::WorkKind> {
    let confined = crate::explore::supported();
    proto::WorkKind::ALL
        .iter()
        .copied()
        .filter(|k| !matches!(k, proto::WorkKind::Explore | proto::WorkKind::Edit) || confined)
        .filter(|k| {
            !matches!(k, proto::WorkKind::Git | proto::WorkKind::Workspace)
                || crate::git::supported()
        })
        .collect()
}

async fn register(
    api: &Api,
    cfg: &RunnerConfig,
    host: &exec::Host,
    instance_id: Uuid,
    opts: &AgentOptions,
    stop: &mut watch::Receiver<Stop>,
) -> Result<Option<RegisterResponse>, AgentError> {
    let req = RegisterRequest {
        protocol_version: proto::PROTOCOL_VERSION,
        instance_id,
        projects: host.project_ids(),
        agent_version: env!("CARGO_PKG_VERSION").into(),
        queue: match cfg.queue {
            QueueBackend::ApiPoll => proto::QueueKind::ApiPoll,
            QueueBackend::Sqs => proto::QueueKind::Sqs,
        },
        max_concurrency: cfg.limits.max_concurrency as u32,
        work_kinds: work_kinds(),
    };
    let mut retries = opts.reconnect().retries();
    loop {
        match api
            .call::<_, RegisterResponse>("register", &req, Duration::from_secs(30))
            .await
        {
            Ok(r) => return Ok(Some(r)),
            Err(ApiFailure::Unauthorized(m)) => {
                return Err(AgentError::Unauthorized(format!(
                    "the runner token was refused ({m}); create a new one with `wc-admin runner create`"
                )));
            }
            Err(ApiFailure::Replaced(m)) => return Err(AgentError::Replaced(m)),
            Err(ApiFailure::Refused { kind, message }) => {
                return Err(AgentError::Refused(format!("{kind}: {message}")));
            }
            Err(e) => {
                let wait = retries.wait_after_failure();
                tracing::warn!(error = %e, retry_ms = wait.as_millis() as u64, "cannot register; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.changed() => {
                        if *stop.borrow() != Stop::Run { return Ok(None); }
                    }
                }
            }
        }
    }
}

/// Runs the agent until `stop` asks it to end (or a fatal condition).
pub async fn run(
    mut cfg: RunnerConfig,
    opts: AgentOptions,
    mut stop: watch::Receiver<Stop>,
) -> Result<(), AgentError> {
    // Jobs never run in a sandbox that does not work: refuse to start instead.
    cfg.sandbox.prepare();
    let sandbox = cfg.sandbox.clone();
    tokio::task::spawn_blocking(move || sandbox.probe())
        .await
        .map_err(|e| AgentError::Setup(format!("cannot probe the sandbox: {e}")))?
        .map_err(AgentError::SandboxUnusable)?;
    tracing::info!(sandbox = %cfg.sandbox.describe(), "jobs are confined");
    let bounds = crate::cgroup::describe();
    if crate::cgroup::bounds_every_job() {
        tracing::info!(bounds = %bounds, "jobs are bounded");
    } else {
        tracing::warn!(bounds = %bounds, "jobs are not bounded in every resource");
    }
    tokio::task::spawn_blocking(crate::cgroup::sweep_orphans)
        .await
        .map_err(|e| AgentError::Setup(format!("cannot sweep old job cgroups: {e}")))?;
    let sqs = match cfg.queue {
        QueueBackend::Sqs => {
            let url = cfg
                .sqs_queue_url
                .clone()
                .ok_or_else(|| AgentError::Setup("queue = \"sqs\" needs sqs_queue_url".into()))?;
            Some(SqsQueue::connect(url, &cfg, &opts.sqs_settings()).await)
        }
        QueueBackend::ApiPoll => None,
    };
    let api = Api::new(&cfg.server_url, cfg.token.clone())
        .map_err(|e| AgentError::Setup(e.to_string()))?;
    let instance_id = Uuid::now_v7();
    let host = Arc::new(exec::Host::from_config(&cfg));
    let Some(reg) = register(&api, &cfg, &host, instance_id, &opts, &mut stop).await? else {
        return Ok(());
    };
    tracing::info!(
        client_id = %reg.client_id, %instance_id, lost_work = reg.lost_work,
        projects = host.project_ids().len(), "runner registered"
    );
    let (fatal_tx, mut fatal_rx) = watch::channel(false);
    // Before any work runs: what an earlier runner's edits left half-written goes.
    let sweeping = host.clone();
    let _ = tokio::task::spawn_blocking(move || {
        for project in sweeping.project_ids() {
            let project = project.as_str();
            match crate::edit::sweep_leftovers(&sweeping, project) {
                Ok(0) => {}
                Ok(n) => tracing::info!(project, removed = n, "removed edits' leftover files"),
                Err(e) => {
                    tracing::warn!(project, error = %e, "cannot sweep edits' leftover files")
                }
            }
        }
    })
    .await;
    let shells = Arc::new(Shells::new(host.clone(), instance_id, opts.stop_policy));
    let shared = Arc::new(Shared {
        api,
        sqs,
        host,
        shells,
        cfg,
        opts,
        instance_id,
        held: Arc::default(),
        fatal: Mutex::new(None),
        fatal_tx,
        held_changed: tokio::sync::Notify::new(),
    });
    let slots = Arc::new(Semaphore::new(shared.cfg.limits.max_concurrency));
    let mut work: JoinSet<()> = JoinSet::new();
    let heartbeat = tokio::spawn(heartbeat_loop(
        shared.clone(),
        Duration::from_millis(reg.heartbeat_interval_ms.max(100)),
    ));

    // Receive until asked to stop or failed.
    loop {
        if *stop.borrow() != Stop::Run || *fatal_rx.borrow() {
            break;
        }
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.expect("semaphore closed"),
            _ = stop.changed() => continue,
            _ = fatal_rx.changed() => continue,
        };
        let free = slots.available_permits() as u32 + 1;
        let received = tokio::select! {
            r = receive(&shared, free) => r,
            _ = stop.changed() => { drop(permit); continue }
            _ = fatal_rx.changed() => { drop(permit); continue }
        };
        match received {
            Ok(received) => {
                let mut permit = Some(permit);
                for r in received {
                    let p = match permit.take() {
                        Some(p) => p,
                        None => slots
                            .clone()
                            .try_acquire_owned()
                            .expect("the poll asked for no more than the free slots"),
                    };
                    let shared = shared.clone();
                    work.spawn(async move {
                        let hidden = r.delivery.as_ref().map(Delivery::keep_hidden);
                        let settled = run_one(shared, r.lease).await;
                        drop(hidden);
                        if let Some(d) = r.delivery {
                            d.finish(settled).await;
                        }
                        drop(p);
                    });
                }
            }
            Err(e) => {
                drop(permit);
                if !e.is_retryable() {
                    shared.fail(match e {
                        ApiFailure::Unauthorized(m) => AgentError::Unauthorized(format!(
                            "the runner token was refused ({m}); stopping"
                        )),
                        ApiFailure::Replaced(m) => AgentError::Replaced(m),
                        other => AgentError::Refused(other.to_string()),
                    });
                    break;
                }
                tracing::warn!(error = %e, "receive failed; retrying");
                // The receive loop is the retry: every failed receive waits a second retry's
                // delay.
                tokio::time::sleep(shared.opts.reconnect().delay(2)).await;
            }
        }
        // Reap finished work tasks without waiting.
        while work.try_join_next().is_some() {}
    }

    // Stopping: Now (or fatal) cancels running work; Drain lets it finish, escalating to Now
    // if asked again.
    if *stop.borrow() == Stop::Now || *fatal_rx.borrow() {
        shared.cancel_all();
    }
    loop {
        tokio::select! {
            next = work.join_next() => if next.is_none() { break },
            _ = stop.changed() => {
                if *stop.borrow() == Stop::Now { shared.cancel_all(); }
            }
        }
    }
    heartbeat.abort();
    // Running shell work has ended above; the shells it left end with the runner.
    shared.shells.close_all();
    match shared.fatal.lock().expect("fatal poisoned").take() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

async fn receive(shared: &Shared, free: u32) -> Result<Vec<Received>, ApiFailure> {
    if let Some(queue) = &shared.sqs {
        let claimed = queue.receive(&shared.api, shared.instance_id, free).await?;
        return Ok(claimed
            .into_iter()
            .map(|(lease, d)| Received {
                lease,
                delivery: Some(d),
            })
            .collect());
    }
    let req = PollRequest {
        instance_id: shared.instance_id,
        wait_ms: shared.opts.poll_wait.as_millis() as u64,
        max_items: free.clamp(1, proto::MAX_POLL_ITEMS),
    };
    let resp: PollResponse = shared
        .api
        .call(
            "poll",
            &req,
            shared.opts.poll_wait + Duration::from_secs(15),
        )
        .await?;
    Ok(resp
        .leases
        .into_iter()
        .map(|lease| Received {
            lease,
            delivery: None,
        })
        .collect())
}

/// Heartbeats every `interval`, each call waiting server-side for a stop request or a lost
/// lease, so stops reach running work at once. Leases are extended at the start of each call.
async fn heartbeat_loop(shared: Arc<Shared>, interval: Duration) {
    let mut failed = false;
    let mut retries = shared.opts.reconnect().retries();
    loop {
        let mut leases = shared.held_leases();
        if leases.is_empty() && !failed {
            // Nothing to extend: wait for work to start. The poll keeps a polling runner seen;
            // an SQS runner never polls, so an idle heartbeat (no leases) keeps it seen.
            let work_started = tokio::select! {
                _ = shared.held_changed.notified() => true,
                _ = tokio::time::sleep(interval) => false,
            };
            if work_started || shared.sqs.is_none() {
                continue;
            }
            leases = shared.held_leases();
        }
        let started = std::time::Instant::now();
        // After a failure the first successful call is an inventory: what still runs here.
        let inventory = failed;
        let call = async {
            if inventory {
                let req = InventoryRequest {
                    instance_id: shared.instance_id,
                    running: leases,
                };
                shared
                    .api
                    .call("inventory", &req, Duration::from_secs(15))
                    .await
            } else {
                let wait = Jitter::UpToOneIn(5).apply(interval);
                let req = HeartbeatRequest {
                    instance_id: shared.instance_id,
                    leases,
                    wait_ms: wait.as_millis() as u64,
                };
                shared
                    .api
                    .call("heartbeat", &req, wait + Duration::from_secs(15))
                    .await
            }
        };
        tokio::pin!(call);
        // New work re-issues the waiting call with the new lease set, at most once a second.
        let result: Result<HeartbeatResponse, ApiFailure> = tokio::select! {
            r = &mut call => r,
            _ = shared.held_changed.notified() => {
                let rest = REISSUE_AFTER.saturating_sub(started.elapsed());
                tokio::select! {
                    r = &mut call => r,
                    _ = tokio::time::sleep(rest) => continue,
                }
            }
        };
        match result {
            Ok(resp) => {
                failed = false;
                retries.reset();
                let mut news = false;
                {
                    let held = shared.held.lock().expect("held poisoned");
                    for (id, status) in resp.leases {
                        if let Some(r) = held.get(&id)
                            && status != LeaseStatus::Extended
                        {
                            tracing::info!(work_id = %id, ?status, "stopping work");
                            let _ = r.cancel.send(true);
                            news = true;
                        }
                    }
                }
                if news {
                    // The stopped work stays held until it ends; the server would answer the
                    // next call at once with the same news.
                    tokio::time::sleep(Duration::from_millis(500).min(interval)).await;
                }
            }
            Err(ApiFailure::Unauthorized(m)) => {
                shared.fail(AgentError::Unauthorized(format!(
                    "the runner token was refused ({m}); stopping"
                )));
                shared.cancel_all();
                return;
            }
            Err(ApiFailure::Replaced(m)) => {
                shared.fail(AgentError::Replaced(m));
                shared.cancel_all();
                return;
            }
            Err(e) => {
                failed = true;
                let wait = retries.wait_after_failure().min(interval);
                tracing::warn!(error = %e, retry_ms = wait.as_millis() as u64, "heartbeat failed");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// Merges executor pieces into protocol chunks of at most `MAX_CHUNK_BYTES`.
#[derive(Default)]
struct Pending {
    chunks: Vec<(Stream, u64, Vec<u8>)>,
    bytes: usize,
}

impl Pending {
    fn push(&mut self, p: OutputPiece) {
        self.bytes += p.data.len();
        if let Some((s, off, data)) = self.chunks.iter_mut().rev().find(|c| c.0 == p.stream)
            && *s == p.stream
            && *off + data.len() as u64 == p.offset
            && data.len() + p.data.len() <= proto::MAX_CHUNK_BYTES
        {
            data.extend_from_slice(&p.data);
            return;
        }
        self.chunks.push((p.stream, p.offset, p.data));
    }

    fn take(&mut self, max: usize) -> Vec<OutputChunk> {
        let n = self.chunks.len().min(max);
        let taken: Vec<_> = self.chunks.drain(..n).collect();
        self.bytes -= taken.iter().map(|c| c.2.len()).sum::<usize>();
        taken
            .into_iter()
            .map(|(stream, offset, data)| OutputChunk {
                stream,
                offset,
                data: STANDARD.encode(data),
            })
            .collect()
    }
}

/// Attempts of one report: nine, a bounded time, while its lease might still be alive.
const REPORT_ATTEMPTS: u32 = 9;

/// Retries a report while it is retryable and the lease might still be alive.
async fn report<Req: serde::Serialize>(
    shared: &Shared,
    op: &str,
    req: &Req,
    work_id: Uuid,
) -> Option<ReportResponse> {
    let policy = shared.opts.reconnect().with_max_attempts(REPORT_ATTEMPTS);
    let call = || async {
        let answer = shared
            .api
            .call::<_, ReportResponse>(op, req, Duration::from_secs(30))
            .await;
        if let Err(e) = &answer {
            tracing::warn!(%work_id, op, error = %e, "report failed");
        }
        answer
    };
    match wc_retry::retry(&policy, ApiFailure::is_retryable, call).await {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::error!(%work_id, op, error = %e, "report not delivered");
            None
        }
    }
}

/// Runs leased work and reports it; returns whether the server settled the result (accepted
/// it, or answered that the lease was lost).
async fn run_one(shared: Arc<Shared>, lease: Lease) -> bool {
    let work_id = lease.work.work_id;
    let held = HeldLease {
        work_id,
        lease_token: lease.lease_token,
    };
    let (cancel_tx, cancel_rx) = watch::channel(false);
    shared.held.lock().expect("held poisoned").insert(
        work_id,
        Running {
            token: lease.lease_token,
            cancel: cancel_tx,
        },
    );
    shared.held_changed.notify_one();
    let (out_tx, mut out_rx) = mpsc::channel::<OutputPiece>(64);
    let exec = {
        let item = lease.work.clone();
        let host = shared.host.clone();
        let identity = shared.cfg.git.clone();
        let shells = shared.shells.clone();
        let policy = shared.opts.stop_policy;
        // On a runtime worker: the unsandboxed child's death signal follows the spawning thread.
        tokio::spawn(async move {
            match item.spec {
                // Answered in this process; its output channel closes at once.
                WorkSpec::Explore(_) => {
                    drop(out_tx);
                    explore::execute(&item, &host, cancel_rx, &policy).await
                }
                WorkSpec::Edit(_) => {
                    drop(out_tx);
                    edit::execute(&item, &host, cancel_rx).await
                }
                WorkSpec::Git(_) => {
                    drop(out_tx);
                    git::execute(&item, &host, &identity, cancel_rx, &policy).await
                }
                WorkSpec::Validate(_) => {
                    validate::execute(&item, &host, cancel_rx, out_tx, &policy).await
                }
                // Answered in this process, output in the answer.
                WorkSpec::PersistentShell(_) => {
                    drop(out_tx);
                    shells.execute(&item, cancel_rx).await
                }
                WorkSpec::Workspace(_) => {
                    drop(out_tx);
                    crate::workspace::execute(&item, &host, cancel_rx, &policy).await
                }
                _ => exec::execute(&item, &host, cancel_rx, out_tx, &policy).await,
            }
        })
    };
    let mut pending = Pending::default();
    let mut tick = tokio::time::interval(shared.opts.flush_interval);
    tick.tick().await;
    // Drain output while the work runs; flush on size or time. Short work sends everything
    // with its result, in one request.
    loop {
        let flush_now = tokio::select! {
            piece = out_rx.recv() => match piece {
                Some(p) => {
                    pending.push(p);
                    pending.bytes >= FLUSH_BYTES
                }
                None => break,
            },
            _ = tick.tick() => !pending.chunks.is_empty(),
        };
        if flush_now {
            flush(&shared, &held, &mut pending).await;
        }
    }
    let outcome: WorkOutcome = match exec.await {
        Ok(o) => o,
        Err(e) => WorkOutcome {
            error: Some(format!("the executor failed: {e}")),
            ..WorkOutcome::ended(proto::Termination::SpawnFailed)
        },
    };
    // Everything but the last request's worth goes out as output first.
    while pending.chunks.len() > proto::MAX_CHUNKS_PER_REQUEST {
        flush(&shared, &held, &mut pending).await;
    }
    let req = ResultRequest {
        instance_id: shared.instance_id,
        lease: held,
        outcome,
        chunks: pending.take(proto::MAX_CHUNKS_PER_REQUEST),
    };
    let settled = match report(&shared, "result", &req, work_id).await {
        Some(ReportResponse::Accepted { state }) => {
            tracing::info!(%work_id, ?state, "work reported");
            true
        }
        Some(ReportResponse::LeaseLost { state }) => {
            tracing::warn!(%work_id, ?state, "result refused: the lease was lost");
            true
        }
        None => false,
    };
    shared.held.lock().expect("held poisoned").remove(&work_id);
    settled
}

async fn flush(shared: &Shared, held: &HeldLease, pending: &mut Pending) {
    let chunks = pending.take(proto::MAX_CHUNKS_PER_REQUEST);
    if chunks.is_empty() {
        return;
    }
    let req = OutputRequest {
        instance_id: shared.instance_id,
        lease: *held,
        chunks,
    };
    if let Some(ReportResponse::LeaseLost { .. }) =
        report(shared, "output", &req, held.work_id).await
        && let Some(r) = shared
            .held
            .lock()
            .expect("held poisoned")
            .get(&held.work_id)
    {
        // The lease is gone: the result would be refused, so stop the work now.
        let _ = r.cancel.send(true);
    }
}
