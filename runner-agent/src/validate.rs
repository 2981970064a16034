//! Validate work: a toolchain's checker or test runner ([`Validator`]) run as a job in the
//! work's cwd, its whole output read by the parser of its format ([`parse`]), and answered
//! with counts, failing identities and diagnostics ([`ValidationAnswer`]) whatever its exit
//! status.
//!
//! Invariants:
//! - the command line is built here from the typed op, never from caller text read by a
//!   shell; every scope value is a name that cannot be taken for an option;
//! - the command runs through [`exec::execute`] like any job (sandbox, allow-list environment,
//!   process group, timeout, stop), so a build script or test runs confined;
//! - the parser reads every byte of both streams (up to the protocol's per-stream maximum),
//!   while the work keeps and reports only its own output limit: the answer does not depend
//!   on how much output the caller keeps;
//! - an answer is given only when the command exited; a timeout or stop gives none.

mod parse;

use std::collections::BTreeMap;
use std::time::Instant;

use tokio::sync::{mpsc, watch};
use wc_runner_protocol::{
    CargoTargets, MAX_OUTPUT_BYTES_PER_STREAM, MAX_PARSED_LINE_BYTES, OpErrorKind,
    PROTOCOL_VERSION, Stream, Termination, ValidateOp, Validator, WorkAnswer, WorkItem, WorkLimits,
    WorkOutcome, WorkSpec,
};

use crate::answer::{self, Refusal};
use crate::confine;
use crate::exec::{self, Host, OutputPiece, StopPolicy};

use parse::{Files, Parser};

/// Runs one validate work item; its kept output goes to `output` as a job's does. `cancel`
/// turning `true` stops it. Never fails: a refusal is [`Termination::Rejected`].
pub async fn execute(
    item: &WorkItem,
    host: &Host,
    cancel: watch::Receiver<bool>,
    output: mpsc::Sender<OutputPiece>,
    policy: &StopPolicy,
) -> WorkOutcome {
    answer::traced("validate", item, run(item, host, cancel, output, policy)).await
}

async fn run(
    item: &WorkItem,
    host: &Host,
    cancel: watch::Receiver<bool>,
    output: mpsc::Sender<OutputPiece>,
    policy: &StopPolicy,
) -> WorkOutcome {
    let started = Instant::now();
    let picked = answer::op_of(item, "validate", |spec| match spec {
        WorkSpec::Validate(op) => Some(op),
        _ => None,
    });
    let op = match picked {
        Ok(op) => op,
        Err(refusal) => return answer::rejected(started, refusal),
    };
    let resolved = host.boundary(&item.project).and_then(|b| {
        let cwd = confine::resolve_cwd(b.root(), item.cwd.as_ref())?;
        Ok((b.root().to_owned(), cwd))
    });
    let (root, cwd) = match resolved {
        Ok(found) => found,
        Err(e) => {
            let refusal = Refusal::new(OpErrorKind::ProjectUnavailable, e.to_string());
            return answer::rejected(started, refusal);
        }
    };
    let job = WorkItem {
        protocol_version: PROTOCOL_VERSION,
        work_id: item.work_id,
        project: item.project.clone(),
        cwd: item.cwd.clone(),
        spec: WorkSpec::Process { argv: argv(op) },
        stdin: None,
        env: env(op, host, &item.project),
        limits: WorkLimits {
            timeout_ms: item.limits.timeout_ms,
            output_bytes_per_stream: MAX_OUTPUT_BYTES_PER_STREAM,
        },
    };
    let kept = item.limits.output_bytes_per_stream;
    let (tx, mut rx) = mpsc::channel::<OutputPiece>(64);
    let mut parser = Parser::new(op.validator, Files { root, cwd });
    let read = async {
        let mut lines = [Lines::default(), Lines::default()];
        while let Some(piece) = rx.recv().await {
            let i = usize::from(piece.stream == Stream::Stderr);
            lines[i].feed(&piece.data, |line| match line {
                Some(line) => parser.line(piece.stream, line),
                None => parser.skipped(),
            });
            // The work's own output: its head, up to its limit.
            if piece.offset < kept {
                let end = usize::try_from(kept - piece.offset)
                    .unwrap_or(usize::MAX)
                    .min(piece.data.len());
                let forwarded = OutputPiece {
                    data: piece.data[..end].to_vec(),
                    ..piece
                };
                // A closed receiver only means nobody keeps the output; the work goes on.
                let _ = output.send(forwarded).await;
            }
        }
        for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
            if let Some(last) = lines[i].rest() {
                parser.line(stream, &last);
            }
        }
    };
    let (mut outcome, ()) = tokio::join!(exec::execute(&job, host, cancel, tx, policy), read);
    let ran_out = outcome.stdout_truncated || outcome.stderr_truncated;
    outcome.stdout_truncated = outcome.stdout_bytes > kept;
    outcome.stderr_truncated = outcome.stderr_bytes > kept;
    if outcome.termination == Termination::Exited {
        if ran_out {
            // Output past the protocol's maximum was never read.
            parser.skipped();
        }
        let answer = WorkAnswer::Validate(parser.finish(outcome.exit_code));
        if let Err(e) = answer.validate() {
            outcome.error = Some(format!("the validation's answer is over its bound: {e}"));
        } else {
            outcome.answer = Some(answer);
        }
    }
    outcome
}

