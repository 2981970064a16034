//! `notifications/tasks` on `subscriptions/listen` streams (tasks extension, 2026-07-28).
//!
//! rmcp serves the listen request — its header and `_meta` checks, the acknowledgement, the
//! final result, the end of the stream when the client goes away — but its
//! `SubscriptionFilter` has no `taskIds`: it drops them when it parses the request and cannot
//! name them in the acknowledgement. So, around rmcp:
//!
//! - [`prepare`] (a middleware) reads the requested `taskIds` of a 2026-07-28 listen,
//!   refuses them without the declared extension (`-32021`), keeps those that are the
//!   caller's own live tasks (the others are left out as `tasks/get` would refuse them,
//!   unknown and foreign alike) as [`ListenTasks`], and writes the kept ids into the
//!   stream's acknowledgement event ([`Acknowledging`]);
//! - [`watch`], run as the handler's `listen`, sends each kept task's state as
//!   `notifications/tasks` — what `tasks/get` answers at that moment, read the same way, so a
//!   task whose work ended ends exactly once whoever reads it — first at once, then whenever
//!   its status or outstanding input requests change. The stream ends with the final result
//!   once every kept task is terminal (at once when none was kept: no core notification
//!   category is served), or after `WC_LISTEN_MAX_MS` (the client listens again), or when
//!   the client leaves.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ErrorCode, GetMeta, ServerNotification, TaskStatusNotification, TaskStatusNotificationParams,
};
use rmcp::service::SubscriptionContext;
use serde_json::{Value, json};
use tokio::time::Instant;
use wc_store::tasks::TaskRow;

use super::guard::{INVALID_PARAMS, rpc_error};
use crate::AppState;
use crate::auth::Principal;

/// Most task ids one listen request may name.
pub const MAX_LISTEN_TASKS: usize = 16;

const METHOD: &str = "subscriptions/listen";
const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";

/// The tasks a listen request asked for and the caller may watch, in the order asked.
#[derive(Debug, Clone)]
pub struct ListenTasks {
    /// Ids of the caller's own live tasks among those requested.
    pub accepted: Arc<Vec<String>>,
}

/// What [`prepare`] reads of a listen request: its id, requested task ids (if any) and
/// whether it declares the tasks extension.
#[derive(Debug, PartialEq)]
struct Requested {
    id: Value,
    task_ids: Result<Vec<String>, &'static str>,
    declares_tasks: bool,
}

fn requested(body: &[u8]) -> Option<Requested> {
    let v: Value = serde_json::from_slice(body).ok()?;
    if v["method"] != METHOD {
        return None;
    }
    let raw = v["params"]["notifications"].get("taskIds")?;
    let task_ids = match raw.as_array() {
        None => Err("invalid params: notifications.taskIds must be an array of task ids"),
        Some(a) if a.len() > MAX_LISTEN_TASKS => {
            Err("invalid params: notifications.taskIds names more than 16 tasks")
        }
        Some(a) => a
            .iter()
            .map(|t| t.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or("invalid params: notifications.taskIds must be an array of strings"),
    };
    let declares_tasks = v["params"]["_meta"][CAPABILITIES_KEY]["extensions"]
        .get(TASKS_EXTENSION)
        .is_some_and(Value::is_object);
    Some(Requested {
        id: v["id"].clone(),
        task_ids,
        declares_tasks,
    })
}

/// Middleware in front of rmcp for `subscriptions/listen` requests that name `taskIds` (see
/// the module documentation). Every other request passes untouched.
pub async fn prepare(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let is_listen = req.method() == axum::http::Method::POST
        && req
            .headers()
            .get("mcp-method")
            .is_some_and(|m| m.as_bytes() == METHOD.as_bytes());
    let modern = req
        .headers()
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= "2026-07-28");
    if !(is_listen && modern) {
        return next.run(req).await;
    }
    let (mut parts, bytes) = match super::guard::buffered(req).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let Some(asked) = requested(&bytes) else {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    let task_ids = match asked.task_ids {
        Ok(ids) => ids,
        Err(why) => return rpc_error(StatusCode::OK, asked.id, INVALID_PARAMS, why, None),
    };
    if !asked.declares_tasks {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            asked.id,
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY.0.into(),
            "Missing required client capability: task notifications need the io.modelcontextprotocol/tasks extension",
            Some(json!({ "requiredCapabilities": { "extensions": { TASKS_EXTENSION: {} } } })),
        );
    }
    let Some(who) = parts.extensions.get::<Arc<Principal>>().cloned() else {
        return rpc_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            asked.id,
            ErrorCode::INTERNAL_ERROR.0.into(),
            "request reached MCP without a principal",
            None,
        );
    };
    let mut accepted: Vec<String> = Vec::new();
    for raw in task_ids {
        if accepted.contains(&raw) {
            continue;
        }
        match super::tasks::owned(&state, &who, &raw).await {
            Ok(Some(_)) => accepted.push(raw),
            Ok(None) => {}
            Err(e) => {
                return rpc_error(StatusCode::OK, asked.id, e.code.0.into(), &e.message, None);
            }
        }
    }
    let accepted = Arc::new(accepted);
    parts.extensions.insert(ListenTasks {
        accepted: accepted.clone(),
    });
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let streams = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !streams {
        return response;
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, Body::new(Acknowledging::new(body, accepted)))
}

