//! Structured logs: one JSON object per line on stderr, with the fields of the enclosing
//! request span (request id, method, path) on every line.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Installs the JSON subscriber for this process. `RUST_LOG` filters (default `info`).
pub fn init() {
    init_with_default("info");
}

/// Like [`init`], with `default` as the filter when `RUST_LOG` is unset.
pub fn init_with_default(default: &str) {
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)),
        )
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
