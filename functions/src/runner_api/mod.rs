//! The runner API (`/runner/v1/*`): how runner agents register, receive work, keep leases,
//! stream output and report results. Runner tokens only ([`auth`]); every transition is a
//! guarded statement in `wc_store::work`, checked against the caller's current instance and
//! lease token. Wire types are `wc_runner_protocol`'s; errors are the usual
//! `{"error": {"kind", "message"}}` body with kinds `invalid_request`, `invalid_instance_id`,
//! `instance_replaced`, `unknown_work`, `output_beyond_limit`, `unauthorized`, and
//! `rate_limited` for a delivered work id whose caller already holds its share of the runner's
//! slots.

pub mod auth;

use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router, middleware};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::de::DeserializeOwned;
use uuid::Uuid;
use wc_runner_protocol::{
    self as proto, ClaimRequest, ClaimResponse, HeartbeatRequest, HeartbeatResponse,
    InventoryRequest, Lease, LeaseStatus, OutputChunk, OutputRequest, PollRequest, PollResponse,
    RegisterRequest, RegisterResponse, ReportResponse, ResultRequest,
};
use wc_store::runners::{self, Registered, Registration};
use wc_store::work::{self, Chunk, Claim, LeaseView, Report, WorkRow};

use crate::AppState;
use crate::http::ApiError;
pub use auth::RunnerPrincipal;

/// The runner API routes, behind runner-token authentication.
pub fn router(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/runner/v1/register", post(register))
        .route("/runner/v1/poll", post(poll))
        .route("/runner/v1/claim", post(claim))
        .route("/runner/v1/heartbeat", post(heartbeat))
        .route("/runner/v1/output", post(output))
        .route("/runner/v1/result", post(result))
        .route("/runner/v1/inventory", post(inventory))
        // The body is read only once the runner token was accepted.
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            crate::http::limits::read_body,
        ))
        .route_layer(middleware::from_fn_with_state(state, auth::require_runner))
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::client(StatusCode::BAD_REQUEST, "invalid_request", message)
}

fn replaced() -> ApiError {
    ApiError::client(
        StatusCode::CONFLICT,
        "instance_replaced",
        "this runner instance is not the registered one (a newer instance registered, or the runner was revoked); stop and re-register",
    )
}

fn unknown_work() -> ApiError {
    ApiError::client(
        StatusCode::NOT_FOUND,
        "unknown_work",
        "no such work for this runner",
    )
}

/// Parses a JSON body strictly, naming what was wrong.
fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| invalid(format!("malformed request: {e}")))
}

fn lease_ms(state: &AppState) -> u64 {
    state.deps.config.runner_lease.as_millis() as u64
}

/// How this server shares a runner's slots between callers (`WC_RUNNER_RESERVED_SLOTS`).
fn sharing(state: &AppState) -> work::SlotSharing {
    work::SlotSharing {
        reserved: state.deps.config.work.reserved_runner_slots as i32,
    }
}

/// How long a runner waits before offering a deferred delivery again.
const DEFERRED_RETRY: Duration = Duration::from_secs(5);

async fn current(state: &AppState, client_id: &str, instance: Uuid) -> Result<(), ApiError> {
    let client = state.deps.client().await?;
    // "Seen" is refreshed at most every quarter lease (at most once a second), so a busy runner
    // does not write its row per request and an idle one stays online.
    let every = (state.deps.config.runner_lease / 4).min(Duration::from_secs(1));
    if runners::touch(&client, client_id, instance, every).await? {
        Ok(())
    } else {
        Err(replaced())
    }
}

