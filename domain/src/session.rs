//! Workflow Session words: its lifecycle, its mode, and the kind and role of a ledger event.

string_enum! {
    /// Where a Workflow Session is in its life. Only an active session changes or records.
    "session lifecycle"
    pub enum Lifecycle {
        /// Work may continue.
        Active = "active",
        /// Finished by `finish_coding_task`; readable, takes no further work.
        Finished = "finished",
        /// Closed; readable, takes no further work.
        Closed = "closed",
    }
}

impl Lifecycle {
    /// Whether the session still takes work and events.
    pub fn is_active(self) -> bool {
        self == Lifecycle::Active
    }
}

string_enum! {
    /// What a Workflow Session allows.
    "session mode"
    pub enum Mode {
        /// Project work allowed.
        Normal = "normal",
        /// Only reading; project-changing tools are refused in this session.
        ReadOnly = "read_only",
    }
}

string_enum! {
    /// The part a session plays in a recorded call: the session that records it, or the
    /// session the tool works in.
    "event role"
    pub enum EventRole {
        /// The session named by `recording_session_id`.
        Recorder = "recorder",
        /// The tool's own session (`session_id`).
        Business = "business",
    }
}

string_enum! {
    /// What a ledger event records. The ledger holds no other kind.
    "event kind"
    pub enum EventKind {
        /// A recorded tool call began (its bounded, redacted argument summary).
        ToolCallStarted = "tool_call_started",
        /// A recorded tool call ended (success, error kind, its facts).
        ToolCallFinished = "tool_call_finished",
        /// The task a session was started or resumed for.
        TaskInstruction = "task_instruction",
        /// The session's execution defaults changed.
        SessionContextUpdated = "session_context_updated",
        /// The session was finished.
        SessionFinished = "session_finished",
        /// The session was closed.
        SessionClosed = "session_closed",
        /// Runner work was queued.
        ExecutionQueued = "execution_queued",
        /// Runner work ended (never its output).
        ExecutionFinished = "execution_finished",
        /// A message was posted to the session's board.
        MessagePosted = "message_posted",
        /// A board message was resolved.
        MessageResolved = "message_resolved",
        /// A todo was completed.
        MessageCompleted = "message_completed",
        /// ACK-required messages were acknowledged by a call.
        MessageAckObserved = "message_ack_observed",
    }
}
