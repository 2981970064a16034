//! The operations a case is made of, as generated and as prepared against the model, and the
//! tool call each one makes.

use super::*;

/// Which server instance serves a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Inst {
    A,
    B,
}

/// Which surface a call comes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Surface {
    /// `POST /mcp` `tools/call` on the modern revision.
    Mcp,
    /// `POST /api/tools/call`.
    Rest,
}

/// Where a call goes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct At {
    pub(super) inst: Inst,
    pub(super) surface: Surface,
}

impl std::fmt::Debug for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}/{:?}", self.inst, self.surface)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    Note,
    Question,
    Todo,
    Answer,
}

impl Kind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Kind::Note => "note",
            Kind::Question => "question",
            Kind::Todo => "todo",
            Kind::Answer => "answer",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Priority {
    Low,
    Normal,
    High,
}

impl Priority {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Open,
    Resolved,
    Completed,
}

impl Status {
    pub(super) fn as_str(self) -> &'static str {
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
pub(super) enum Target {
    Existing(u16),
    Any(u16),
    Bogus,
}

/// Which remembered fence a completion presents.
#[derive(Debug, Clone, Copy)]
pub(super) enum FenceChoice {
    /// The newest fence issued for the todo.
    Latest,
    /// One of the fences issued for the todo (by index modulo their number).
    Older(u8),
    /// The newest fence of another todo (refused: it names another message).
    Foreign(u16),
}

/// The recorded call that carries ACKs.
#[derive(Debug, Clone, Copy)]
pub(super) enum Carrier {
    List,
    RuntimeStatus,
}

/// A listing's filter.
#[derive(Debug, Clone, Copy)]
pub(super) enum Filter {
    All,
    Status(Status),
    Kind(Kind),
    ReplyTo(Target),
}

#[derive(Debug, Clone)]
pub(super) enum Op {
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
pub(super) enum Prepared {
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
pub(super) struct Request {
    pub(super) at: At,
    pub(super) tool: &'static str,
    pub(super) args: Value,
    pub(super) wrapper: Option<Value>,
}

impl Request {
    pub(super) fn new(at: At, tool: &'static str, args: Value) -> Request {
        Request {
            at,
            tool,
            args,
            wrapper: None,
        }
    }
}
