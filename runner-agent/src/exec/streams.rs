//! A job's standard streams: its stdin written once and closed, and of stdout and stderr the
//! head up to the limit kept, the rest read, counted and dropped, so a chatty child never
//! blocks on a full pipe.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::ChildStdin;
use tokio::sync::mpsc;
use wc_runner_protocol::{MAX_CHUNK_BYTES, Stream};

/// Kept output as the executor produces it: raw bytes at `offset` in `stream`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputPiece {
    /// Which stream.
    pub stream: Stream,
    /// Byte offset of `data[0]` in the stream.
    pub offset: u64,
    /// At most [`MAX_CHUNK_BYTES`] bytes.
    pub data: Vec<u8>,
}

/// Writes the work's stdin and closes it. A child that exits without reading everything is not
/// an error: its stdin was offered.
pub(super) async fn feed(stdin: Option<ChildStdin>, text: Option<String>) {
    let (Some(mut pipe), Some(text)) = (stdin, text) else {
        return;
    };
    match pipe.write_all(text.as_bytes()).await {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => tracing::warn!(error = %e, "cannot write stdin"),
    }
}

/// The capture of one output stream: its head up to `limit` goes to `output`, all of it is
/// counted.
pub(super) struct Capture {
    stream: Stream,
    limit: u64,
    pub(super) total: u64,
    output: Option<mpsc::Sender<OutputPiece>>,
}

impl Capture {
    pub(super) fn new(
        stream: Stream,
        limit: u64,
        output: Option<mpsc::Sender<OutputPiece>>,
    ) -> Self {
        Self {
            stream,
            limit,
            total: 0,
            output,
        }
    }

    pub(super) fn truncated(&self) -> bool {
        self.total > self.limit
    }

    /// Reads `pipe` to its end.
    pub(super) async fn pump(&mut self, pipe: Option<impl AsyncRead + Unpin>) {
        let Some(mut pipe) = pipe else {
            return;
        };
        // Reads of at most one chunk keep every piece within MAX_CHUNK_BYTES.
        let mut buf = vec![0; MAX_CHUNK_BYTES];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => self.take(&buf[..n]).await,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(stream = ?self.stream, error = %e, "cannot read output");
                    return;
                }
            }
        }
    }

    async fn take(&mut self, bytes: &[u8]) {
        let offset = self.total;
        self.total += bytes.len() as u64;
        let room = usize::try_from(self.limit.saturating_sub(offset)).unwrap_or(usize::MAX);
        let kept = &bytes[..bytes.len().min(room)];
        if kept.is_empty() {
            return;
        }
        if let Some(output) = &self.output {
            let piece = OutputPiece {
                stream: self.stream,
                offset,
                data: kept.to_vec(),
            };
            if output.send(piece).await.is_err() {
                // Nobody listens any more; the work still runs to its end.
                self.output = None;
            }
        }
    }
}
