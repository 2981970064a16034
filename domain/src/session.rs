//! Workflow Session words: its lifecycle, its mode, and the role of a ledger event pair.

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
