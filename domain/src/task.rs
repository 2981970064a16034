//! Durable MCP tasks: the status of one tool call whose result is collected later.

string_enum! {
    /// Status of a task, as the tasks extension (`io.modelcontextprotocol/tasks`) names it.
    ///
    /// `working ⇄ input_required`, and from either to a terminal status: `completed` (the
    /// call's result is there, a tool error included), `failed` (a protocol error ended it) or
    /// `cancelled`. A terminal task never changes again.
    "task status"
    pub enum TaskStatus {
        /// The call is running.
        Working = "working",
        /// The call waits for the client's answers to its input requests.
        InputRequired = "input_required",
        /// The call ended with a result.
        Completed = "completed",
        /// A protocol error ended the call.
        Failed = "failed",
        /// The call was cancelled before it ended.
        Cancelled = "cancelled",
    }
}

impl TaskStatus {
    /// Whether the status can never change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_and_know_which_are_final() {
        for s in TaskStatus::ALL {
            assert_eq!(TaskStatus::parse(s.as_str()), Ok(*s));
        }
        assert!(!TaskStatus::InputRequired.is_terminal());
        assert!(TaskStatus::Cancelled.is_terminal());
        assert!(TaskStatus::parse("done").is_err());
    }
}
