//! The standard output and error of a persistent shell: two pipes the runner reads for as long
//! as the shell lives, keeping the head of what a command writes while it runs and dropping
//! whatever arrives between commands.
//!
//! Invariants:
//! - the pipes are read all the time (a pump per pipe), so nothing that holds them, the shell
//!   or a daemon it left, ever blocks on a full pipe;
//! - every read is a non-blocking `read(2)` made under the pipe's lock, so the boundaries of a
//!   command are exact: [`Output::begin`] drops what the pipes hold when the command is sent,
//!   and [`Output::finish`] keeps what they hold when its report has arrived (all that its
//!   processes wrote before it ended);
//! - at most `limit` bytes of each stream are kept; the rest is counted.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::task::JoinHandle;

/// Bytes one pump reads before it lets a command's start or end take the lock.
const PUMP_BUDGET: usize = 1024 * 1024;

/// What one stream kept of a command's output.
#[derive(Debug, Default)]
pub(super) struct Captured {
    /// The head, up to the limit.
    pub(super) kept: Vec<u8>,
    /// Every byte written, kept or not.
    pub(super) total: u64,
}

impl Captured {
    /// More was written than kept.
    pub(super) fn truncated(&self) -> bool {
        self.total > self.kept.len() as u64
    }
}

/// Both output pipes of a shell and their pumps, which end with it.
pub(super) struct Output {
    stdout: Arc<Pipe>,
    stderr: Arc<Pipe>,
    pumps: [JoinHandle<()>; 2],
}

impl Output {
    /// Starts reading the read ends of the shell's stdout and stderr pipes. Needs a runtime.
    pub(super) fn start(stdout: OwnedFd, stderr: OwnedFd) -> std::io::Result<Output> {
        let stdout = Arc::new(Pipe::new(stdout)?);
        let stderr = Arc::new(Pipe::new(stderr)?);
        let pumps = [
            tokio::spawn(pump(stdout.clone())),
            tokio::spawn(pump(stderr.clone())),
        ];
        Ok(Output {
            stdout,
            stderr,
            pumps,
        })
    }

    /// Drops what the pipes hold now and keeps the head of what comes next, up to `limit`
    /// bytes of each stream.
    pub(super) fn begin(&self, limit: usize) {
        for pipe in [&self.stdout, &self.stderr] {
            let mut window = pipe.lock();
            window.keeping = false;
            // Between commands nothing is kept; what is in the pipe now came before this one.
            pipe.drain(&mut window, pipe.capacity);
            *window = Window {
                keeping: true,
                limit,
                ..Window::default()
            };
        }
    }

    /// Keeps what the pipes hold now, stops keeping, and answers what each stream kept.
    pub(super) fn finish(&self) -> (Captured, Captured) {
        let take = |pipe: &Pipe| {
            let mut window = pipe.lock();
            // Everything the command's processes wrote before it ended is in the pipe; what a
            // daemon writes meanwhile is past its end, and a pipe holds no more than its
            // capacity of what came first.
            pipe.drain(&mut window, pipe.capacity);
            let captured = Captured {
                kept: std::mem::take(&mut window.kept),
                total: window.total,
            };
            *window = Window::default();
            captured
        };
        (take(&self.stdout), take(&self.stderr))
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        // A process that escaped the shell's containment may hold the pipes open for ever.
        for pump in &self.pumps {
            pump.abort();
        }
    }
}

/// What a pipe's reads go to.
#[derive(Debug, Default)]
struct Window {
    /// A command runs: reads are its output.
    keeping: bool,
    limit: usize,
    kept: Vec<u8>,
    total: u64,
}

