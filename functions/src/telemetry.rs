//! Structured logs: one JSON object per line on stderr, with the fields of the enclosing
//! request span (request id, method, path) on every line.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;

/// rmcp logs every JSON-RPC request and result whole (`received request`, `response message`)
/// at debug level under `rmcp::service`: tool arguments (task instructions, summaries, paths)
/// that may carry secrets the ledger redacts. At info it logs the lifecycle of each service it
/// runs, and a stateless server runs one per request: three lines (`Service initialized as
/// server`, `input stream terminated`, `serve finished`) that say nothing the request's own
/// log line does not, at a cost of about 6% of the server's CPU under load. That target is
/// capped at `warn` whatever `RUST_LOG` says, so raising the level never writes request bodies
/// to the logs and the default level writes one line per request, ours.
const RMCP_PAYLOAD_CAP: &str = "rmcp::service=warn";

/// `filter` with the payload cap applied (a directive for the same target is replaced). A
/// filter that enables nothing above `error` anywhere is already below the cap and stays as it
/// is.
fn capped(filter: EnvFilter) -> EnvFilter {
    match filter.max_level_hint() {
        Some(most_verbose) if most_verbose <= LevelFilter::ERROR => filter,
        _ => filter.add_directive(RMCP_PAYLOAD_CAP.parse().expect("a valid directive")),
    }
}

/// Installs the JSON subscriber for this process. `RUST_LOG` filters (default `info`).
pub fn init() {
    init_with_default("info");
}

/// Like [`init`], with `default` as the filter when `RUST_LOG` is unset.
pub fn init_with_default(default: &str) {
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(capped(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)),
        ))
        .with_current_span(true)
        .with_span_list(false)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The same format (and payload cap) written to `writer` at `debug`, for tests that inspect
/// logs.
pub fn subscriber_with_writer<W>(writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(capped(EnvFilter::new("debug")))
        .with_current_span(true)
        .with_span_list(false)
        .with_writer(writer)
        .finish()
}

/// Most characters of a caller-chosen value (a path, a tool name, a header) a log line
/// carries; the rest is cut.
pub const MAX_LOGGED_CHARS: usize = 200;

/// `text`, chosen by a caller, as a log line may carry it: at most [`MAX_LOGGED_CHARS`]
/// characters (a cut value ends with `…(N more bytes)`), and control characters, invisible
/// formatting characters (zero-width, bidirectional overrides) and backslashes escaped
/// (`\u{1b}`, `\\`), so a value can neither flood the logs nor forge or disguise what a
/// reader or a terminal shows. Every caller-chosen value that reaches a log goes through here.
pub fn loggable(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_LOGGED_CHARS + 24));
    for (taken, (i, c)) in text.char_indices().enumerate() {
        if taken == MAX_LOGGED_CHARS {
            out.push_str(&format!("…({} more bytes)", text.len() - i));
            break;
        }
        if c == '\\' {
            out.push_str("\\\\");
        } else if c.is_control() || invisible(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// Characters that change how text reads without being seen.
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_text_is_bounded_and_its_control_characters_escaped() {
        assert_eq!(loggable("/api/tools/list"), "/api/tools/list");
        assert_eq!(loggable("a\nb\u{1b}[31m"), "a\\u{a}b\\u{1b}[31m");
        assert_eq!(loggable("x\u{202e}y\\z"), "x\\u{202e}y\\\\z");
        let long = "é".repeat(1000);
        let cut = loggable(&long);
        assert!(cut.starts_with(&"é".repeat(MAX_LOGGED_CHARS)), "{cut}");
        assert!(cut.ends_with(&format!("…({} more bytes)", 2 * (1000 - MAX_LOGGED_CHARS))));
        assert_eq!(
            loggable(&"a".repeat(MAX_LOGGED_CHARS)),
            "a".repeat(MAX_LOGGED_CHARS)
        );
    }

    #[test]
    fn a_filter_quieter_than_the_cap_is_left_as_asked() {
        for requested in ["error", "off", "rmcp=error,error"] {
            let filter = capped(EnvFilter::new(requested)).to_string();
            assert!(!filter.contains("rmcp::service"), "{requested}: {filter}");
        }
    }

    #[test]
    fn the_payload_cap_overrides_a_more_verbose_request() {
        for requested in [
            "info",
            "warn",
            "debug",
            "trace",
            "rmcp=trace",
            "rmcp::service=trace,info",
        ] {
            let filter = capped(EnvFilter::new(requested)).to_string();
            assert!(
                filter.contains("rmcp::service=warn"),
                "{requested}: {filter}"
            );
            for verbose in [
                "rmcp::service=trace",
                "rmcp::service=debug",
                "rmcp::service=info",
            ] {
                assert!(!filter.contains(verbose), "{requested}: {filter}");
            }
        }
    }
}
