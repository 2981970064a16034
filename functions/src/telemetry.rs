//! Structured logs: one JSON object per line on stderr, with the fields of the enclosing
//! request span (request id, method, path) on every line.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Installs the JSON subscriber for this process. `RUST_LOG` filters (default `info`).
pub fn init() {
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter())
        .with_current_span(true)
        .with_span_list(false)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The same format written to `writer`, for tests that inspect logs.
pub fn subscriber_with_writer<W>(writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(EnvFilter::new("debug"))
        .with_current_span(true)
        .with_span_list(false)
        .with_writer(writer)
        .finish()
}

fn filter() -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"))
}
