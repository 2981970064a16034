//! What one process admits at once: how many requests it serves, how many request-body bytes
//! it holds, and how long a body may take to arrive.
//!
//! A body is read only after its caller was authenticated ([`read_body`] sits inside each
//! route group's authentication), so a caller without a valid token costs a header parse and
//! a credential lookup, never a buffer. The limits are admission control for this process's
//! memory and tasks, not a correctness mechanism: nothing durable depends on them, and every
//! instance has its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ApiError;
use super::body_buffer::BodyBuffer;
use crate::limits::RequestLimits;

/// How long a refused caller is told to wait before retrying.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Path prefix of the runner API, admitted separately from callers (see [`Admission`]).
const RUNNER_PREFIX: &str = "/runner/";

/// The process's admission state, built once from the configuration.
///
/// Runner-API requests have their own request budget: a flood of tool calls never keeps a
/// runner from heartbeating its leases (which would end running work as `lost`).
#[derive(Debug)]
pub struct Admission {
    max_body_bytes: usize,
    limits: RequestLimits,
    callers: Arc<Semaphore>,
    runners: Arc<Semaphore>,
    body_bytes: Arc<Semaphore>,
    per_caller: Arc<Mutex<HashMap<String, Held>>>,
}

/// What one caller holds of this process now.
#[derive(Debug, Default, Clone, Copy)]
struct Held {
    requests: usize,
    listens: usize,
}

impl Admission {
    /// Admission of bodies of at most `max_body_bytes` under `limits`.
    pub fn new(max_body_bytes: usize, limits: RequestLimits) -> Self {
        Self {
            max_body_bytes,
            callers: Arc::new(Semaphore::new(limits.max_concurrent_requests)),
            runners: Arc::new(Semaphore::new(limits.max_concurrent_runner_requests)),
            body_bytes: Arc::new(Semaphore::new(limits.max_body_bytes_in_flight)),
            per_caller: Arc::default(),
            limits,
        }
    }

    /// Takes one of `caller`'s places (and a listen stream's, for a listen), or says which
    /// of its limits it is at.
    fn admit_caller(&self, caller: &str, listen: bool) -> Result<CallerPlace, String> {
        let mut held = self.per_caller.lock().unwrap_or_else(|e| e.into_inner());
        let now = held.entry(caller.to_owned()).or_default();
        let limits = &self.limits;
        if now.requests >= limits.max_concurrent_requests_per_caller {
            return Err(format!(
                "this caller already has {} requests in progress on this server, its limit; retry once some have finished",
                now.requests
            ));
        }
        if listen && now.listens >= limits.max_listen_streams_per_caller {
            return Err(format!(
                "this caller already holds {} subscriptions/listen streams on this server, its limit; close one or retry later",
                now.listens
            ));
        }
        now.requests += 1;
        now.listens += usize::from(listen);
        Ok(CallerPlace {
            per_caller: self.per_caller.clone(),
            caller: caller.to_owned(),
            listen,
        })
    }

    /// The requests and listen streams `caller` (an authority group) has in progress here.
    pub fn caller_load(&self, caller: &str) -> (usize, usize) {
        let held = self.per_caller.lock().unwrap_or_else(|e| e.into_inner());
        held.get(caller).map_or((0, 0), |h| (h.requests, h.listens))
    }

    /// The limits in force.
    pub fn limits(&self) -> &RequestLimits {
        &self.limits
    }

    /// Body bytes currently reserved by requests being read or served.
    pub fn body_bytes_held(&self) -> usize {
        self.limits.max_body_bytes_in_flight - self.body_bytes.available_permits()
    }
}

/// One request's place among its caller's; given back when dropped (when the response,
/// streamed or not, has ended).
struct CallerPlace {
    per_caller: Arc<Mutex<HashMap<String, Held>>>,
    caller: String,
    listen: bool,
}

impl Drop for CallerPlace {
    fn drop(&mut self) {
        let mut held = self.per_caller.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(now) = held.get_mut(&self.caller) {
            now.requests = now.requests.saturating_sub(1);
            now.listens = now.listens.saturating_sub(usize::from(self.listen));
            if now.requests == 0 {
                held.remove(&self.caller);
            }
        }
    }
}