/// Splits a stream into lines, skipping (and reporting as `None`) any longer than
/// [`MAX_PARSED_LINE_BYTES`].
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
    /// The current line is over the bound and is being skipped.
    skipping: bool,
}

impl Lines {
    fn feed(&mut self, mut data: &[u8], mut each: impl FnMut(Option<&[u8]>)) {
        while let Some(nl) = data.iter().position(|&b| b == b'\n') {
            if self.skipping {
                self.skipping = false;
            } else if self.buf.len() + nl > MAX_PARSED_LINE_BYTES {
                self.buf.clear();
                each(None);
            } else if self.buf.is_empty() {
                each(Some(&data[..nl]));
            } else {
                self.buf.extend_from_slice(&data[..nl]);
                each(Some(&self.buf));
                self.buf.clear();
            }
            data = &data[nl + 1..];
        }
        if self.skipping {
            return;
        }
        if self.buf.len() + data.len() > MAX_PARSED_LINE_BYTES {
            self.buf.clear();
            self.skipping = true;
            each(None);
        } else {
            self.buf.extend_from_slice(data);
        }
    }

    /// The last line, when the stream did not end with a newline.
    fn rest(&mut self) -> Option<Vec<u8>> {
        (!self.skipping && !self.buf.is_empty()).then(|| std::mem::take(&mut self.buf))
    }
}

