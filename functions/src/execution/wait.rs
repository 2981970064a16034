//! How a call waits for its work: woken by the done hint, with polling of durable state as
//! the fallback, reporting progress and passing on the work's output to a caller that asked.

use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::Value;
use uuid::Uuid;
use wc_domain::WorkState;
use wc_store::work::{self, WorkRow};

use crate::kernel::context::ToolContext;
use crate::result::ToolError;

/// Reads the work, waiting up to `wait` for a terminal state: woken by the done hint, with
/// polling of durable state as the fallback. Holds no lock or transaction while waiting.
pub async fn wait_terminal(
    ctx: &ToolContext,
    id: Uuid,
    wait: Duration,
) -> Result<WorkRow, ToolError> {
    let waiter = ctx.deps.wake.on_done(id);
    Ok(wait_with(ctx, id, waiter, wait, false).await?.0)
}

/// The wait of [`wait_terminal`] with a waiter registered before the work was queued, so the
/// first read can wait for a hint (`settle_first`): the work cannot have ended unannounced.
/// Returns the row and the runner's answer (only work the runner executes itself has one).
pub(super) async fn wait_with(
    ctx: &ToolContext,
    id: Uuid,
    mut waiter: crate::wake::Waiter,
    wait: Duration,
    settle_first: bool,
) -> Result<(WorkRow, Option<Value>), ToolError> {
    let deadline = Instant::now() + wait;
    // A caller that asked for progress hears how the work is doing at least this often.
    let step = |left: Duration| match &ctx.progress {
        Some(_) => left.min(PROGRESS_EVERY),
        None => left,
    };
    if settle_first {
        waiter.wait(step(wait)).await;
    }
    let mut reported = 0.0;
    let mut feed = OutputFeed::default();
    loop {
        let (row, answer) = {
            let client = ctx.deps.client().await?;
            work::get_answered(&client, id).await?
        }
        .ok_or_else(|| ToolError::internal("queued work vanished"))?;
        let left = deadline.saturating_duration_since(Instant::now());
        let done = row.is_terminal() || left.is_zero();
        if let Some(progress) = ctx.progress.as_ref().filter(|p| p.wants_output()) {
            feed.pass_on(ctx, id, progress.as_ref(), row.is_terminal())
                .await?;
        }
        if done {
            return Ok((row, answer));
        }
        if let Some(progress) = &ctx.progress {
            let now = progress_of(&row, Utc::now());
            if now.elapsed_s > reported {
                reported = now.elapsed_s;
                progress
                    .report(now.elapsed_s, now.timeout_s, now.message)
                    .await;
            }
        }
        waiter.wait(step(left)).await;
    }
}

/// Most output one read passes on per stream, and in all per stream and call; what is kept
/// beyond is in the result and `job_log`.
const OUTPUT_READ: i64 = 16 * 1024;
const OUTPUT_PASSED: i64 = 256 * 1024;

/// The output of waited-for work passed on to a caller that takes it: where each stream is.
#[derive(Default)]
struct OutputFeed {
    offsets: [i64; 2],
    cut: [bool; 2],
}

impl OutputFeed {
    /// Passes on the output kept since the last call, whole characters only — but all of it
    /// once the work has ended (`last`).
    async fn pass_on(
        &mut self,
        ctx: &ToolContext,
        id: Uuid,
        progress: &dyn crate::kernel::context::Progress,
        last: bool,
    ) -> Result<(), ToolError> {
        for (i, stream) in ["stdout", "stderr"].into_iter().enumerate() {
            while !self.cut[i] {
                let room = (OUTPUT_PASSED - self.offsets[i]).min(OUTPUT_READ);
                let (bytes, _) = {
                    let client = ctx.deps.client().await?;
                    work::read_output(&client, id, stream, self.offsets[i], room).await?
                };
                // Only the read that reaches the end of an ended stream takes a cut tail.
                let reached_end = (bytes.len() as i64) < room;
                let (text, used) = whole_chars(&bytes, last && reached_end);
                if used == 0 {
                    break;
                }
                self.offsets[i] += used as i64;
                progress.output(stream, text).await;
                if self.offsets[i] >= OUTPUT_PASSED {
                    self.cut[i] = true;
                    progress
                        .output(
                            stream,
                            format!("[{stream} continues; the result and job_log keep it]"),
                        )
                        .await;
                }
                if reached_end || !last {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// The text of `bytes` up to the last whole character, and how many bytes that is; an
/// invalid sequence becomes U+FFFD, and a cut character at the end waits for its rest unless
/// this is the `last` read.
fn whole_chars(bytes: &[u8], last: bool) -> (String, usize) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (text.to_owned(), bytes.len()),
        Err(e) if e.error_len().is_none() && !last => {
            let valid = e.valid_up_to();
            (String::from_utf8_lossy(&bytes[..valid]).into_owned(), valid)
        }
        Err(_) => (String::from_utf8_lossy(bytes).into_owned(), bytes.len()),
    }
}

/// How often a waiting call reports progress to a caller that asked for it.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How unfinished work is doing, as progress reports and task status messages say it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkProgress {
    /// Seconds since it was queued (the progress value: it only grows).
    pub elapsed_s: f64,
    /// Its timeout in seconds, the most it can take.
    pub timeout_s: Option<f64>,
    /// Where it is, in words.
    pub message: String,
}

/// The progress of `row` at `now`.
pub fn progress_of(row: &WorkRow, now: chrono::DateTime<Utc>) -> WorkProgress {
    let secs = |from: chrono::DateTime<Utc>| (now - from).num_milliseconds().max(0) as f64 / 1000.0;
    let message = match (row.state, row.leased_at) {
        (WorkState::Leased, Some(at)) => {
            format!("{} running on its runner for {:.1} s", row.tool, secs(at))
        }
        (WorkState::Queued, _) => format!("{} queued for its runner", row.tool),
        (state, _) => format!("{} {state}", row.tool),
    };
    WorkProgress {
        elapsed_s: secs(row.created_at),
        timeout_s: Some(row.item.limits.timeout_ms as f64 / 1000.0),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_passed_on_in_whole_characters() {
        let e_acute = "é".as_bytes();
        let cut = [b"ab".as_slice(), &e_acute[..1]].concat();
        assert_eq!(whole_chars(&cut, false), ("ab".into(), 2), "the rest waits");
        assert_eq!(
            whole_chars(&cut, true),
            ("ab\u{fffd}".into(), 3),
            "unless it is all"
        );
        assert_eq!(whole_chars(e_acute, false), ("é".into(), 2));
        assert_eq!(
            whole_chars(b"a\xffb", false),
            ("a\u{fffd}b".into(), 3),
            "an invalid byte is not waited for"
        );
        assert_eq!(whole_chars(&e_acute[..1], false), (String::new(), 0));
    }
}