async fn register(
    State(state): State<AppState>,
    Extension(runner): Extension<RunnerPrincipal>,
    body: Bytes,
) -> Result<Json<RegisterResponse>, ApiError> {
    let req: RegisterRequest = parse(&body)?;
    if req.protocol_version != proto::PROTOCOL_VERSION {
        return Err(invalid(format!(
            "protocol version {} is not spoken here (this server speaks {})",
            req.protocol_version,
            proto::PROTOCOL_VERSION
        )));
    }
    if req.projects.len() > proto::MAX_PROJECTS {
        return Err(invalid(format!(
            "more than {} projects",
            proto::MAX_PROJECTS
        )));
    }
    if let Some(bad) = req.projects.iter().find(|p| !proto::valid_name(p)) {
        return Err(invalid(format!(
            "project id {bad:?} must be 1-64 of A-Z a-z 0-9 . _ -"
        )));
    }
    if req.agent_version.len() > 64 || !(1..=256).contains(&req.max_concurrency) {
        return Err(invalid(
            "agent_version ≤ 64 bytes and max_concurrency 1-256",
        ));
    }
    // The server's clock, not the database's: both are kept by NTP, and this check needs no
    // round trip.
    let now_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
    req.check_instance_id(now_ms).map_err(|e| {
        ApiError::client(
            StatusCode::BAD_REQUEST,
            "invalid_instance_id",
            e.to_string(),
        )
    })?;
    let queue = match req.queue {
        proto::QueueKind::ApiPoll => "api_poll",
        proto::QueueKind::Sqs => "sqs",
    };
    let work_kinds: Vec<String> = req
        .work_kinds
        .iter()
        .map(|k| k.as_str().to_owned())
        .collect();
    let got = runners::register(
        &state.deps.pool,
        &Registration {
            client_id: &runner.client_id,
            instance_id: req.instance_id,
            agent_version: &req.agent_version,
            queue,
            max_concurrency: req.max_concurrency as i32,
            projects: &req.projects,
            work_kinds: &work_kinds,
        },
        &*state.deps.work_ends,
    )
    .await?;
    match got {
        Registered::Superseded => Err(replaced()),
        Registered::Current { lost_work } => {
            tracing::info!(client_id = %runner.client_id, instance_id = %req.instance_id, lost_work, "runner registered");
            Ok(Json(RegisterResponse {
                protocol_version: proto::PROTOCOL_VERSION,
                client_id: runner.client_id,
                lost_work,
                lease_ms: lease_ms(&state),
                heartbeat_interval_ms: state.deps.config.runner_heartbeat().as_millis() as u64,
            }))
        }
    }
}

fn lease_of(row: &WorkRow, lease_ms: u64) -> Result<Lease, ApiError> {
    Ok(Lease {
        work: row.item.clone(),
        lease_token: row
            .lease_token
            .ok_or_else(|| ApiError::internal(anyhow::anyhow!("leased work without a token")))?,
        lease_ms,
    })
}

async fn poll(
    State(state): State<AppState>,
    Extension(runner): Extension<RunnerPrincipal>,
    body: Bytes,
) -> Result<Json<PollResponse>, ApiError> {
    let req: PollRequest = parse(&body)?;
    if req.wait_ms > proto::MAX_POLL_WAIT_MS {
        return Err(invalid(format!(
            "wait_ms must be at most {}",
            proto::MAX_POLL_WAIT_MS
        )));
    }
    if !(1..=proto::MAX_POLL_ITEMS).contains(&req.max_items) {
        return Err(invalid(format!(
            "max_items must be 1-{}",
            proto::MAX_POLL_ITEMS
        )));
    }
    current(&state, &runner.client_id, req.instance_id).await?;
    // An idle runner must come back within the lease to stay "online": half a lease at most.
    let wait = Duration::from_millis(req.wait_ms).min(state.deps.config.runner_lease / 2);
    let deadline = Instant::now() + wait;
    // Registered before the first read, so a hint in between is not missed.
    let mut waiter = state.deps.wake.on_queued(&runner.client_id);
    let lease = lease_ms(&state);
    loop {
        let rows = {
            let client = state.deps.client().await?;
            work::claim_queued(
                &client,
                &runner.client_id,
                req.instance_id,
                i64::from(req.max_items),
                lease,
                sharing(&state),
            )
            .await?
        };
        if !rows.is_empty() {
            let leases = rows
                .iter()
                .map(|r| lease_of(r, lease))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Json(PollResponse { leases }));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            // Nothing claimed: either no work, or this instance was replaced meanwhile.
            current(&state, &runner.client_id, req.instance_id).await?;
            return Ok(Json(PollResponse { leases: Vec::new() }));
        }
        waiter.wait(left).await;
    }
}