impl Window {
    fn take(&mut self, bytes: &[u8]) {
        if !self.keeping {
            return;
        }
        self.total += bytes.len() as u64;
        let room = self.limit.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

/// How a drain of a pipe stopped.
#[derive(Debug, PartialEq, Eq)]
enum Drained {
    /// The pipe holds nothing more now.
    Empty,
    /// The budget ran out first.
    Budget,
    /// Every writer is gone (or the pipe cannot be read): nothing more will come.
    Closed,
}

/// One output pipe's read end, non-blocking, and where its reads go.
struct Pipe {
    fd: AsyncFd<OwnedFd>,
    /// The pipe's capacity: the most it can hold at one instant.
    capacity: usize,
    window: Mutex<Window>,
}

impl Pipe {
    fn new(fd: OwnedFd) -> std::io::Result<Pipe> {
        let flags = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETFL)?;
        let flags = nix::fcntl::OFlag::from_bits_retain(flags) | nix::fcntl::OFlag::O_NONBLOCK;
        nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFL(flags))?;
        let capacity = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETPIPE_SZ)
            .ok()
            .and_then(|c| usize::try_from(c).ok())
            .unwrap_or(PUMP_BUDGET);
        // SAFETY: the `OwnedFd` is the descriptor's only owner and moves into the `AsyncFd`,
        // so it stays open, the same pipe, for as long as the `AsyncFd` lives.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(std::io::Error::from)?;
        Ok(Pipe {
            fd,
            capacity,
            window: Mutex::new(Window::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Window> {
        // A panic while holding the window left at worst a half-counted read.
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads what the pipe holds into `window`, up to `budget` bytes.
    fn drain(&self, window: &mut Window, budget: usize) -> Drained {
        let mut buf = [0u8; 64 * 1024];
        let mut read = 0;
        while read < budget {
            let want = buf.len().min(budget - read);
            match nix::unistd::read(self.fd.get_ref(), &mut buf[..want]) {
                Ok(0) => return Drained::Closed,
                Ok(n) => {
                    window.take(&buf[..n]);
                    read += n;
                }
                Err(nix::errno::Errno::EAGAIN) => return Drained::Empty,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read a shell's output");
                    return Drained::Closed;
                }
            }
        }
        Drained::Budget
    }
}

/// Reads `pipe` whenever it is readable, until every writer is gone.
async fn pump(pipe: Arc<Pipe>) {
    loop {
        let Ok(mut ready) = pipe.fd.readable().await else {
            return;
        };
        let drained = {
            let mut window = pipe.lock();
            pipe.drain(&mut window, PUMP_BUDGET)
        };
        match drained {
            // Readiness is cleared only once a read found the pipe empty, so nothing written
            // since goes unnoticed.
            Drained::Empty => ready.clear_ready(),
            Drained::Budget => {}
            Drained::Closed => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn a_window_keeps_the_head_and_counts_the_rest_only_while_keeping() {
        let mut w = Window::default();
        w.take(b"between");
        assert_eq!((w.kept.len(), w.total), (0, 0));
        w = Window {
            keeping: true,
            limit: 4,
            ..Window::default()
        };
        w.take(b"abc");
        w.take(b"defg");
        assert_eq!(w.kept, b"abcd");
        assert_eq!(w.total, 7);
    }

    // Two workers: the pumps read while this test's thread blocks in its writes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn output_before_a_command_is_dropped_and_output_before_its_end_is_kept() {
        let (out_r, mut out_w) = std::io::pipe().unwrap();
        let (err_r, mut err_w) = std::io::pipe().unwrap();
        let output = Output::start(out_r.into(), err_r.into()).unwrap();
        out_w.write_all(b"stale").unwrap();
        output.begin(3);
        out_w.write_all(b"fresh").unwrap();
        err_w.write_all(b"e").unwrap();
        let (out, err) = output.finish();
        assert_eq!((out.kept.as_slice(), out.total), (&b"fre"[..], 5));
        assert!(out.truncated());
        assert_eq!((err.kept.as_slice(), err.total), (&b"e"[..], 1));
        assert!(!err.truncated());
        // Between commands: dropped, and the writer never blocks.
        for _ in 0..64 {
            out_w.write_all(&[b'x'; 64 * 1024]).unwrap();
        }
    }
}
