//! Stopping a job: when its time runs out or a stop is asked, SIGINT, then SIGTERM, each
//! followed by the leader's grace period, then SIGKILL, every one to all of the job's processes.

use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::Child;
use tokio::sync::watch;
use wc_runner_protocol::Termination;

use super::Job;

/// Timing of the stop escalation and of the end of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopPolicy {
    /// How long the leader has to exit after SIGINT before SIGTERM follows.
    pub interrupt_grace: Duration,
    /// How long the leader has to exit after SIGTERM before SIGKILL follows.
    pub terminate_grace: Duration,
    /// How long the output pipes have to reach end-of-file once the leader has exited, before
    /// the rest of the group is killed.
    pub drain_after_exit: Duration,
}

impl Default for StopPolicy {
    fn default() -> Self {
        Self {
            interrupt_grace: Duration::from_secs(2),
            terminate_grace: Duration::from_secs(2),
            drain_after_exit: Duration::from_millis(500),
        }
    }
}

/// Waits for the leader to exit, stopping its group when the time runs out or a stop is asked.
pub(super) async fn supervise(
    child: &mut Child,
    group: &Job,
    timeout: Duration,
    cancel: &mut watch::Receiver<bool>,
    policy: &StopPolicy,
) -> (Termination, io::Result<ExitStatus>) {
    let stop = tokio::select! {
        // An exit that races the deadline counts as an exit.
        biased;
        status = child.wait() => return (Termination::Exited, status),
        () = tokio::time::sleep(timeout) => Termination::TimedOut,
        () = stop_requested(cancel) => Termination::Cancelled,
    };
    tracing::info!(reason = ?stop, "stopping the job");
    (stop, escalate(child, group, policy).await)
}

/// Resolves when `cancel` turns `true`; never, once its sender is gone without asking.
pub(crate) async fn stop_requested(cancel: &mut watch::Receiver<bool>) {
    if cancel.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// SIGINT, then SIGTERM to every process of the job, each followed by the leader's grace period,
/// then SIGKILL to all of them; answers the leader's exit status.
async fn escalate(child: &mut Child, group: &Job, policy: &StopPolicy) -> io::Result<ExitStatus> {
    for (signal, grace) in [
        (Signal::SIGINT, policy.interrupt_grace),
        (Signal::SIGTERM, policy.terminate_grace),
    ] {
        group.signal(signal);
        if let Ok(status) = tokio::time::timeout(grace, child.wait()).await {
            return status;
        }
    }
    group.kill_all();
    child.wait().await
}