/// The response body of a listen stream whose first event, the acknowledgement, gains
/// `params.notifications.taskIds`; everything after it passes through as it comes.
pub struct Acknowledging {
    inner: Body,
    /// The accepted ids while the first event has not been seen whole.
    pending: Option<Arc<Vec<String>>>,
    head: Vec<u8>,
}

impl Acknowledging {
    /// Wraps `inner`, naming `accepted` in its acknowledgement.
    pub fn new(inner: Body, accepted: Arc<Vec<String>>) -> Self {
        Acknowledging {
            inner,
            pending: Some(accepted),
            head: Vec::new(),
        }
    }
}

/// `event` (one SSE event, its blank line included) with the task ids written into its
/// data when it is the acknowledgement; any other event is returned as it is.
fn acknowledge(event: &[u8], accepted: &[String]) -> Vec<u8> {
    let Ok(text) = std::str::from_utf8(event) else {
        return event.to_vec();
    };
    let mut out = String::with_capacity(text.len() + 64);
    let mut changed = false;
    for line in text.split_inclusive('\n') {
        let data = line.strip_prefix("data:").map(str::trim);
        let rewritten = data
            .and_then(|d| serde_json::from_str::<Value>(d).ok())
            .filter(|m| m["method"] == ACKNOWLEDGED)
            .map(|mut m| {
                m["params"]["notifications"]["taskIds"] = json!(accepted);
                m
            });
        match rewritten {
            Some(m) => {
                out.push_str("data: ");
                out.push_str(&m.to_string());
                out.push('\n');
                changed = true;
            }
            None => out.push_str(line),
        }
    }
    if changed {
        out.into_bytes()
    } else {
        event.to_vec()
    }
}

impl HttpBody for Acknowledging {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let Some(accepted) = this.pending.clone() else {
            return Pin::new(&mut this.inner).poll_frame(cx);
        };
        loop {
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        this.head.extend_from_slice(&data);
                        if let Some(end) = this.head.windows(2).position(|w| w == b"\n\n") {
                            let head = std::mem::take(&mut this.head);
                            let (event, rest) = head.split_at(end + 2);
                            let mut out = acknowledge(event, &accepted);
                            out.extend_from_slice(rest);
                            this.pending = None;
                            return Poll::Ready(Some(Ok(http_body::Frame::data(out.into()))));
                        }
                    }
                    Err(other) => return Poll::Ready(Some(Ok(other))),
                },
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => {
                    this.pending = None;
                    let head = std::mem::take(&mut this.head);
                    return Poll::Ready(
                        (!head.is_empty()).then(|| Ok(http_body::Frame::data(head.into()))),
                    );
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_none() && self.inner.is_end_stream()
    }
}

/// What a subscriber has been told of a task: a notification is sent when this changes.
#[derive(Debug, PartialEq)]
struct Told {
    status: wc_domain::TaskStatus,
    input_keys: Vec<String>,
}

fn told(row: &TaskRow) -> Told {
    let mut input_keys: Vec<String> = row
        .input_requests
        .as_ref()
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    input_keys.sort();
    Told {
        status: row.status,
        input_keys,
    }
}

async fn notify(sub: &SubscriptionContext, row: &TaskRow) -> Result<(), McpError> {
    let params = TaskStatusNotificationParams::new(super::tasks::detailed(row)?);
    let mut note = ServerNotification::TaskStatusNotification(TaskStatusNotification::new(params));
    let ctx = sub.request_context();
    note.get_meta_mut().set_subscription_id(ctx.id.clone());
    ctx.peer
        .send_notification(note)
        .await
        .map_err(|e| McpError::internal_error(format!("listen stream closed: {e}"), None))
}

