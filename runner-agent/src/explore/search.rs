//! `search`: matching lines with context, with ripgrep's matcher and searcher over the walk.
//!
//! Files are searched in walk order and matches reported in line order, so a cursor (the last
//! match's path and line) resumes exactly: the next page starts in that file after that line.
//! A full page always carries a cursor (the next page may turn out empty), so a page never
//! searches past what it returns. Binary files (a NUL byte) are skipped whole, as are files
//! the runner cannot read or whose lines are too long to hold; symlinks and special files are
//! never searched.

use std::collections::VecDeque;
use std::io;
use std::ops::ControlFlow;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use wc_runner_protocol::{
    EntryKind, ExploreAnswer, ExploreErrorKind, MAX_SEARCH_LINE_BYTES, RelativePath, SearchAnswer,
    SearchLine, SearchMatch, SearchOp,
};

use super::beneath::Root;
use super::walk::{self, Entry, WalkSpec};
use super::{Budget, Failure, Refusal, Stop, decode_cursor, encode_cursor, resolve_target};

/// Memory one file's search may take (its longest line must fit).
const SEARCH_HEAP_BYTES: usize = 16 * 1024 * 1024;
/// Compiled size a pattern may reach.
const REGEX_SIZE_BYTES: usize = 10 * 1024 * 1024;