/// `resp` with `guard` held until its body has been sent (or dropped): a streamed response
/// keeps its place for as long as it streams.
fn holding<G: Send + Unpin + 'static>(resp: Response, guard: G) -> Response {
    resp.map(|body| {
        Body::new(HoldingBody {
            inner: body,
            _guard: guard,
        })
    })
}

struct HoldingBody<G> {
    inner: Body,
    _guard: G,
}

impl<G: Unpin> http_body::Body for HoldingBody<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

fn overloaded(message: String) -> Response {
    ApiError::overloaded(message, RETRY_AFTER).into_response()
}

/// Outer middleware: admits the request under the concurrent-request limit of its kind
/// (runner API or everything else) for as long as it is served, or answers 503 `unavailable`
/// with `Retry-After` at once. A refusal is immediate rather than queued: a queue in front of
/// a saturated process only adds latency, and the caller's retry may reach another instance.
pub async fn limit_requests(
    State(admission): State<Arc<Admission>>,
    req: Request,
    next: Next,
) -> Response {
    let (semaphore, limit, what) = if req.uri().path().starts_with(RUNNER_PREFIX) {
        (
            &admission.runners,
            admission.limits.max_concurrent_runner_requests,
            "runner-API requests",
        )
    } else {
        (
            &admission.callers,
            admission.limits.max_concurrent_requests,
            "requests",
        )
    };
    let Ok(permit) = semaphore.clone().try_acquire_owned() else {
        tracing::warn!(limit, "concurrent request limit reached; refusing");
        return overloaded(format!(
            "the server is serving its limit of {limit} concurrent {what}; retry shortly"
        ));
    };
    holding(next.run(req).await, permit)
}

/// Who a request's caller is, for its share of the process: its authority group. Put in the
/// request's extensions by authentication.
#[derive(Debug, Clone)]
pub struct Caller(pub String);

/// Route middleware, inside authentication: admits the request among its caller's (its
/// authority group's) for as long as it is served, streams included, or answers 429
/// `rate_limited` with `Retry-After` at once: one caller at its limits leaves the process's
/// other places to everyone else.
pub async fn limit_caller(
    State(admission): State<Arc<Admission>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(Caller(caller)) = req.extensions().get::<Caller>() else {
        return next.run(req).await;
    };
    let listen = req
        .headers()
        .get("mcp-method")
        .is_some_and(|m| m.as_bytes() == b"subscriptions/listen");
    match admission.admit_caller(caller, listen) {
        Ok(place) => holding(next.run(req).await, place),
        Err(message) => ApiError::client(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
            .with_retry_after(RETRY_AFTER)
            .into_response(),
    }
}

/// Outer middleware: refuses a body whose declared length is over the limit with 413 before
/// anything else, without reading it (the declaration alone settles it).
pub async fn refuse_declared_oversize(
    State(admission): State<Arc<Admission>>,
    req: Request,
    next: Next,
) -> Response {
    let limit = admission.max_body_bytes;
    if declared_length(&req).is_some_and(|n| n > limit as u64) {
        return too_large(limit);
    }
    next.run(req).await
}

fn too_large(limit: usize) -> Response {
    too_large_error(limit).into_response()
}

fn too_large_error(limit: usize) -> ApiError {
    ApiError::client(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("request body exceeds the {limit}-byte limit"),
    )
}

/// The body length the request announces: its `Content-Length`, or the exact size of a body
/// that is already in memory (the Lambda adapter hands over whole bodies).
fn declared_length(req: &Request) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .or_else(|| axum::body::HttpBody::size_hint(req.body()).exact())
}