/// Runs one listen stream for `who` over `tasks`, each read with `read` (see the module
/// documentation). With no
/// task to watch (none asked for, or none the caller's) it ends at once: the stream would
/// carry nothing.
pub(super) async fn watch(
    state: &AppState,
    who: &Principal,
    tasks: Option<ListenTasks>,
    sub: &SubscriptionContext,
    read: super::tasks::Read,
) -> Result<(), McpError> {
    let cfg = &state.deps.config;
    let deadline = Instant::now() + cfg.listen_max;
    let mut open: Vec<(String, Option<Told>, Option<uuid::Uuid>)> = tasks
        .iter()
        .flat_map(|t| t.accepted.iter())
        .map(|id| (id.clone(), None, None))
        .collect();
    loop {
        // The waiter is made before the reads, so a hint in between is not lost.
        let mut waiter = open
            .iter()
            .find_map(|(_, _, work)| *work)
            .map(|w| state.deps.wake.on_done(w));
        let mut still_open = Vec::with_capacity(open.len());
        for (id, last, work) in open {
            match read(state, who, &id).await {
                Ok(row) => {
                    let now = told(&row);
                    if last.as_ref() != Some(&now) {
                        notify(sub, &row).await?;
                    }
                    if !row.status.is_terminal() {
                        still_open.push((id, Some(now), row.work_id));
                    }
                }
                // Expired or pruned since: nothing more will be said of it.
                Err(e) if e.code == ErrorCode::INVALID_PARAMS => {}
                // A transient failure: read it again on the next round.
                Err(_) => still_open.push((id, last, work)),
            }
        }
        open = still_open;
        if open.is_empty() {
            return Ok(());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        let nap = cfg
            .task_poll_interval
            .min(left)
            .max(Duration::from_millis(1));
        tokio::select! {
            _ = sub.cancelled() => return Ok(()),
            _ = async {
                match waiter.as_mut() {
                    Some(w) => w.wait(nap).await,
                    None => tokio::time::sleep(nap).await,
                }
            } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    #[test]
    fn only_a_listen_naming_task_ids_is_read() {
        let declared = json!({ CAPABILITIES_KEY: { "extensions": { TASKS_EXTENSION: {} } } });
        let body = |notifications: Value, meta: Value| {
            serde_json::to_vec(&json!({
                "jsonrpc": "2.0", "id": 4, "method": METHOD,
                "params": { "_meta": meta, "notifications": notifications }
            }))
            .unwrap()
        };
        assert_eq!(
            requested(&body(json!({ "taskIds": ["wc_task_a"] }), declared.clone())),
            Some(Requested {
                id: json!(4),
                task_ids: Ok(vec!["wc_task_a".into()]),
                declares_tasks: true
            })
        );
        assert_eq!(
            requested(&body(json!({ "toolsListChanged": true }), declared.clone())),
            None,
            "no task ids: rmcp's own"
        );
        let undeclared = requested(&body(json!({ "taskIds": [] }), json!({}))).unwrap();
        assert!(!undeclared.declares_tasks);
        for bad in [json!("wc_task_a"), json!([1]), json!(vec!["x"; 17])] {
            let r = requested(&body(json!({ "taskIds": bad }), declared.clone())).unwrap();
            assert!(r.task_ids.is_err(), "{bad}");
        }
        let other = serde_json::to_vec(&json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
        assert_eq!(requested(&other.unwrap()), None);
    }

    #[test]
    fn the_acknowledgement_names_the_accepted_tasks_and_nothing_else_changes() {
        let ids = vec!["wc_task_a".to_owned()];
        let ack = format!(
            "id: 0\ndata: {}\n\n",
            json!({ "jsonrpc": "2.0", "method": ACKNOWLEDGED,
                    "params": { "notifications": {}, "_meta": { "io.modelcontextprotocol/subscriptionId": 4 } } })
        );
        let out = String::from_utf8(acknowledge(ack.as_bytes(), &ids)).unwrap();
        assert!(out.starts_with("id: 0\ndata: "), "{out}");
        assert!(out.ends_with("\n\n"), "{out}");
        let data: Value =
            serde_json::from_str(out.lines().nth(1).unwrap().strip_prefix("data:").unwrap())
                .unwrap();
        assert_eq!(data["params"]["notifications"]["taskIds"], json!(ids));
        assert_eq!(
            data["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            4
        );
        let other = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks\"}\n\n";
        assert_eq!(acknowledge(other.as_bytes(), &ids), other.as_bytes());
    }

    #[tokio::test]
    async fn the_body_rewrites_the_first_event_even_when_it_arrives_in_pieces() {
        let ack = format!(
            "data: {}\n\n",
            json!({ "jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": { "notifications": {} } })
        );
        let rest = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks\"}\n\n";
        let (a, b) = ack.split_at(7);
        let inner = Body::new(Pieces(vec![
            Bytes::from(a.to_owned()),
            Bytes::from(b.to_owned() + rest),
        ]));
        let body = Body::new(Acknowledging::new(
            inner,
            Arc::new(vec!["wc_task_b".into()]),
        ));
        let text = String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap();
        assert!(text.contains("\"taskIds\":[\"wc_task_b\"]"), "{text}");
        assert!(text.ends_with(rest), "{text}");
    }

    /// A body that yields its pieces one frame at a time.
    struct Pieces(Vec<Bytes>);

    impl HttpBody for Pieces {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
            let next = (!self.0.is_empty()).then(|| Ok(http_body::Frame::data(self.0.remove(0))));
            Poll::Ready(next)
        }
    }
}
