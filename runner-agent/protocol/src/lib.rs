//! Wire types shared by the wc functions and the runner agent. No I/O lives here.
//!
//! Every message carries [`PROTOCOL_VERSION`]; a peer refuses versions it does not speak.
#![warn(missing_docs)]

use serde::{Deserialize, Serialize};

/// Version of the runner protocol spoken by this build.
pub const PROTOCOL_VERSION: u32 = 1;

/// Lifecycle of one unit of runner work.
///
/// `queued → leased → succeeded | failed | cancelled`, and `leased → lost` when a lease expires
/// or a newer runner instance replaces the one holding it. `queued → cancelled` is allowed
/// (stopped before any runner took it). Terminal states never change again, and work that was
/// leased is never put back in the queue: a started command is not replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkState {
    /// Waiting for a runner.
    Queued,
    /// Claimed by a runner instance under a lease.
    Leased,
    /// Finished and reported a result.
    Succeeded,
    /// Finished with a failure result.
    Failed,
    /// Stopped on request.
    Cancelled,
    /// Its runner vanished; the outcome is unknown.
    Lost,
}

impl WorkState {
    /// Whether no further transition is possible.
    pub fn is_terminal(self) -> bool {
        !matches!(self, WorkState::Queued | WorkState::Leased)
    }

    /// Whether `self → next` is a legal transition.
    pub fn can_become(self, next: WorkState) -> bool {
        use WorkState::*;
        matches!(
            (self, next),
            (Queued, Leased)
                | (Queued, Cancelled)
                | (Leased, Succeeded)
                | (Leased, Failed)
                | (Leased, Cancelled)
                | (Leased, Lost)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::WorkState::{self, *};

    const ALL: [WorkState; 6] = [Queued, Leased, Succeeded, Failed, Cancelled, Lost];

    #[test]
    fn terminal_states_never_change_and_leased_work_never_requeues() {
        for from in ALL {
            for to in ALL {
                if from.is_terminal() || to == Queued {
                    assert!(!from.can_become(to), "{from:?} -> {to:?}");
                }
            }
        }
        assert!(Queued.can_become(Leased));
        assert!(Leased.can_become(Lost));
        assert!(!Queued.can_become(Succeeded), "a result needs a lease");
    }

    #[test]
    fn states_use_snake_case_on_the_wire() {
        assert_eq!(serde_json::to_string(&Lost).unwrap(), "\"lost\"");
        assert_eq!(
            serde_json::from_str::<WorkState>("\"leased\"").unwrap(),
            Leased
        );
    }
}