/// The command line of `op`.
fn argv(op: &ValidateOp) -> Vec<String> {
    let s = &op.scope;
    let mut argv: Vec<String> = Vec::new();
    let mut push = |a: &str| argv.push(a.to_owned());
    let cargo_scope = |push: &mut dyn FnMut(&str)| {
        if let Some(p) = &s.package {
            push("--package");
            push(p);
        }
        if !s.features.is_empty() {
            push("--features");
            push(&s.features.join(","));
        }
        if s.all_features {
            push("--all-features");
        }
        if s.no_default_features {
            push("--no-default-features");
        }
        match s.targets {
            CargoTargets::Default => {}
            CargoTargets::Lib => push("--lib"),
            CargoTargets::Bins => push("--bins"),
            CargoTargets::Tests => push("--tests"),
            CargoTargets::All => push("--all-targets"),
        }
    };
    match op.validator {
        Validator::CargoCheck | Validator::CargoClippy => {
            let sub = if op.validator == Validator::CargoCheck {
                "check"
            } else {
                "clippy"
            };
            for a in ["cargo", sub, "--message-format=json"] {
                push(a);
            }
            cargo_scope(&mut push);
        }
        Validator::CargoTest => {
            for a in ["cargo", "test", "--no-fail-fast", "--message-format=json"] {
                push(a);
            }
            cargo_scope(&mut push);
            if let Some(f) = &s.test_filter {
                push("--");
                push(f);
            }
        }
        Validator::CargoFmt => {
            for a in ["cargo", "fmt", "--check"] {
                push(a);
            }
            if let Some(p) = &s.package {
                push("--package");
                push(p);
            }
            // File names only: the diff itself is not evidence.
            push("--");
            push("-l");
        }
        Validator::GoTest => {
            for a in ["go", "test", "-json"] {
                push(a);
            }
            if let Some(f) = &s.test_filter {
                push("-run");
                push(f);
            }
            push(s.package.as_deref().unwrap_or("./..."));
        }
        Validator::Pytest => {
            for a in [
                "python3",
                "-m",
                "pytest",
                "-q",
                "-rfE",
                "--color=no",
                "-p",
                "no:cacheprovider",
            ] {
                push(a);
            }
            if let Some(f) = &s.test_filter {
                push("-k");
                push(f);
            }
            if let Some(p) = &s.path {
                push("--");
                push(p.as_str());
            }
        }
    }
    argv
}

/// What the command needs in its environment beyond the job's: plain output, no toolchain
/// download (Go), no bytecode written into the project (Python). A variable the project
/// passes itself is left as passed. Toolchain caches (`~/.cargo`, `~/.cache`) are the
/// sandbox's writable defaults.
fn env(op: &ValidateOp, host: &Host, project: &str) -> BTreeMap<String, String> {
    let passes = |name: &str| {
        host.project(project)
            .is_some_and(|p| p.env_pass().iter().any(|n| n.as_str() == name))
    };
    let wanted: &[(&str, &str)] = match op.validator {
        v if v.is_cargo() => &[
            ("CARGO_TERM_COLOR", "never"),
            ("CARGO_TERM_PROGRESS_WHEN", "never"),
        ],
        Validator::GoTest => &[("GOTOOLCHAIN", "local")],
        _ => &[("PYTHONDONTWRITEBYTECODE", "1")],
    };
    wanted
        .iter()
        .filter(|(k, _)| !passes(k))
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_across_pieces_and_overlong_ones_skipped() {
        let mut l = Lines::default();
        let mut seen: Vec<Option<String>> = Vec::new();
        let mut push = |x: Option<&[u8]>| seen.push(x.map(|b| String::from_utf8_lossy(b).into()));
        l.feed(b"ab", &mut push);
        l.feed(b"c\nde\n", &mut push);
        l.feed(&vec![b'x'; MAX_PARSED_LINE_BYTES + 1], &mut push);
        l.feed(b"xx\nlast", &mut push);
        assert_eq!(seen, [Some("abc".into()), Some("de".into()), None]);
        assert_eq!(l.rest().as_deref(), Some(&b"last"[..]));
    }

    #[test]
    fn scopes_become_options_and_filters_after_a_separator() {
        let op = |validator, scope| ValidateOp { validator, scope };
        let scope = wc_runner_protocol::ValidationScope {
            package: Some("alpha".into()),
            test_filter: Some("adds".into()),
            features: vec!["a".into(), "b".into()],
            targets: CargoTargets::Tests,
            ..Default::default()
        };
        assert_eq!(
            argv(&op(Validator::CargoTest, scope)).join(" "),
            "cargo test --no-fail-fast --message-format=json --package alpha --features a,b --tests -- adds"
        );
        let go = wc_runner_protocol::ValidationScope {
            test_filter: Some("TestX".into()),
            ..Default::default()
        };
        assert_eq!(
            argv(&op(Validator::GoTest, go)).join(" "),
            "go test -json -run TestX ./..."
        );
        assert_eq!(
            argv(&op(Validator::CargoFmt, Default::default())).join(" "),
            "cargo fmt --check -- -l"
        );
    }
}