/// Route middleware, inside authentication: reads the whole body before any handler parses
/// it, within the process's body-byte budget and the body deadline.
///
/// - The bytes are reserved before the first byte is read: the declared length, or the body
///   limit when none is declared (any surplus is given back once the body is complete). When
///   the budget cannot spare them the answer is 503 `unavailable` with `Retry-After` at once;
///   parallel uploads therefore never hold more than the budget.
/// - A body that does not arrive within the deadline is 408 `request_timeout`; one that
///   passes the limit is 413 `payload_too_large`.
/// - The reservation is held until the response is produced, since the bytes (and what the
///   handler parsed from them) live that long.
pub async fn read_body(
    State(admission): State<Arc<Admission>>,
    req: Request,
    next: Next,
) -> Response {
    let limits = &admission.limits;
    let limit = admission.max_body_bytes;
    let declared = declared_length(&req);
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large(limit);
    }
    let reserve = declared.map_or(limit, |n| n as usize);
    let mut permit = match reserve_bytes(&admission, reserve) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let (parts, body) = req.into_parts();
    let bytes =
        match tokio::time::timeout(limits.body_timeout, collect(body, limit, declared)).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(Collect::TooLarge)) => return too_large(limit),
            Ok(Err(Collect::Failed(e))) => {
                return ApiError::client(
                    StatusCode::BAD_REQUEST,
                    "bad_request",
                    format!("could not read the request body: {e}"),
                )
                .into_response();
            }
            Err(_) => {
                return ApiError::client(
                    StatusCode::REQUEST_TIMEOUT,
                    "request_timeout",
                    format!(
                        "the request body did not arrive within {} ms",
                        limits.body_timeout.as_millis()
                    ),
                )
                .into_response();
            }
        };
    // Give back what an undeclared body did not use.
    if let Some(p) = permit.as_mut()
        && bytes.len() < p.num_permits()
    {
        drop(p.split(p.num_permits() - bytes.len()));
    }
    let resp = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    drop(permit);
    resp
}

/// Reserves `n` bytes of the body budget, or answers 503 `unavailable` with `Retry-After` at
/// once when the budget cannot spare them (like the request limit: a queue in front of a
/// saturated process only adds latency).
fn reserve_bytes(
    admission: &Admission,
    n: usize,
) -> Result<Option<OwnedSemaphorePermit>, ApiError> {
    if n == 0 {
        return Ok(None);
    }
    let budget = admission.limits.max_body_bytes_in_flight;
    // n is at most the body limit, which configuration keeps within the budget and u32.
    let wanted = u32::try_from(n).map_err(|_| too_large_error(admission.max_body_bytes))?;
    match admission.body_bytes.clone().try_acquire_many_owned(wanted) {
        Ok(permit) => Ok(Some(permit)),
        Err(_) => {
            tracing::warn!(
                wanted = n,
                budget,
                "request body budget exhausted; refusing"
            );
            Err(ApiError::overloaded(
                format!(
                    "the server is holding its limit of {budget} request-body bytes; retry shortly"
                ),
                RETRY_AFTER,
            ))
        }
    }
}

enum Collect {
    TooLarge,
    Failed(axum::Error),
}

/// Reads `body` into one buffer of at most `limit` bytes, sized once from the declared length
/// (a body longer than it declared is refused by the HTTP layer before it gets here).
async fn collect(mut body: Body, limit: usize, declared: Option<u64>) -> Result<Bytes, Collect> {
    let mut buf = BodyBuffer::for_body(declared.map(|n| n as usize), limit);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(Collect::Failed)?;
        if let Ok(data) = frame.into_data()
            && (buf.filled() + data.len() > limit || !buf.extend(&data))
        {
            return Err(Collect::TooLarge);
        }
    }
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(budget: usize) -> Admission {
        Admission::new(
            1024,
            RequestLimits {
                max_body_bytes_in_flight: budget,
                ..RequestLimits::default()
            },
        )
    }

    #[test]
    fn a_reservation_beyond_the_free_budget_is_refused_until_bytes_are_given_back() {
        let a = admission(1500);
        let first = reserve_bytes(&a, 1024).unwrap();
        assert_eq!(a.body_bytes_held(), 1024);
        let refused = reserve_bytes(&a, 1024).unwrap_err().into_response();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        // What fits still fits.
        let small = reserve_bytes(&a, 400).unwrap();
        drop((first, small));
        assert_eq!(a.body_bytes_held(), 0);
        assert!(reserve_bytes(&a, 1024).unwrap().is_some());
    }

    #[test]
    fn an_empty_body_reserves_nothing() {
        let a = admission(1024);
        assert!(reserve_bytes(&a, 0).unwrap().is_none());
        assert_eq!(a.body_bytes_held(), 0);
    }
}