async fn claim(
    State(state): State<AppState>,
    Extension(runner): Extension<RunnerPrincipal>,
    body: Bytes,
) -> Result<Json<ClaimResponse>, ApiError> {
    let req: ClaimRequest = parse(&body)?;
    current(&state, &runner.client_id, req.instance_id).await?;
    let client = state.deps.client().await?;
    let lease = lease_ms(&state);
    match work::claim_one(
        &client,
        &runner.client_id,
        req.instance_id,
        req.work_id,
        lease,
        sharing(&state),
    )
    .await?
    {
        Claim::Claimed(row) => Ok(Json(ClaimResponse::Claimed {
            lease: Box::new(lease_of(&row, lease)?),
        })),
        Claim::AlreadyClaimed(state) => Ok(Json(ClaimResponse::AlreadyClaimed { state })),
        Claim::NotFound => Err(unknown_work()),
        // The owner holds its share of this runner's slots: the message is left to come back
        // after its visibility timeout, while other callers' work takes the free slots.
        Claim::Deferred => Err(ApiError::client(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            "the work's caller holds its share of this runner's slots; leave the message to be delivered again",
        )
        .with_retry_after(DEFERRED_RETRY)),
    }
}

async fn extend(
    state: &AppState,
    runner: &RunnerPrincipal,
    instance: Uuid,
    leases: &[proto::HeldLease],
) -> Result<HeartbeatResponse, ApiError> {
    if leases.len() > proto::MAX_HELD_LEASES {
        return Err(invalid(format!(
            "more than {} leases",
            proto::MAX_HELD_LEASES
        )));
    }
    current(state, &runner.client_id, instance).await?;
    let pairs: Vec<(Uuid, Uuid)> = leases.iter().map(|l| (l.work_id, l.lease_token)).collect();
    let client = state.deps.client().await?;
    let lease = lease_ms(state);
    let views = work::heartbeat(&client, &runner.client_id, instance, &pairs, lease).await?;
    Ok(HeartbeatResponse {
        leases: views
            .into_iter()
            .map(|(id, v)| (id, lease_status(v)))
            .collect(),
        lease_ms: lease,
    })
}

async fn heartbeat(
    State(state): State<AppState>,
    Extension(runner): Extension<RunnerPrincipal>,
    body: Bytes,
) -> Result<Json<HeartbeatResponse>, ApiError> {
    let req: HeartbeatRequest = parse(&body)?;
    if req.wait_ms > proto::MAX_POLL_WAIT_MS {
        return Err(invalid(format!(
            "wait_ms must be at most {}",
            proto::MAX_POLL_WAIT_MS
        )));
    }
    // Registered before extending, so a stop request in between is not missed.
    let mut waiter = state.deps.wake.on_queued(&runner.client_id);
    let mut resp = extend(&state, &runner, req.instance_id, &req.leases).await?;
    let deadline = Instant::now() + Duration::from_millis(req.wait_ms);
    let pairs: Vec<(Uuid, Uuid)> = req
        .leases
        .iter()
        .map(|l| (l.work_id, l.lease_token))
        .collect();
    // Wait for news about these leases: a stop request, or a lease that ended.
    while resp.leases.iter().all(|(_, s)| *s == LeaseStatus::Extended) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || pairs.is_empty() {
            break;
        }
        waiter.wait(left).await;
        let client = state.deps.client().await?;
        let views = work::lease_views(&client, &runner.client_id, req.instance_id, &pairs).await?;
        resp.leases = views
            .into_iter()
            .map(|(id, v)| (id, lease_status(v)))
            .collect();
    }
    Ok(Json(resp))
}

fn lease_status(v: LeaseView) -> LeaseStatus {
    match v {
        LeaseView::Extended => LeaseStatus::Extended,
        LeaseView::CancelRequested => LeaseStatus::CancelRequested,
        LeaseView::Lost => LeaseStatus::Lost,
    }
}

async fn inventory(
    State(state): State<AppState>,
    Extension(runner): Extension<RunnerPrincipal>,
    body: Bytes,
) -> Result<Json<HeartbeatResponse>, ApiError> {
    let req: InventoryRequest = parse(&body)?;
    Ok(Json(
        extend(&state, &runner, req.instance_id, &req.running).await?,
    ))
}