pub(super) fn run(root: &Root, op: &SearchOp, stop: &Stop) -> Result<ExploreAnswer, Failure> {
    const OP: &str = "search";
    let after = decode_cursor(OP, op.cursor.as_deref())?;
    let target = resolve_target(root, op.path.as_ref(), false)?;
    let glob = op
        .glob
        .as_deref()
        .map(|g| walk::glob(root, g))
        .transpose()?;
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(!op.case_sensitive)
        .fixed_strings(op.literal)
        .line_terminator(Some(b'\n'))
        .size_limit(REGEX_SIZE_BYTES)
        .dfa_size_limit(REGEX_SIZE_BYTES)
        .build(&op.pattern)
        .map_err(|e| {
            let kind = ExploreErrorKind::InvalidRegex;
            Refusal::new(
                kind,
                format!("the pattern is not a valid regular expression: {e}"),
            )
        })?;
    let context = op.context_lines as usize;
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .before_context(context)
        .after_context(context)
        .binary_detection(BinaryDetection::quit(0))
        .heap_limit(Some(SEARCH_HEAP_BYTES))
        .build();
    let spec = WalkSpec {
        target: target.as_str(),
        hidden: op.hidden,
        max_depth: None,
        resume: after.as_ref().map(|(p, _)| (p.as_str(), true)),
    };
    let limit = op.limit as usize;
    let mut budget = Budget::new();
    let mut matches: Vec<SearchMatch> = Vec::new();
    let (mut files_searched, mut files_skipped) = (0, 0);
    let mut full = false;
    walk::walk(root, &spec, stop, |entry: Entry<'_>| {
        if entry.kind != EntryKind::File {
            return Ok(ControlFlow::Continue(()));
        }
        let Some(rel) = entry.rel.and_then(|r| RelativePath::parse(r).ok()) else {
            files_skipped += 1;
            return Ok(ControlFlow::Continue(()));
        };
        if !walk::admits(glob.as_ref(), entry.path) {
            return Ok(ControlFlow::Continue(()));
        }
        let skip_through = match &after {
            Some((path, line)) if *path == rel => line.unwrap_or(0),
            _ => 0,
        };
        // Opened beneath the root again, not following a symlink that replaced the file.
        let file = root
            .open_raw(rel.as_str(), false)
            .and_then(|opened| root.read(&opened));
        let Ok(file) = file else {
            files_skipped += 1;
            return Ok(ControlFlow::Continue(()));
        };
        let mut sink = FileSink::new(limit - matches.len(), skip_through, context);
        if let Err(e) = searcher.search_reader(&matcher, stop.reader(file), &mut sink) {
            stop.check()?;
            tracing::debug!(path = %rel, error = %e, "file not searched");
            files_skipped += 1;
            return Ok(ControlFlow::Continue(()));
        }
        if sink.binary {
            files_skipped += 1;
            return Ok(ControlFlow::Continue(()));
        }
        files_searched += 1;
        for found in sink.found {
            let m = SearchMatch {
                path: rel.clone(),
                line: found.line,
                before: found.before,
                after: found.after,
            };
            if !budget.take(&m) {
                full = true;
                break;
            }
            matches.push(m);
        }
        full |= sink.more || matches.len() == limit;
        Ok(if full {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    let next_cursor = match matches.last() {
        Some(last) if full => Some(encode_cursor(OP, &last.path, Some(last.line.number))),
        _ => None,
    };
    Ok(ExploreAnswer::Search(SearchAnswer {
        matches,
        files_searched,
        files_skipped,
        next_cursor,
    }))
}

/// A match of one file, before it joins the page.
struct Found {
    line: SearchLine,
    before: Vec<SearchLine>,
    after: Vec<SearchLine>,
}

/// Collects one file's matches: at most `want`, only after line `skip_through`, each with its
/// context lines (a line is context of one match only).
struct FileSink {
    want: usize,
    skip_through: u64,
    context: usize,
    found: Vec<Found>,
    /// Context lines not yet given to a match: the next match's `before`.
    pending: VecDeque<SearchLine>,
    /// A match beyond `want` exists.
    more: bool,
    /// The file holds a NUL byte.
    binary: bool,
}

impl FileSink {
    fn new(want: usize, skip_through: u64, context: usize) -> Self {
        FileSink {
            want,
            skip_through,
            context,
            found: Vec::new(),
            pending: VecDeque::new(),
            more: false,
            binary: false,
        }
    }

    fn remember(&mut self, line: SearchLine) {
        if self.context == 0 {
            return;
        }
        if self.pending.len() == self.context {
            self.pending.pop_front();
        }
        self.pending.push_back(line);
    }
}

impl Sink for FileSink {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let first = m.line_number().unwrap_or(0);
        for (number, bytes) in (first..).zip(m.lines()) {
            let line = search_line(number, bytes);
            if number <= self.skip_through {
                // Returned by an earlier page; still context of what follows.
                self.remember(line);
                continue;
            }
            if self.found.len() == self.want {
                self.more = true;
                return Ok(false);
            }
            let before = self.pending.drain(..).collect();
            self.found.push(Found {
                line,
                before,
                after: Vec::new(),
            });
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, io::Error> {
        let line = search_line(c.line_number().unwrap_or(0), c.bytes());
        match (c.kind(), self.found.last_mut()) {
            (SinkContextKind::After, Some(last))
                if last.after.len() < self.context && self.pending.is_empty() =>
            {
                last.after.push(line)
            }
            _ => self.remember(line),
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, io::Error> {
        self.pending.clear();
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// A line as an answer shows it: without its terminator, cut to [`MAX_SEARCH_LINE_BYTES`] on
/// a character boundary, invalid UTF-8 replaced.
fn search_line(number: u64, bytes: &[u8]) -> SearchLine {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let truncated = bytes.len() > MAX_SEARCH_LINE_BYTES;
    let mut end = bytes.len().min(MAX_SEARCH_LINE_BYTES);
    while truncated && end > 0 && bytes[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    SearchLine {
        number,
        text: String::from_utf8_lossy(&bytes[..end]).into_owned(),
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_on_a_character_boundary_and_terminators_dropped() {
        let line = search_line(3, b"fn main() {\r\n");
        assert_eq!(
            (line.number, line.text.as_str(), line.truncated),
            (3, "fn main() {", false)
        );
        let long = "é".repeat(MAX_SEARCH_LINE_BYTES);
        let cut = search_line(1, long.as_bytes());
        assert!(cut.truncated);
        assert!(cut.text.len() <= MAX_SEARCH_LINE_BYTES);
        assert!(
            cut.text.chars().all(|c| c == 'é'),
            "no replacement character"
        );
    }
}
