//! Readers of validation output: one per toolchain format, fed every line of both streams in
//! the order each stream printed them, and asked for a [`ValidationAnswer`] once the command
//! has exited. Pure: no I/O but the path check of [`Files`].
//!
//! Invariant: `complete` is true only when every summary the format promises was seen and no
//! line that could hold a count was skipped; otherwise the counts are a lower bound.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use wc_runner_protocol::{
    Diagnostic, DiagnosticCounts, MAX_DIAGNOSTIC_MESSAGE_BYTES, MAX_FAILURE_IDENTITY_BYTES,
    MAX_SHOWN_DIAGNOSTICS, MAX_VALIDATION_FAILURES, ParserIdentity, RelativePath, Stream,
    TestCounts, ValidationAnswer, Validator,
};

/// Where a diagnostic's file lies: the project root and the directory the command ran in.
pub(crate) struct Files {
    pub(crate) root: PathBuf,
    pub(crate) cwd: PathBuf,
}

impl Files {
    /// `name` (absolute, or relative to `base` or one of its parents up to the root, or to the
    /// cwd) as a path relative to the root, when it is inside it.
    fn relative(&self, name: &str, base: Option<&Path>) -> Option<RelativePath> {
        let name = Path::new(name);
        let found = if name.is_absolute() {
            Some(name.to_path_buf())
        } else {
            base.into_iter()
                .flat_map(Path::ancestors)
                .take_while(|d| d.starts_with(&self.root))
                .chain([self.cwd.as_path(), self.root.as_path()])
                .map(|d| d.join(name))
                .find(|p| p.exists())
        }?;
        let rel = found.strip_prefix(&self.root).ok()?;
        RelativePath::parse(rel.to_str()?).ok()
    }
}

/// What every format collects.
#[derive(Default)]
struct Found {
    tests: Option<TestCounts>,
    /// Every failing identity seen (each is counted once).
    seen: HashSet<String>,
    failures: Vec<String>,
    failures_total: u64,
    diagnostics: DiagnosticCounts,
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
    /// A line too long to read was skipped.
    skipped: bool,
}

impl Found {
    fn fail(&mut self, identity: &str) {
        let identity = cut(identity.trim(), MAX_FAILURE_IDENTITY_BYTES);
        if identity.is_empty() || !self.seen.insert(identity.clone()) {
            return;
        }
        self.failures_total += 1;
        if self.failures.len() < MAX_VALIDATION_FAILURES {
            self.failures.push(identity);
        }
    }

    fn tests(&mut self) -> &mut TestCounts {
        self.tests.get_or_insert_with(TestCounts::default)
    }

    fn diagnostic(&mut self, d: Diagnostic) {
        let (count, shown) = match d.level.as_str() {
            "error" => (&mut self.diagnostics.errors, &mut self.errors),
            "warning" => (&mut self.diagnostics.warnings, &mut self.warnings),
            _ => {
                self.diagnostics.notes += 1;
                return;
            }
        };
        *count += 1;
        if shown.len() < MAX_SHOWN_DIAGNOSTICS {
            shown.push(d);
        }
    }

    fn answer(self, name: &str, complete: bool) -> ValidationAnswer {
        let mut shown = self.errors;
        shown.extend(self.warnings);
        shown.truncate(MAX_SHOWN_DIAGNOSTICS);
        ValidationAnswer {
            parser: ParserIdentity {
                name: name.to_owned(),
                version: 1,
            },
            complete: complete && !self.skipped,
            tests: self.tests,
            failures: self.failures,
            failures_total: self.failures_total,
            diagnostics: self.diagnostics,
            shown_diagnostics: shown,
        }
    }
}

