//! A property-based state-machine test of the Workflow Session message board: random sequences
//! of posts, resolves, assignments, fenced completions, ACKs, observations and listings are
//! issued through the real router (MCP and REST) of two server instances sharing one real
//! database, one after the other or two at once (one on each instance, their results then
//! explained by one of the two orders), and every result is compared with a reference model
//! of the board.
//!
//! Besides each tool's result, every step checks invariants of the stored board: the message
//! set, numbers, statuses and counters, observation revisions that are unique and bumped
//! exactly once per observable change (read with SQL), assignment revisions that move exactly
//! when assignment-local state moves, and an observer that never skips a change and never
//! receives one twice across pages. A failure prints the shrunk operation sequence and a trace
//! of what each operation did. A few scenarios are also checked as fixed cases.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use axum::http::StatusCode;
use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner as PropRunner};
use serde_json::{Value, json};
use wc_functions::AppState;
use wc_store::testing::TestDatabase;

/// The project every case's session works on.
const PROJECT: &str = "agent:local:board";
/// A well-formed message id that names nothing on any board.
const BOGUS: &str = "wc_msg_0000000000000000000000";
/// The answers completions choose from.
const ANSWERS: [&str; 3] = [
    "done: the build is green",
    "done: see the diff",
    "won't fix",
];
/// A listing's default limit.
const DEFAULT_LIMIT: usize = 50;

// ---------------------------------------------------------------------------------------------
// Operations

/// Which server instance serves a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inst {
    A,
    B,
}

/// Which surface a call comes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Surface {
    /// `POST /mcp` `tools/call` on the modern revision.
    Mcp,
    /// `POST /api/tools/call`.
    Rest,
}

/// Where a call goes.
#[derive(Clone, Copy, PartialEq, Eq)]
struct At {
    inst: Inst,
    surface: Surface,
}

impl std::fmt::Debug for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}/{:?}", self.inst, self.surface)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Note,
    Question,
    Todo,
    Answer,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Note => "note",
            Kind::Question => "question",
            Kind::Todo => "todo",
            Kind::Answer => "answer",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Priority {
    Low,
    Normal,
    High,
}

impl Priority {
    fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Open,
    Resolved,
    Completed,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Open => "open",
            Status::Resolved => "resolved",
            Status::Completed => "completed",
        }
    }
}

/// A message an operation names: an existing one (by index modulo the candidates, so every
/// shrunk sequence stays meaningful) or an id that names nothing. The candidates of
/// `Existing` depend on the operation (todos for assignments, ACK-required messages for ACKs,
/// any message otherwise); `Any` picks among all messages.
#[derive(Debug, Clone, Copy)]
enum Target {
    Existing(u16),
    Any(u16),
    Bogus,
}

/// Which remembered fence a completion presents.
#[derive(Debug, Clone, Copy)]
enum FenceChoice {
    /// The newest fence issued for the todo.
    Latest,
    /// One of the fences issued for the todo (by index modulo their number).
    Older(u8),
    /// The newest fence of another todo (refused: it names another message).
    Foreign(u16),
}

/// The recorded call that carries ACKs.
#[derive(Debug, Clone, Copy)]
enum Carrier {
    List,
    RuntimeStatus,
}

/// A listing's filter.
#[derive(Debug, Clone, Copy)]
enum Filter {
    All,
    Status(Status),
    Kind(Kind),
    ReplyTo(Target),
}

#[derive(Debug, Clone)]
enum Op {
    /// Nothing: what the shrinker replaces an operation with to shorten a case below the
    /// generated minimum length.
    Skip,
    /// `post_session_message`; an answer without `reply_to`, or one naming nothing, is refused.
    Post {
        at: At,
        kind: Kind,
        reply_to: Option<Target>,
        ack_required: bool,
        priority: Option<Priority>,
    },
    /// `resolve_session_message`.
    Resolve { at: At, target: Target },
    /// `get_session_assignment`; the fence it returns is remembered.
    GetAssignment { at: At, target: Target },
    /// `complete_session_message` of a todo with a remembered fence (fetching one first when
    /// none is known), a key of `key-0`…`key-3` and one of [`ANSWERS`].
    Complete {
        at: At,
        todo: u16,
        fence: FenceChoice,
        key: u8,
        answer: u8,
    },
    /// A call recorded in the session carrying `ack_session_message_ids`.
    Ack {
        inst: Inst,
        carrier: Carrier,
        targets: Vec<Target>,
    },
    /// `observe_session_messages` from the observer's token: one page, or every page until
    /// caught up (`drain`); or a new baseline.
    Observe {
        at: At,
        limit: u32,
        drain: bool,
        wait_ms: Option<u32>,
        rebaseline: bool,
    },
    /// `list_session_messages`, compared whole with the model.
    List {
        at: At,
        filter: Filter,
        limit: Option<u32>,
    },
    /// Two changing operations at once, the first on instance A, the second on instance B.
    Race(Box<Op>, Box<Op>),
}

