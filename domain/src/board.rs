//! Message board words: what a message is, how urgent, and where it stands.

string_enum! {
    /// Message kinds.
    "message kind"
    pub enum MessageKind {
        /// Information.
        Note = "note",
        /// A question for another window.
        Question = "question",
        /// Work to be done: workers take it with `get_session_assignment` and finish it with `complete_session_message`.
        Todo = "todo",
        /// A reply (needs `reply_to`).
        Answer = "answer",
    }
}

string_enum! {
    /// Priorities.
    "priority"
    pub enum Priority {
        /// Low.
        Low = "low",
        /// Normal (the default).
        Normal = "normal",
        /// High.
        High = "high",
    }
}

string_enum! {
    /// Where a message stands.
    "message status"
    pub enum MessageStatus {
        /// Open.
        Open = "open",
        /// Resolved.
        Resolved = "resolved",
        /// Completed (todos).
        Completed = "completed",
    }
}
