//! `search`: matching lines with context, with ripgrep's matcher and searcher over the walk.
//!
//! The walk hands files in chunks to searching threads (one per core, at most eight); their
//! results join the page in walk order, matches in line order, so a cursor (the last match's
//! path and line) resumes exactly: the next page starts in that file after that line. A full
//! page always carries a cursor (the next page may turn out empty), so a page looks at most a
//! few chunks past what it returns. Binary files (a NUL byte) are skipped whole, as are files
//! the runner cannot read or whose lines are too long to hold; symlinks and special files are
//! never searched.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use wc_runner_protocol::{
    EntryKind, MAX_SEARCH_LINE_BYTES, OpErrorKind, RelativePath, SearchAnswer, SearchLine,
    SearchMatch, SearchOp, WorkAnswer,
};

use super::walk::{self, Entry, WalkSpec};
use super::{Budget, Failure, Refusal, Stop, decode_cursor, encode_cursor, resolve_target};
use crate::beneath::Root;

/// Memory one file's search may take (its longest line must fit).
const SEARCH_HEAP_BYTES: usize = 16 * 1024 * 1024;
/// Compiled size a pattern may reach.
const REGEX_SIZE_BYTES: usize = 10 * 1024 * 1024;

pub(super) fn run(root: &Root, op: &SearchOp, stop: &Stop) -> Result<WorkAnswer, Failure> {
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
            let kind = OpErrorKind::InvalidRegex;
            Refusal::new(
                kind,
                format!("the pattern is not a valid regular expression: {e}"),
            )
        })?;
    let context = op.context_lines as usize;
    let searcher = SearcherBuilder::new()
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
    let query = Query {
        root,
        matcher: &matcher,
        limit: op.limit as usize,
        context,
        after: after.as_ref(),
        stop,
    };
    let page_done = AtomicBool::new(false);
    let (chunk_tx, chunk_rx) = mpsc::sync_channel::<Chunk>(QUEUED_CHUNKS);
    let chunk_rx = Mutex::new(chunk_rx);
    let (walked, page) = std::thread::scope(|s| {
        let (done_tx, done_rx) = mpsc::channel::<(usize, Vec<(Option<RelativePath>, Searched)>)>();
        for _ in 0..workers() {
            let (done_tx, chunk_rx, page_done, query) =
                (done_tx.clone(), &chunk_rx, &page_done, &query);
            let mut searcher = searcher.clone();
            s.spawn(move || {
                loop {
                    let Ok(chunk) = chunk_rx.lock().expect("chunk queue poisoned").recv() else {
                        return;
                    };
                    // Once the page is full or a stop was asked, the queue is only drained.
                    let searched = chunk
                        .files
                        .into_iter()
                        .map(|rel| {
                            let result = match &rel {
                                _ if page_done.load(Ordering::Relaxed) || query.stop.is_set() => {
                                    Searched::Skipped
                                }
                                Some(rel) => query.search(&mut searcher, rel),
                                None => Searched::Skipped,
                            };
                            (rel, result)
                        })
                        .collect();
                    if done_tx.send((chunk.index, searched)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);
        let (page_done_ref, glob, spec) = (&page_done, glob.as_ref(), &spec);
        let walker = s.spawn(move || {
            let mut chunk = Chunk::new(0);
            let walked = walk::walk(root, spec, stop, |entry: Entry<'_>| {
                if page_done_ref.load(Ordering::Relaxed) {
                    return Ok(ControlFlow::Break(()));
                }
                if entry.kind != EntryKind::File || !walk::admits(glob, entry.path) {
                    return Ok(ControlFlow::Continue(()));
                }
                chunk
                    .files
                    .push(entry.rel.and_then(|r| RelativePath::parse(r).ok()));
                if chunk.files.len() == CHUNK_FILES {
                    let next = Chunk::new(chunk.index + 1);
                    if chunk_tx.send(std::mem::replace(&mut chunk, next)).is_err() {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                Ok(ControlFlow::Continue(()))
            });
            if !chunk.files.is_empty() {
                let _ = chunk_tx.send(chunk);
            }
            walked
        });
        // Chunks come back in any order and join the page in walk order.
        let mut page = Page::new(query.limit);
        let mut waiting = BTreeMap::new();
        let mut next = 0;
        'results: for (index, searched) in done_rx.iter() {
            waiting.insert(index, searched);
            while let Some(searched) = waiting.remove(&next) {
                next += 1;
                for (rel, result) in searched {
                    if page.take(rel, result) {
                        break 'results;
                    }
                }
            }
        }
        page_done.store(true, Ordering::Relaxed);
        (walker.join(), page)
    });
    // A stop leaves files unsearched: no page is answered then.
    stop.check()?;
    match walked {
        Ok(walked) => walked?,
        Err(panic) => std::panic::resume_unwind(panic),
    }
    let next_cursor = match page.matches.last() {
        Some(last) if page.full => Some(encode_cursor(OP, &last.path, Some(last.line.number))),
        _ => None,
    };
    Ok(WorkAnswer::Search(SearchAnswer {
        matches: page.matches,
        files_searched: page.files_searched,
        files_skipped: page.files_skipped,
        next_cursor,
    }))
}

/// Files handed to a searching thread at once: enough that handing them over costs little
/// next to searching them.
const CHUNK_FILES: usize = 64;

/// Chunks the walk may queue ahead of the searching threads: with the chunks being searched,
/// how far a page may look past its end.
const QUEUED_CHUNKS: usize = 2;

/// Threads searching files at once.
fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// Files the walk met, in walk order; a name no project path can name is `None`.
struct Chunk {
    index: usize,
    files: Vec<Option<RelativePath>>,
}

impl Chunk {
    fn new(index: usize) -> Self {
        Chunk {
            index,
            files: Vec::with_capacity(CHUNK_FILES),
        }
    }
}

/// What searching one file gave.
enum Searched {
    /// Its matches (at most a page's worth).
    Found(Vec<Found>),
    /// Not searched: binary, unreadable, a line too long, or a name no path can name.
    Skipped,
}

/// What every file's search shares.
struct Query<'a> {
    root: &'a Root,
    matcher: &'a RegexMatcher,
    limit: usize,
    context: usize,
    after: Option<&'a (RelativePath, Option<u64>)>,
    stop: &'a Stop,
}

impl Query<'_> {
    fn search(&self, searcher: &mut Searcher, rel: &RelativePath) -> Searched {
        let skip_through = match self.after {
            Some((path, line)) if path == rel => line.unwrap_or(0),
            _ => 0,
        };
        // Opened beneath the root again, not following a symlink that replaced the file.
        let file = self
            .root
            .open_raw(rel.as_str(), false)
            .and_then(|opened| self.root.read(&opened));
        let Ok(file) = file else {
            return Searched::Skipped;
        };
        let mut sink = FileSink::new(self.limit, skip_through, self.context);
        let reader = self.stop.reader(file);
        if let Err(e) = searcher.search_reader(self.matcher, reader, &mut sink) {
            tracing::debug!(path = %rel, error = %e, "file not searched");
            return Searched::Skipped;
        }
        if sink.binary {
            return Searched::Skipped;
        }
        Searched::Found(sink.found)
    }
}

/// The page being filled, in walk order.
struct Page {
    limit: usize,
    budget: Budget,
    matches: Vec<SearchMatch>,
    files_searched: u64,
    files_skipped: u64,
    full: bool,
}

impl Page {
    fn new(limit: usize) -> Self {
        Page {
            limit,
            budget: Budget::new(),
            matches: Vec::new(),
            files_searched: 0,
            files_skipped: 0,
            full: false,
        }
    }

    /// Adds the next file's result; whether the page is full.
    fn take(&mut self, rel: Option<RelativePath>, searched: Searched) -> bool {
        let (Some(rel), Searched::Found(found)) = (rel, searched) else {
            self.files_skipped += 1;
            return false;
        };
        self.files_searched += 1;
        for found in found {
            let m = SearchMatch {
                path: rel.clone(),
                line: found.line,
                before: found.before,
                after: found.after,
            };
            if self.matches.len() == self.limit || !self.budget.take(&m) {
                self.full = true;
                return true;
            }
            self.matches.push(m);
        }
        self.full = self.matches.len() == self.limit;
        self.full
    }
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