/// An operation with its targets resolved against the model as it was before it ran.
#[derive(Debug, Clone)]
enum Prepared {
    /// Nothing to name (an empty board, no fence yet): the operation is skipped.
    Nothing,
    Post {
        at: At,
        kind: Kind,
        parent: Option<Result<usize, &'static str>>,
        ack_required: bool,
        priority: Option<Priority>,
        body: String,
    },
    Resolve {
        at: At,
        target: Result<usize, &'static str>,
    },
    GetAssignment {
        at: At,
        target: Result<usize, &'static str>,
    },
    Complete {
        at: At,
        todo: usize,
        fence: Fence,
        foreign: bool,
        key: u8,
        answer: u8,
    },
    Ack {
        inst: Inst,
        carrier: Carrier,
        picked: Vec<Result<usize, &'static str>>,
    },
}

/// One tool call.
struct Request {
    at: At,
    tool: &'static str,
    args: Value,
    wrapper: Option<Value>,
}

impl Request {
    fn new(at: At, tool: &'static str, args: Value) -> Request {
        Request {
            at,
            tool,
            args,
            wrapper: None,
        }
    }
}

fn inst() -> impl Strategy<Value = Inst> {
    prop_oneof![Just(Inst::A), Just(Inst::B)]
}

fn at() -> impl Strategy<Value = At> {
    (
        inst(),
        prop_oneof![3 => Just(Surface::Mcp), 1 => Just(Surface::Rest)],
    )
        .prop_map(|(inst, surface)| At { inst, surface })
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        12 => any::<u16>().prop_map(Target::Existing),
        3 => any::<u16>().prop_map(Target::Any),
        1 => Just(Target::Bogus),
    ]
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        2 => Just(Kind::Note),
        1 => Just(Kind::Question),
        4 => Just(Kind::Todo),
        2 => Just(Kind::Answer),
    ]
}

fn status() -> impl Strategy<Value = Status> {
    prop_oneof![
        Just(Status::Open),
        Just(Status::Resolved),
        Just(Status::Completed)
    ]
}

/// The operations that change the board or read an assignment: the ones that may race.
fn changing_op() -> impl Strategy<Value = Op> {
    let post = (
        at(),
        kind(),
        prop_oneof![1 => Just(None), 3 => target().prop_map(Some)],
        prop::bool::weighted(0.4),
        prop_oneof![
            3 => Just(None),
            1 => Just(Some(Priority::Low)),
            1 => Just(Some(Priority::Normal)),
            1 => Just(Some(Priority::High)),
        ],
    )
        .prop_map(|(at, kind, reply_to, ack_required, priority)| Op::Post {
            at,
            kind,
            reply_to,
            ack_required,
            priority,
        });
    let resolve = (at(), target()).prop_map(|(at, target)| Op::Resolve { at, target });
    let assignment = (at(), target()).prop_map(|(at, target)| Op::GetAssignment { at, target });
    let fence = prop_oneof![
        3 => Just(FenceChoice::Latest),
        3 => any::<u8>().prop_map(FenceChoice::Older),
        1 => any::<u16>().prop_map(FenceChoice::Foreign),
    ];
    let complete =
        (at(), any::<u16>(), fence, 0u8..4, 0u8..3).prop_map(|(at, todo, fence, key, answer)| {
            Op::Complete {
                at,
                todo,
                fence,
                key,
                answer,
            }
        });
    let ack = (
        inst(),
        prop_oneof![Just(Carrier::List), Just(Carrier::RuntimeStatus)],
        prop::collection::vec(target(), 1..=4),
    )
        .prop_map(|(inst, carrier, targets)| Op::Ack {
            inst,
            carrier,
            targets,
        });
    prop_oneof![
        5 => post,
        1 => resolve,
        3 => assignment,
        4 => complete,
        2 => ack,
    ]
}