/// `s` cut to at most `max` bytes on a character boundary.
fn cut(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// A reader of one validator's output.
pub(crate) struct Parser {
    validator: Validator,
    files: Files,
    found: Found,
    /// Cargo: `build-finished` was seen, and whether the build succeeded.
    build: Option<bool>,
    /// libtest: `running N tests` lines and `test result:` lines seen.
    runs: (u64, u64),
    /// go test: packages that started, packages that ended, packages with a failing test.
    packages: (Vec<String>, Vec<String>, Vec<String>),
    /// pytest: its final counts line was seen.
    summary: bool,
    /// Cargo's own `error:` lines (failures before any build), kept for when no build ran.
    cargo_errors: Vec<String>,
}

impl Parser {
    pub(crate) fn new(validator: Validator, files: Files) -> Parser {
        Parser {
            validator,
            files,
            found: Found::default(),
            build: None,
            runs: (0, 0),
            packages: (Vec::new(), Vec::new(), Vec::new()),
            summary: false,
            cargo_errors: Vec::new(),
        }
    }

    /// Marks that a line of `stream` was too long to read.
    pub(crate) fn skipped(&mut self) {
        self.found.skipped = true;
    }

    /// Reads one line (without its newline) of `stream`.
    pub(crate) fn line(&mut self, stream: Stream, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        let line = line.trim_end_matches('\r');
        match (self.validator, stream) {
            (Validator::CargoCheck | Validator::CargoClippy, Stream::Stdout) => self.cargo(line),
            (Validator::CargoTest, Stream::Stdout) => {
                if line.starts_with('{') {
                    self.cargo(line)
                } else {
                    self.libtest(line)
                }
            }
            (Validator::CargoFmt, Stream::Stdout) => self.rustfmt(line),
            (Validator::GoTest, Stream::Stdout) => self.go(line),
            (Validator::GoTest, Stream::Stderr) => self.go_compiler(line),
            (Validator::Pytest, Stream::Stdout) => self.pytest(line),
            (Validator::CargoFmt, Stream::Stderr) => {
                if let Some(msg) = line.strip_prefix("error") {
                    self.cargo_errors
                        .push(msg.trim_start_matches(':').trim().to_owned());
                }
            }
            (_, Stream::Stderr) if self.validator.is_cargo() => {
                if let Some(msg) = line.strip_prefix("error: ") {
                    self.cargo_errors.push(msg.to_owned());
                }
            }
            (_, Stream::Stderr) => {}
        }
    }

    /// The answer, once the command exited with `exit_code`.
    pub(crate) fn finish(mut self, exit_code: Option<i32>) -> ValidationAnswer {
        let cargo_failed_early = |p: &mut Parser| {
            // Cargo stopped before building (an unknown package, a broken manifest).
            for e in std::mem::take(&mut p.cargo_errors) {
                p.found.diagnostic(Diagnostic {
                    level: "error".into(),
                    file: None,
                    line: None,
                    code: None,
                    message: cut(&e, MAX_DIAGNOSTIC_MESSAGE_BYTES),
                });
            }
            p.found.fail("cargo");
        };
        match self.validator {
            Validator::CargoCheck | Validator::CargoClippy => {
                if self.build.is_none() {
                    cargo_failed_early(&mut self);
                }
                let complete = self.build.is_some();
                self.found.answer("cargo-json", complete)
            }
            Validator::CargoTest => {
                let complete = match self.build {
                    None => {
                        cargo_failed_early(&mut self);
                        false
                    }
                    // The build failed: no test ran, and none is counted.
                    Some(false) => true,
                    Some(true) => self.runs.0 > 0 && self.runs.0 == self.runs.1,
                };
                if self.build == Some(true) && self.runs.0 == 0 {
                    // Built, but no test binary ran to the end (the filter matched no target
                    // would still print `running 0 tests`).
                    self.found.tests();
                }
                self.found.answer("cargo-libtest", complete)
            }
            Validator::CargoFmt => {
                let complete = match exit_code {
                    Some(0) => self.found.failures_total == 0 && self.cargo_errors.is_empty(),
                    Some(1) => self.found.failures_total > 0 && self.cargo_errors.is_empty(),
                    _ => false,
                };
                if !self.cargo_errors.is_empty() {
                    cargo_failed_early(&mut self);
                }
                self.found.answer("rustfmt-check", complete)
            }
            Validator::GoTest => {
                let (started, ended, _) = &self.packages;
                let complete = !started.is_empty() && started.iter().all(|p| ended.contains(p));
                self.found.answer("go-test-json", complete)
            }
            Validator::Pytest => {
                // 0: all passed, 1: some failed, 5: none collected; others are interruptions.
                let complete = self.summary && matches!(exit_code, Some(0 | 1 | 5));
                if exit_code == Some(5) {
                    self.found.tests();
                }
                self.found.answer("pytest-summary", complete)
            }
        }
    }

    /// One line of Cargo's `--message-format=json`.
    fn cargo(&mut self, line: &str) {
        let Ok(msg) = serde_json::from_str::<Value>(line) else {
            return;
        };
        match msg["reason"].as_str() {
            Some("build-finished") => self.build = Some(msg["success"] == Value::Bool(true)),
            Some("compiler-message") => self.compiler_message(&msg),
            _ => {}
        }
    }

    fn compiler_message(&mut self, msg: &Value) {
        let m = &msg["message"];
        let level = m["level"].as_str().unwrap_or("");
        let text = m["message"].as_str().unwrap_or("");
        let spans = m["spans"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        // rustc's own summaries ("aborting due to 2 previous errors", "1 warning emitted")
        // and pointers to `--explain` count nothing.
        if level == "failure-note"
            || (spans.is_empty()
                && (text.starts_with("aborting due to")
                    || text.ends_with(" emitted")
                    || text.contains("warnings emitted")))
        {
            return;
        }
        let level = match level {
            "error" | "error: internal compiler error" => "error",
            "warning" => "warning",
            _ => "note",
        };
        let primary = spans
            .iter()
            .find(|s| s["is_primary"] == Value::Bool(true))
            .or(spans.first());
        let manifest_dir = msg["manifest_path"]
            .as_str()
            .and_then(|p| Path::new(p).parent().map(Path::to_path_buf));
        let file = primary
            .and_then(|s| s["file_name"].as_str())
            .and_then(|f| self.files.relative(f, manifest_dir.as_deref()));
        let line = primary
            .and_then(|s| s["line_start"].as_u64())
            .and_then(|l| u32::try_from(l).ok());
        if level == "error" {
            let target = msg["target"]["name"].as_str().unwrap_or("unknown");
            self.found.fail(&format!("build:{target}"));
        }
        self.found.diagnostic(Diagnostic {
            level: level.into(),
            file,
            line,
            code: m["code"]["code"]
                .as_str()
                .map(|c| cut(c, MAX_DIAGNOSTIC_MESSAGE_BYTES)),
            message: cut(text, MAX_DIAGNOSTIC_MESSAGE_BYTES),
        });
    }

    /// One line of a libtest binary's plain output.
    fn libtest(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix("running ")
            && rest
                .strip_suffix(" tests")
                .or_else(|| rest.strip_suffix(" test"))
                .is_some_and(|n| n.parse::<u64>().is_ok())
        {
            self.runs.0 += 1;
            self.found.tests();
        } else if let Some(rest) = line.strip_prefix("test result: ") {
            let counts = |name: &str| count_before(rest, name);
            let (Some(passed), Some(failed), Some(ignored)) =
                (counts("passed"), counts("failed"), counts("ignored"))
            else {
                return;
            };
            self.runs.1 += 1;
            let t = self.found.tests();
            t.passed += passed;
            t.failed += failed;
            t.ignored += ignored;
        } else if let Some(rest) = line.strip_prefix("test ")
            && let Some(name) = rest.strip_suffix(" ... FAILED")
        {
            self.found.fail(name);
        }
    }

    /// One line of `cargo fmt --check -- -l`: a file rustfmt would change.
    fn rustfmt(&mut self, line: &str) {
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        let file = self.files.relative(line, None);
        let shown = file.as_ref().map_or(line, RelativePath::as_str).to_owned();
        self.found.fail(&format!("fmt:{shown}"));
        self.found.diagnostic(Diagnostic {
            level: "error".into(),
            file,
            line: None,
            code: None,
            message: "rustfmt would reformat this file".into(),
        });
    }

    /// One event of `go test -json`.
    fn go(&mut self, line: &str) {
        let Ok(ev) = serde_json::from_str::<Value>(line) else {
            // Before Go 1.24 a package that does not build is a plain line:
            // `FAIL\t<package> [build failed]` (or `[setup failed]`).
            let mut words = line.split_whitespace();
            if let (Some("FAIL"), Some(package), Some("[build" | "[setup")) =
                (words.next(), words.next(), words.next())
            {
                self.found.fail(&format!("build:{package}"));
                self.found.tests();
                for list in [&mut self.packages.0, &mut self.packages.1] {
                    if !list.iter().any(|p| p == package) {
                        list.push(package.to_owned());
                    }
                }
            }
            return;
        };
        let (Some(action), Some(package)) = (ev["Action"].as_str(), ev["Package"].as_str()) else {
            return;
        };
        let test = ev["Test"].as_str().filter(|t| !t.is_empty());
        if !self.packages.0.iter().any(|p| p == package) {
            self.packages.0.push(package.to_owned());
        }
        match (action, test) {
            ("pass", Some(_)) => self.found.tests().passed += 1,
            ("skip", Some(_)) => self.found.tests().ignored += 1,
            ("fail", Some(t)) => {
                self.found.tests().failed += 1;
                self.found.fail(&format!("{package}.{t}"));
                if !self.packages.2.iter().any(|p| p == package) {
                    self.packages.2.push(package.to_owned());
                }
            }
            ("pass" | "skip" | "fail", None) => {
                if action == "fail" && !self.packages.2.iter().any(|p| p == package) {
                    // A package that fails without a failing test did not build (or its
                    // test binary crashed).
                    self.found.fail(&format!("build:{package}"));
                }
                self.found.tests();
                if !self.packages.1.iter().any(|p| p == package) {
                    self.packages.1.push(package.to_owned());
                }
            }
            _ => {}
        }
    }

    /// A Go compiler error on standard error: `path/file.go:LINE:COL: message`.
    fn go_compiler(&mut self, line: &str) {
        let mut parts = line.splitn(4, ':');
        let (Some(file), Some(l), Some(_col), Some(msg)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return;
        };
        let Ok(l) = l.parse::<u32>() else { return };
        if !file.ends_with(".go") {
            return;
        }
        self.found.diagnostic(Diagnostic {
            level: "error".into(),
            file: self.files.relative(file, None),
            line: Some(l),
            code: None,
            message: cut(msg.trim(), MAX_DIAGNOSTIC_MESSAGE_BYTES),
        });
    }

    /// One line of `pytest -q -rfE`: `FAILED`/`ERROR` short summaries and the final counts.
    fn pytest(&mut self, line: &str) {
        for prefix in ["FAILED ", "ERROR "] {
            if let Some(rest) = line.strip_prefix(prefix) {
                let id = rest.split(" - ").next().unwrap_or(rest);
                self.found.fail(id);
                return;
            }
        }
        let body = line.trim_matches(|c| c == '=' || c == ' ');
        let Some((counts, _time)) = body.rsplit_once(" in ") else {
            return;
        };
        if counts == "no tests ran" {
            self.summary = true;
            self.found.tests();
            return;
        }
        let mut t = TestCounts::default();
        let mut warnings = 0;
        for item in counts.split(", ") {
            let Some((n, what)) = item.split_once(' ') else {
                return;
            };
            let Ok(n) = n.parse::<u64>() else { return };
            match what {
                "passed" | "xpassed" => t.passed += n,
                "failed" | "error" | "errors" => t.failed += n,
                "skipped" | "xfailed" => t.ignored += n,
                "warning" | "warnings" => warnings += n,
                "deselected" => {}
                _ => return,
            }
        }
        self.summary = true;
        self.found.tests = Some(t);
        self.found.diagnostics.warnings += warnings;
    }
}

/// The number before ` <name>` in libtest's `ok. 3 passed; 1 failed; 0 ignored; …`.
fn count_before(summary: &str, name: &str) -> Option<u64> {
    summary
        .split([';', '.'])
        .map(str::trim)
        .find_map(|part| part.strip_suffix(name)?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parser(v: Validator) -> Parser {
        Parser::new(
            v,
            Files {
                root: PathBuf::from("/nonexistent/root"),
                cwd: PathBuf::from("/nonexistent/root"),
            },
        )
    }

    fn feed(p: &mut Parser, stream: Stream, text: &str) {
        for line in text.lines() {
            p.line(stream, line.as_bytes());
        }
    }

    #[test]
    fn libtest_summaries_are_summed_and_failures_named() {
        let mut p = parser(Validator::CargoTest);
        feed(
            &mut p,
            Stream::Stdout,
            r#"{"reason":"build-finished","success":true}

running 2 tests
test tests::adds ... ok
test tests::subtracts ... FAILED

failures:
test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

running 1 test
test src/lib.rs - add (line 3) ... ignored
test result: ok. 0 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s
"#,
        );
        let a = p.finish(Some(101));
        assert!(a.complete);
        assert_eq!(
            a.tests,
            Some(TestCounts {
                passed: 1,
                failed: 1,
                ignored: 1
            })
        );
        assert_eq!(a.failures, ["tests::subtracts"]);
        assert_eq!(a.parser.name, "cargo-libtest");
    }

    #[test]
    fn a_test_binary_that_dies_leaves_the_evidence_incomplete() {
        let mut p = parser(Validator::CargoTest);
        feed(
            &mut p,
            Stream::Stdout,
            "{\"reason\":\"build-finished\",\"success\":true}\nrunning 3 tests\ntest a ... ok\n",
        );
        let a = p.finish(Some(101));
        assert!(!a.complete);
        assert_eq!(a.tests.unwrap().passed, 0);
    }

    #[test]
    fn compiler_messages_count_by_level_without_rustc_summaries() {
        let mut p = parser(Validator::CargoCheck);
        let msg = |level: &str, text: &str, code: &str, spans: &str| {
            format!(
                r#"{{"reason":"compiler-message","package_id":"alpha 0.1.0","manifest_path":"/x/Cargo.toml","target":{{"name":"alpha"}},"message":{{"message":"{text}","code":{code},"level":"{level}","spans":[{spans}]}}}}"#
            )
        };
        let span = r#"{"file_name":"src/lib.rs","line_start":7,"is_primary":true}"#;
        let lines = [
            msg(
                "warning",
                "unused variable: `x`",
                r#"{"code":"unused_variables"}"#,
                span,
            ),
            msg("error", "mismatched types", r#"{"code":"E0308"}"#, span),
            msg("error", "aborting due to 1 previous error", "null", ""),
            msg("warning", "1 warning emitted", "null", ""),
            msg(
                "failure-note",
                "For more information, try rustc --explain",
                "null",
                "",
            ),
            r#"{"reason":"build-finished","success":false}"#.to_owned(),
        ];
        for l in &lines {
            p.line(Stream::Stdout, l.as_bytes());
        }
        let a = p.finish(Some(101));
        assert!(a.complete);
        assert_eq!(
            a.diagnostics,
            DiagnosticCounts {
                errors: 1,
                warnings: 1,
                notes: 0
            }
        );
        assert_eq!(a.failures, ["build:alpha"]);
        assert_eq!(a.shown_diagnostics[0].level, "error");
        assert_eq!(a.shown_diagnostics[0].code.as_deref(), Some("E0308"));
        assert_eq!(a.shown_diagnostics[0].line, Some(7));
        assert_eq!(a.shown_diagnostics[1].level, "warning");
    }

    #[test]
    fn cargo_stopping_before_a_build_is_a_named_incomplete_failure() {
        let mut p = parser(Validator::CargoCheck);
        feed(
            &mut p,
            Stream::Stderr,
            "error: package ID specification `nope` did not match any packages",
        );
        let a = p.finish(Some(101));
        assert!(!a.complete);
        assert_eq!(a.failures, ["cargo"]);
        assert!(a.shown_diagnostics[0].message.contains("nope"));
    }

    #[test]
    fn go_events_count_tests_and_name_failures_and_broken_builds() {
        let mut p = parser(Validator::GoTest);
        feed(
            &mut p,
            Stream::Stdout,
            r#"{"Action":"run","Package":"ex/a","Test":"TestOk"}
{"Action":"pass","Package":"ex/a","Test":"TestOk"}
{"Action":"fail","Package":"ex/a","Test":"TestBad"}
{"Action":"skip","Package":"ex/a","Test":"TestSkip"}
{"Action":"fail","Package":"ex/a"}
{"Action":"output","Package":"ex/b","Output":"FAIL ex/b [build failed]\n"}
{"Action":"fail","Package":"ex/b"}
"#,
        );
        feed(&mut p, Stream::Stderr, "b/b.go:3:9: undefined: nope");
        let a = p.finish(Some(1));
        assert!(a.complete);
        assert_eq!(
            a.tests,
            Some(TestCounts {
                passed: 1,
                failed: 1,
                ignored: 1
            })
        );
        // ex/a failed through its test; ex/b failed without one: it did not build.
        assert_eq!(a.failures, ["ex/a.TestBad", "build:ex/b"]);
        assert_eq!(a.diagnostics.errors, 1);
        let mut only_build = parser(Validator::GoTest);
        feed(
            &mut only_build,
            Stream::Stdout,
            r#"{"Action":"fail","Package":"ex/b"}"#,
        );
        assert_eq!(only_build.finish(Some(2)).failures, ["build:ex/b"]);
        let mut plain = parser(Validator::GoTest);
        feed(&mut plain, Stream::Stdout, "FAIL\tex/c [build failed]");
        let a = plain.finish(Some(2));
        assert!(a.complete);
        assert_eq!(a.failures, ["build:ex/c"]);
        // A package that never ended leaves the evidence incomplete.
        let mut cut = parser(Validator::GoTest);
        feed(
            &mut cut,
            Stream::Stdout,
            r#"{"Action":"run","Package":"ex/a","Test":"TestOk"}"#,
        );
        assert!(!cut.finish(None).complete);
    }

    #[test]
    fn pytest_summaries_and_short_failures_are_read() {
        let mut p = parser(Validator::Pytest);
        feed(
            &mut p,
            Stream::Stdout,
            "..F.s\nFAILED tests/test_m.py::test_b - assert 1 == 2\nERROR tests/test_c.py - ImportError\n1 failed, 3 passed, 1 skipped, 1 error, 2 warnings in 0.05s\n",
        );
        let a = p.finish(Some(1));
        assert!(a.complete);
        assert_eq!(
            a.tests,
            Some(TestCounts {
                passed: 3,
                failed: 2,
                ignored: 1
            })
        );
        assert_eq!(a.failures, ["tests/test_m.py::test_b", "tests/test_c.py"]);
        assert_eq!(a.diagnostics.warnings, 2);
        let mut none = parser(Validator::Pytest);
        feed(&mut none, Stream::Stdout, "no tests ran in 0.01s");
        let a = none.finish(Some(5));
        assert!(a.complete);
        assert_eq!(a.tests, Some(TestCounts::default()));
        let mut interrupted = parser(Validator::Pytest);
        feed(&mut interrupted, Stream::Stdout, "..");
        assert!(!interrupted.finish(Some(2)).complete);
    }

    #[test]
    fn failures_are_bounded_and_counted() {
        let mut p = parser(Validator::CargoTest);
        p.line(
            Stream::Stdout,
            br#"{"reason":"build-finished","success":true}"#,
        );
        p.line(Stream::Stdout, b"running 40 tests");
        for i in 0..40 {
            p.line(Stream::Stdout, format!("test t{i} ... FAILED").as_bytes());
        }
        p.skipped();
        let a = p.finish(Some(101));
        assert_eq!(a.failures.len(), MAX_VALIDATION_FAILURES);
        assert_eq!(a.failures_total, 40);
        assert!(!a.complete, "a skipped line makes the evidence incomplete");
    }
}