/// Decodes and bounds chunks: at most 16, each 1..=64 KiB of base64-decoded bytes, inside the
/// largest per-stream bound. The work's own (smaller) limit is checked by the store.
fn chunks(raw: &[OutputChunk]) -> Result<Vec<Chunk>, ApiError> {
    if raw.len() > proto::MAX_CHUNKS_PER_REQUEST {
        return Err(invalid(format!(
            "more than {} chunks in one request",
            proto::MAX_CHUNKS_PER_REQUEST
        )));
    }
    raw.iter()
        .enumerate()
        .map(|(i, c)| {
            let data = STANDARD
                .decode(&c.data)
                .map_err(|e| invalid(format!("chunks[{i}].data is not base64: {e}")))?;
            if data.is_empty() || data.len() > proto::MAX_CHUNK_BYTES {
                return Err(invalid(format!(
                    "chunks[{i}] must carry 1-{} bytes",
                    proto::MAX_CHUNK_BYTES
                )));
            }
            if c.offset + data.len() as u64 > proto::MAX_OUTPUT_BYTES_PER_STREAM {
                return Err(invalid(format!("chunks[{i}] lies beyond any output limit")));
            }
            Ok(Chunk {
                stream: match c.stream {
                    proto::Stream::Stdout => "stdout",
                    proto::Stream::Stderr => "stderr",
                },
                offset: c.offset as i64,
                data,
            })
        })
        .collect()
}

fn report(r: Report) -> Result<Json<ReportResponse>, ApiError> {
    match r {
        Report::Accepted(state) => Ok(Json(ReportResponse::Accepted { state })),
        Report::LeaseLost(state) => Ok(Json(ReportResponse::LeaseLost { state })),
        Report::BeyondLimit => Err(ApiError::client(
            StatusCode::BAD_REQUEST,
            "output_beyond_limit",
            "a chunk lies beyond the work's output limit",
        )),
        Report::NotFound => Err(unknown_work()),
    }
}

async fn output(
    State(state): State<AppState>,
    Extension(runner): Extension<RunnerPrincipal>,
    body: Bytes,
) -> Result<Json<ReportResponse>, ApiError> {
    let req: OutputRequest = parse(&body)?;
    let chunks = chunks(&req.chunks)?;
    let client = state.deps.client().await?;
    report(
        work::append_output(
            &client,
            &runner.client_id,
            req.instance_id,
            req.lease.work_id,
            req.lease.lease_token,
            &chunks,
        )
        .await?,
    )
}

async fn result(
    State(state): State<AppState>,
    Extension(runner): Extension<RunnerPrincipal>,
    body: Bytes,
) -> Result<Json<ReportResponse>, ApiError> {
    let req: ResultRequest = parse(&body)?;
    let chunks = chunks(&req.chunks)?;
    if req.outcome.error.as_ref().is_some_and(|e| e.len() > 1000) {
        return Err(invalid("outcome.error must be at most 1000 bytes"));
    }
    let terminal = req.outcome.state();
    let mut outcome = req.outcome;
    // The answer is stored apart from the outcome (which stays small for every other read).
    let answer = outcome.answer.take();
    if let Some(answer) = &answer {
        // A validation is answered whatever its exit status; other work only on success.
        let answerable = match answer {
            proto::WorkAnswer::Validate(_) => outcome.termination == proto::Termination::Exited,
            _ => terminal == wc_domain::WorkState::Succeeded,
        };
        if !answerable {
            return Err(invalid(
                "only work that succeeded (or a validation that exited) carries an answer",
            ));
        }
        answer
            .validate()
            .map_err(|e| invalid(format!("outcome.answer: {e}")))?;
    }
    if outcome.error_kind.is_some() && outcome.termination != proto::Termination::Rejected {
        return Err(invalid("only rejected work carries an error_kind"));
    }
    let answer = answer
        .map(|a| serde_json::to_value(&a))
        .transpose()
        .map_err(ApiError::internal)?;
    let mut client = state.deps.client().await?;
    report(
        work::finish(
            &mut client,
            &runner.client_id,
            req.instance_id,
            req.lease.work_id,
            req.lease.lease_token,
            terminal,
            &outcome,
            answer.as_ref(),
            &chunks,
            &*state.deps.work_ends,
        )
        .await?,
    )
}