/// `op` sent to instance `inst`.
fn on(inst: Inst, op: Op) -> Op {
    match op {
        Op::Post {
            at,
            kind,
            reply_to,
            ack_required,
            priority,
        } => Op::Post {
            at: At { inst, ..at },
            kind,
            reply_to,
            ack_required,
            priority,
        },
        Op::Resolve { at, target } => Op::Resolve {
            at: At { inst, ..at },
            target,
        },
        Op::GetAssignment { at, target } => Op::GetAssignment {
            at: At { inst, ..at },
            target,
        },
        Op::Complete {
            at,
            todo,
            fence,
            key,
            answer,
        } => Op::Complete {
            at: At { inst, ..at },
            todo,
            fence,
            key,
            answer,
        },
        Op::Ack {
            carrier, targets, ..
        } => Op::Ack {
            inst,
            carrier,
            targets,
        },
        other => other,
    }
}

fn op() -> impl Strategy<Value = Op> {
    let observe = (
        at(),
        1u32..=4,
        any::<bool>(),
        prop_oneof![4 => Just(None), 1 => Just(Some(0u32)), 1 => Just(Some(30u32))],
        prop::bool::weighted(0.1),
    )
        .prop_map(|(at, limit, drain, wait_ms, rebaseline)| Op::Observe {
            at,
            limit,
            drain,
            wait_ms,
            rebaseline,
        });
    let filter = prop_oneof![
        3 => Just(Filter::All),
        1 => status().prop_map(Filter::Status),
        1 => kind().prop_map(Filter::Kind),
        1 => target().prop_map(Filter::ReplyTo),
    ];
    let list = (
        at(),
        filter,
        prop_oneof![2 => Just(None), 1 => (1u32..=6).prop_map(Some)],
    )
        .prop_map(|(at, filter, limit)| Op::List { at, filter, limit });
    let race = (changing_op(), changing_op())
        .prop_map(|(x, y)| Op::Race(Box::new(on(Inst::A, x)), Box::new(on(Inst::B, y))));
    prop_oneof![
        1 => Just(Op::Skip),
        30 => changing_op(),
        6 => observe,
        2 => list,
        5 => race,
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 8..=30)
}

