//! The processes of a running job, held through their containment: every signal reaches all
//! of them, and none outlives the handle.

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use wc_runner_protocol::Notice;

use crate::sandbox::Containment;

/// The processes of a running job. Dropping it unfinished kills them all, so work whose
/// [`execute`](super::execute) future is abandoned mid-run leaves nothing running.
pub(crate) struct Job {
    leader: Pid,
    reaped: bool,
    containment: Option<Containment>,
}

impl Job {
    pub(super) fn new(leader: Pid, containment: Containment) -> Self {
        Self {
            leader,
            reaped: false,
            containment: Some(containment),
        }
    }

    /// The runner's child: the job's first process, or bwrap when sandboxed.
    pub(crate) fn leader(&self) -> Pid {
        self.leader
    }

    /// The sandbox's pid 1 (a host pid), when the job runs in a PID namespace whose start bwrap
    /// reported: the parent of the job's first process.
    pub(crate) fn sandbox_init(&self) -> Option<Pid> {
        self.containment.as_ref().and_then(Containment::init)
    }

    /// Notes that the leader has been waited for: its pid may now belong to someone else.
    pub(crate) fn leader_reaped(&mut self) {
        self.reaped = true;
    }

    pub(super) fn signal(&self, signal: Signal) {
        if let Some(c) = &self.containment {
            c.signal(signal);
        }
    }

    /// Kills every process of the job.
    pub(crate) fn kill_all(&self) {
        if let Some(c) = &self.containment {
            c.kill(self.reaped);
        }
    }

    /// Kills what is left of the job.
    pub(super) fn kill(&mut self) {
        self.kill_all();
    }

    /// Waits (bounded) for the job's processes to be gone and releases what held them; says
    /// what the job's bounds refused it.
    pub(crate) async fn release(&mut self) -> Vec<Notice> {
        match self.containment.take() {
            Some(c) => {
                c.kill(self.reaped);
                c.release().await
            }
            None => Vec::new(),
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        self.kill_all();
    }
}
