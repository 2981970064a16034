//! Persistent shells: the state of one runner-owned shell of a Workflow Session.

string_enum! {
    /// State of a persistent shell.
    ///
    /// `opening → ready ⇄ busy`, and from any of those to a terminal state: `closed` (on
    /// request, with its session, or idle), `exited` (the shell process ended by itself),
    /// `poisoned` (its framing could not be proven in step, or its control channel broke: its
    /// processes were killed) or `lost` (its runner instance is gone). A terminal shell never
    /// changes again and its id never addresses another shell.
    "shell state"
    pub enum ShellState {
        /// Waiting for its runner to start it.
        Opening = "opening",
        /// Ready for a command.
        Ready = "ready",
        /// Running a command.
        Busy = "busy",
        /// Closed: its processes are gone.
        Closed = "closed",
        /// The shell process ended by itself (`exit`, `exec`, a fatal signal).
        Exited = "exited",
        /// Reset after its framing could not be proven in step: it takes no more commands.
        Poisoned = "poisoned",
        /// Its runner instance is gone (restarted, replaced or unreachable).
        Lost = "lost",
    }
}

impl ShellState {
    /// Whether the shell can never run a command again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            ShellState::Closed | ShellState::Exited | ShellState::Poisoned | ShellState::Lost
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_know_which_are_final() {
        for s in ShellState::ALL {
            assert_eq!(ShellState::parse(s.as_str()), Ok(*s));
        }
        assert!(!ShellState::Busy.is_terminal());
        assert!(ShellState::Poisoned.is_terminal());
        assert!(ShellState::parse("running").is_err());
    }
}