fn show(ops: &[Op]) -> String {
    let mut out = String::new();
    for (n, op) in ops.iter().enumerate() {
        if !matches!(op, Op::Skip) {
            let _ = writeln!(out, "  {n:>2}: {op:?}");
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Checks

type Check<T> = Result<T, String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

macro_rules! ensure_eq {
    ($left:expr, $right:expr, $($fmt:tt)+) => {{
        let (l, r) = (&$left, &$right);
        if l != r {
            return Err(format!("{}\n  actual:   {:?}\n  expected: {:?}", format!($($fmt)+), l, r));
        }
    }};
}

// ---------------------------------------------------------------------------------------------
// The reference model

#[derive(Debug, Clone)]
struct Msg {
    id: String,
    kind: Kind,
    priority: Priority,
    reply_to: Option<usize>,
    ack_required: bool,
    body: String,
    status: Status,
    /// Whether an ACK of it was observed.
    acked: bool,
    /// Direct replies, in posting order.
    replies: Vec<usize>,
    /// Todos: bumped by every assignment-local change (its status, its direct replies and
    /// their statuses). Only equality matters.
    version: u64,
    /// Todos: the answer that completed it.
    answer: Option<usize>,
    /// The operation of its latest observable change.
    changed_at: usize,
}

/// A fence as issued, with the assignment version it proves.
#[derive(Debug, Clone)]
struct Fence {
    token: String,
    version: u64,
}

/// An accepted completion, by key.
#[derive(Debug, Clone)]
struct Accepted {
    todo: usize,
    answer: u8,
    output: Value,
}

/// The observer's position: its token, the revision the token carries (the test's own
/// bookkeeping, from SQL), and the changes after it not yet delivered (message → the operation
/// of its latest change).
#[derive(Debug, Clone)]
struct Observer {
    token: String,
    cursor_rev: i64,
    pending: BTreeMap<usize, usize>,
}

#[derive(Debug, Clone, Default)]
struct Model {
    msgs: Vec<Msg>,
    by_id: HashMap<String, usize>,
    /// Fences issued per todo, oldest first.
    fences: BTreeMap<usize, Vec<Fence>>,
    completions: BTreeMap<u8, Accepted>,
    /// The current operation.
    op: usize,
    /// Observable changes of the current operation (a message once per change).
    changes: Vec<usize>,
    /// Every observable change of the case.
    total_changes: usize,
    observer: Option<Observer>,
}

impl Model {
    fn begin(&mut self, op: usize) {
        self.op = op;
        self.changes.clear();
    }

    /// Records an observable change of message `i`.
    fn touch(&mut self, i: usize) {
        self.msgs[i].changed_at = self.op;
        self.changes.push(i);
        self.total_changes += 1;
        if let Some(o) = &mut self.observer {
            o.pending.insert(i, self.op);
        }
    }

    /// Assignment-local state of todo `i` changed.
    fn bump(&mut self, i: usize) {
        if self.msgs[i].kind == Kind::Todo {
            self.msgs[i].version += 1;
        }
    }

    fn post(
        &mut self,
        id: String,
        kind: Kind,
        reply_to: Option<usize>,
        ack_required: bool,
        priority: Priority,
        body: String,
    ) -> usize {
        let i = self.msgs.len();
        self.msgs.push(Msg {
            id: id.clone(),
            kind,
            priority,
            reply_to,
            ack_required,
            body,
            status: Status::Open,
            acked: false,
            replies: Vec::new(),
            version: 0,
            answer: None,
            changed_at: self.op,
        });
        self.by_id.insert(id, i);
        self.touch(i);
        if let Some(p) = reply_to {
            self.msgs[p].replies.push(i);
            self.bump(p);
        }
        i
    }

    /// Closes open message `i` as `status`: its own status changed, and so did the status of a
    /// direct reply of its parent.
    fn close(&mut self, i: usize, status: Status) {
        self.msgs[i].status = status;
        self.touch(i);
        self.bump(i);
        if let Some(p) = self.msgs[i].reply_to {
            self.bump(p);
        }
    }

    fn complete(&mut self, todo: usize, answer_id: String, answer: u8) {
        self.close(todo, Status::Completed);
        let a = self.post(
            answer_id,
            Kind::Answer,
            Some(todo),
            false,
            Priority::Normal,
            ANSWERS[answer as usize].to_owned(),
        );
        self.msgs[todo].answer = Some(a);
    }

    fn todos_with_fences(&self) -> Vec<usize> {
        self.fences.keys().copied().collect()
    }

    /// The message `t` names among all messages.
    fn pick(&self, t: Target) -> Option<Result<usize, &'static str>> {
        self.pick_among(t, |_| true)
    }

    /// The message `t` names: `Existing` among the messages that satisfy `prefer` (all of
    /// them when none does), `Any` among all.
    fn pick_among(
        &self,
        t: Target,
        prefer: impl Fn(&Msg) -> bool,
    ) -> Option<Result<usize, &'static str>> {
        let all: Vec<usize> = (0..self.msgs.len()).collect();
        let preferred: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&i| prefer(&self.msgs[i]))
            .collect();
        let (s, among) = match t {
            Target::Bogus => return Some(Err(BOGUS)),
            Target::Existing(s) if !preferred.is_empty() => (s, preferred),
            Target::Existing(s) | Target::Any(s) => (s, all),
        };
        (!among.is_empty()).then(|| Ok(among[s as usize % among.len()]))
    }

    fn counts(&self) -> Value {
        let open = |f: &dyn Fn(&Msg) -> bool| {
            self.msgs
                .iter()
                .filter(|m| m.status == Status::Open && f(m))
                .count()
        };
        json!({
            "retained": self.msgs.len(),
            "open": open(&|_| true),
            "open_questions": open(&|m| m.kind == Kind::Question),
            "open_todos": open(&|m| m.kind == Kind::Todo),
            "open_ack_required": open(&|m| m.ack_required),
        })
    }

    /// Checks a message view against message `i`.
    fn check_view(&self, i: usize, v: &Value, what: &str) -> Check<()> {
        let m = &self.msgs[i];
        ensure_eq!(v["message_id"], json!(m.id), "{what}: message_id");
        ensure_eq!(v["number"], json!(i + 1), "{what}: number of {}", m.id);
        ensure_eq!(
            v["kind"],
            json!(m.kind.as_str()),
            "{what}: kind of {}",
            m.id
        );
        ensure_eq!(
            v["priority"],
            json!(m.priority.as_str()),
            "{what}: priority of {}",
            m.id
        );
        ensure_eq!(
            v["ack_required"],
            json!(m.ack_required),
            "{what}: ack_required of {}",
            m.id
        );
        let reply_to = m.reply_to.map(|p| self.msgs[p].id.clone());
        ensure_eq!(
            v["reply_to"],
            json!(reply_to),
            "{what}: reply_to of {}",
            m.id
        );
        ensure_eq!(
            v["status"],
            json!(m.status.as_str()),
            "{what}: status of {}",
            m.id
        );
        ensure_eq!(v["body"], json!(m.body), "{what}: body of {}", m.id);
        ensure_eq!(
            v["body_redacted"],
            json!(false),
            "{what}: body_redacted of {}",
            m.id
        );
        ensure_eq!(
            v["author_session_id"],
            Value::Null,
            "{what}: author of unrecorded {}",
            m.id
        );
        ensure_eq!(
            !v["first_ack_observed_at"].is_null(),
            m.acked,
            "{what}: first_ack_observed_at of {}",
            m.id
        );
        let answer = m.answer.map(|a| self.msgs[a].id.clone());
        ensure_eq!(
            v["answer_message_id"],
            json!(answer),
            "{what}: answer_message_id of {}",
            m.id
        );
        let reply_count = (m.kind == Kind::Todo).then_some(m.replies.len());
        ensure_eq!(
            v["reply_count"],
            json!(reply_count),
            "{what}: reply_count of {}",
            m.id
        );
        ensure_eq!(
            !v["closed_at"].is_null(),
            m.status != Status::Open,
            "{what}: closed_at of {}",
            m.id
        );
        Ok(())
    }

    /// Checks an assignment view against todo `t`.
    fn check_assignment(&self, t: usize, a: &Value, what: &str) -> Check<()> {
        let m = &self.msgs[t];
        self.check_view(t, &a["todo"], &format!("{what}: assignment todo"))?;
        let replies = a["replies"]
            .as_array()
            .ok_or_else(|| format!("{what}: no replies array: {a}"))?;
        let ids: Vec<&str> = replies
            .iter()
            .map(|r| r["message_id"].as_str().unwrap_or("?"))
            .collect();
        let want: Vec<&str> = m
            .replies
            .iter()
            .map(|&r| self.msgs[r].id.as_str())
            .collect();
        ensure_eq!(ids, want, "{what}: direct replies of {}", m.id);
        for (r, v) in m.replies.iter().zip(replies) {
            self.check_view(*r, v, &format!("{what}: reply"))?;
        }
        ensure_eq!(
            a["replies_total"],
            json!(m.replies.len()),
            "{what}: replies_total"
        );
        ensure_eq!(
            a["replies_truncated"],
            json!(false),
            "{what}: replies_truncated"
        );
        let open = m.status == Status::Open;
        ensure_eq!(a["completable"], json!(open), "{what}: completable");
        let reason = match m.status {
            Status::Open => Value::Null,
            Status::Resolved => json!("todo_resolved"),
            Status::Completed => json!("todo_completed"),
        };
        ensure_eq!(
            a["non_completable_reason"],
            reason,
            "{what}: non_completable_reason"
        );
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The stored board, read with SQL

#[derive(Debug, Clone)]
struct Row {
    observation_revision: i64,
    assignment_revision: i64,
    status: String,
    acked: bool,
    number: i64,
}

#[derive(Debug, Clone, Default)]
struct Stored {
    session_rev: i64,
    /// The session row's board counters: (posted, retained, open ACK-required).
    counters: (i64, i32, i32),
    rows: HashMap<String, Row>,
}

async fn stored(db: &TestDatabase, session_id: &str) -> Stored {
    let client = db.pool().get().await.unwrap();
    let session = client
        .query_one(
            "SELECT message_observation_revision, messages_posted, messages_retained, \
               open_ack_required FROM workflow_sessions WHERE id = $1",
            &[&session_id],
        )
        .await
        .unwrap();
    let session_rev: i64 = session.get(0);
    let counters = (session.get(1), session.get(2), session.get(3));
    let rows = client
        .query(
            "SELECT id, observation_revision, assignment_revision, status, \
               first_ack_observed_at IS NOT NULL, number \
             FROM session_messages WHERE session_id = $1",
            &[&session_id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get::<_, String>(0),
                Row {
                    observation_revision: r.get(1),
                    assignment_revision: r.get(2),
                    status: r.get(3),
                    acked: r.get(4),
                    number: r.get(5),
                },
            )
        })
        .collect();
    Stored {
        session_rev,
        counters,
        rows,
    }
}

// ---------------------------------------------------------------------------------------------
// The system under test

/// The test application (one database, a credential and a registered project) and a second,
/// independent instance over the same database.
struct Env {
    app: TestApp,
    b: AppState,
}

impl std::ops::Deref for Env {
    type Target = TestApp;
    fn deref(&self) -> &TestApp {
        &self.app
    }
}

impl Env {
    async fn new() -> Env {
        let app = TestApp::with_projects(&[PROJECT]).await;
        let b = app.second();
        Env { app, b }
    }

    fn instance(&self, inst: Inst) -> &AppState {
        match inst {
            Inst::A => &self.app.st,
            Inst::B => &self.b,
        }
    }

    /// Calls `tool` and returns its `{success, output?, error?, session_attention?}`, after
    /// checking that the transport agrees with it. `wrapper` fields (MCP only) go next to the
    /// arguments.
    async fn call(&self, at: At, tool: &str, args: Value, wrapper: Option<Value>) -> Check<Value> {
        let st = self.instance(at.inst);
        match at.surface {
            Surface::Mcp => {
                let mut args = args;
                if let Some(Value::Object(w)) = wrapper {
                    for (k, v) in w {
                        args[k] = v;
                    }
                }
                let body = rpc(
                    MODERN,
                    1,
                    "tools/call",
                    json!({ "name": tool, "arguments": args }),
                );
                let r = send(st, mcp_request(MODERN, Some(&self.key), &body)).await;
                ensure!(
                    r.status == StatusCode::OK && r.body.get("result").is_some(),
                    "{tool} over MCP answered HTTP {}: {}",
                    r.status,
                    r.text()
                );
                let result = &r.body["result"];
                let sc = result["structuredContent"].clone();
                ensure_eq!(
                    result["isError"],
                    json!(sc["success"] != true),
                    "{tool}: isError disagrees with structuredContent {sc}"
                );
                Ok(sc)
            }
            Surface::Rest => {
                ensure!(wrapper.is_none(), "wrapper fields are sent over MCP only");
                let r = rest(
                    st,
                    "/api/tools/call",
                    Some(&self.key),
                    json!({ "tool": tool, "arguments": args }),
                )
                .await;
                if r.body["success"] == true {
                    ensure!(
                        r.status == StatusCode::OK,
                        "{tool} over REST succeeded with HTTP {}: {}",
                        r.status,
                        r.text()
                    );
                } else {
                    ensure!(
                        r.status.is_client_error(),
                        "{tool} over REST failed with HTTP {}: {}",
                        r.status,
                        r.text()
                    );
                }
                Ok(r.body)
            }
        }
    }
}

/// The output of a successful result.
fn output<'v>(v: &'v Value, what: &str) -> Check<&'v Value> {
    ensure!(v["success"] == true, "{what}: expected success, got {v}");
    Ok(&v["output"])
}

/// Checks that a result failed with `kind`.
fn failed(v: &Value, kind: &str, what: &str) -> Check<()> {
    ensure!(
        v["success"] == false && v["error"]["kind"] == kind,
        "{what}: expected error {kind}, got {v}"
    );
    Ok(())
}

fn text(v: &Value, what: &str) -> Check<String> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{what}: expected a string, got {v}"))
}

// ---------------------------------------------------------------------------------------------
// One case

struct Case<'e> {
    env: &'e Env,
    session_id: String,
    model: Model,
    /// The stored board after the previous operation.
    last: Stored,
    /// A token of the empty board, for the final full-history observation.
    origin: (String, i64),
    /// Whether stored assignment revisions are checked too (otherwise only what clients see).
    check_assignment_revisions: bool,
    trace: String,
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

    fn note(&mut self, line: impl AsRef<str>) {
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

    fn id_of(&self, target: Result<usize, &'static str>) -> String {
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

    /// The stored board against the model, and how this operation moved its revisions.
    async fn check_stored(&mut self, versions: &[u64]) -> Check<()> {
        let now = stored(&self.env.db, &self.session_id).await;
        let checked = self.compare_stored(&now, versions);
        self.last = now;
        checked
    }

    /// The stored board `now` against the model, and how the operation moved its revisions
    /// since the previous one (`versions`: the todos' assignment versions before it).
    fn compare_stored(&self, now: &Stored, versions: &[u64]) -> Check<()> {
        let prev = &self.last;
        let m = &self.model;
        ensure_eq!(
            now.rows.len(),
            m.msgs.len(),
            "stored messages: {:?}",
            now.rows.keys().collect::<Vec<_>>()
        );
        let mut revisions = BTreeSet::new();
        for (i, msg) in m.msgs.iter().enumerate() {
            let row = now
                .rows
                .get(&msg.id)
                .ok_or_else(|| format!("message {} is not stored", msg.id))?;
            ensure_eq!(
                row.status,
                msg.status.as_str(),
                "stored status of {}",
                msg.id
            );
            ensure_eq!(row.acked, msg.acked, "stored ACK of {}", msg.id);
            ensure_eq!(row.number, i as i64 + 1, "stored number of {}", msg.id);
            ensure!(
                revisions.insert(row.observation_revision),
                "observation revision {} is not unique (message {})",
                row.observation_revision,
                msg.id
            );
            ensure!(
                row.observation_revision <= now.session_rev,
                "message {} has revision {} beyond the session's {}",
                msg.id,
                row.observation_revision,
                now.session_rev
            );
            let changed = m.changes.contains(&i);
            match prev.rows.get(&msg.id) {
                Some(before) if !changed => ensure_eq!(
                    row.observation_revision,
                    before.observation_revision,
                    "observation revision of {} moved without an observable change",
                    msg.id
                ),
                _ => ensure!(
                    row.observation_revision > prev.session_rev,
                    "message {} changed observably but its revision {} is not after the \
                     previous session revision {}",
                    msg.id,
                    row.observation_revision,
                    prev.session_rev
                ),
            }
            if let (Some(before), Some(&version)) = (prev.rows.get(&msg.id), versions.get(i))
                && self.check_assignment_revisions
                && msg.kind == Kind::Todo
                && msg.status == Status::Open
            {
                let moved = row.assignment_revision != before.assignment_revision;
                let changed = msg.version != version;
                ensure!(
                    moved == changed,
                    "open todo #{} {}: its assignment-local state (own status, direct replies \
                     and their statuses) {} in this operation, but its stored assignment \
                     revision {} ({} -> {}), so fences issued for it before {}",
                    i + 1,
                    msg.id,
                    if changed { "changed" } else { "did not change" },
                    if moved { "moved" } else { "did not move" },
                    before.assignment_revision,
                    row.assignment_revision,
                    if changed {
                        "stay valid though they should be stale"
                    } else {
                        "went stale though they should stay valid"
                    }
                );
            }
        }
        let open_ack_required = m
            .msgs
            .iter()
            .filter(|x| x.ack_required && x.status == Status::Open)
            .count();
        ensure_eq!(
            now.counters,
            (
                m.msgs.len() as i64,
                m.msgs.len() as i32,
                open_ack_required as i32
            ),
            "the session's board counters (posted, retained, open ACK-required)"
        );
        ensure_eq!(
            now.session_rev - prev.session_rev,
            m.changes.len() as i64,
            "session observation revision moved by the wrong amount (observable changes: {:?})",
            m.changes
                .iter()
                .map(|&i| m.msgs[i].id.as_str())
                .collect::<Vec<_>>()
        );
        Ok(())
    }

    fn verify_post(
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

    fn verify_resolve(&mut self, target: Result<usize, &'static str>, r: &Value) -> Check<()> {
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

    fn verify_assignment(&mut self, target: Result<usize, &'static str>, r: &Value) -> Check<()> {
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

    fn verify_complete(
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

    fn verify_ack(
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

    async fn observe(
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

    async fn list(&mut self, at: At, filter: Filter, limit: Option<u32>) -> Check<()> {
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

async fn run_case(
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

// ---------------------------------------------------------------------------------------------
// The property

#[test]
fn the_message_board_behaves_like_its_model_on_two_instances() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let env = rt.block_on(Env::new());
    // `Config::default()` honours the PROPTEST_* variables; without them: 32 cases, and a
    // bounded shrink of a failure.
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 32;
    }
    if std::env::var_os("PROPTEST_MAX_SHRINK_ITERS").is_none() {
        config.max_shrink_iters = 1024;
    }
    if std::env::var_os("PROPTEST_MAX_SHRINK_TIME").is_none() {
        config.max_shrink_time = 30_000;
    }
    config.failure_persistence = None;
    let mut runner = PropRunner::new(config);
    let counter = std::sync::atomic::AtomicU64::new(0);
    let result = runner.run(&ops(), |ops| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        rt.block_on(run_case(&env, n, &ops, true))
            .map_err(|(e, trace)| {
                TestCaseError::fail(format!("{e}\n\nops:\n{}\ntrace:\n{trace}", show(&ops)))
            })
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, ops)) => panic!(
            "the board disagreed with its model; minimal case found ({} operations):\n{reason}",
            ops.iter().filter(|op| !matches!(op, Op::Skip)).count()
        ),
        Err(TestError::Abort(reason)) => panic!("proptest aborted: {reason}"),
    }
    drop(env);
}

// ---------------------------------------------------------------------------------------------
// Known cases

const A: At = At {
    inst: Inst::A,
    surface: Surface::Mcp,
};
const B: At = At {
    inst: Inst::B,
    surface: Surface::Rest,
};

fn post(at: At, kind: Kind, reply_to: Option<u16>, ack_required: bool) -> Op {
    Op::Post {
        at,
        kind,
        reply_to: reply_to.map(Target::Existing),
        ack_required,
        priority: None,
    }
}

fn assignment(at: At, i: u16) -> Op {
    Op::GetAssignment {
        at,
        target: Target::Existing(i),
    }
}

/// Completes the `todo`-th todo that has a fence (in posting order).
fn complete(at: At, todo: u16, fence: FenceChoice, key: u8, answer: u8) -> Op {
    Op::Complete {
        at,
        todo,
        fence,
        key,
        answer,
    }
}

/// Scenarios worth keeping whatever the generator draws, checked only by what clients see.
#[test]
fn known_cases_behave_like_the_model() {
    use FenceChoice::{Latest, Older};
    use Kind::{Note, Todo};
    let cases: Vec<(&str, Vec<Op>)> = vec![
        (
            "a fence survives unrelated posts, resolves, ACKs and changes below direct replies; \
             a completion replays and its key conflicts",
            vec![
                post(A, Todo, None, false),
                post(B, Note, None, true),
                post(A, Note, Some(0), true),
                post(B, Note, Some(2), false),
                assignment(A, 0),
                post(B, Note, None, false),
                Op::Resolve {
                    at: A,
                    target: Target::Existing(1),
                },
                Op::Ack {
                    inst: Inst::B,
                    carrier: Carrier::List,
                    targets: vec![Target::Existing(2), Target::Existing(1), Target::Bogus],
                },
                Op::Resolve {
                    at: B,
                    target: Target::Existing(3),
                },
                complete(B, 0, Latest, 0, 0),
                complete(A, 0, Older(0), 0, 0),
                complete(A, 0, Latest, 0, 1),
                Op::Observe {
                    at: B,
                    limit: 2,
                    drain: true,
                    wait_ms: None,
                    rebaseline: false,
                },
            ],
        ),
        (
            "a resolved direct reply stales a fence; the stale answer's fresh fence applies",
            vec![
                post(A, Todo, None, false),
                post(B, Note, Some(0), false),
                assignment(B, 0),
                Op::Resolve {
                    at: A,
                    target: Target::Existing(1),
                },
                complete(A, 0, Latest, 0, 0),
                complete(B, 0, Latest, 0, 0),
                complete(A, 0, Older(0), 1, 0),
            ],
        ),
        (
            "completing a todo that is a direct reply of an open todo stales the parent's fences",
            vec![
                post(A, Todo, None, false),
                post(A, Todo, Some(0), false),
                assignment(A, 0),
                assignment(A, 1),
                complete(A, 1, Latest, 0, 0),
                complete(B, 0, Latest, 1, 0),
            ],
        ),
    ];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let env = rt.block_on(Env::new());
    let mut failures = Vec::new();
    for (n, (name, ops)) in cases.iter().enumerate() {
        if let Err((e, trace)) = rt.block_on(run_case(&env, n as u64, ops, false)) {
            failures.push(format!("{name}:\n{e}\n\ntrace:\n{trace}"));
        }
    }
    drop(env);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
