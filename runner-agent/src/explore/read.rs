//! `read_files`: line ranges of files, each read once from start to end to hash it whole.
//!
//! Text is kept by lines, within [`MAX_READ_BYTES_PER_FILE`] per file and
//! [`MAX_READ_BYTES_PER_CALL`] for all files together; whatever of the range does not fit is
//! left out and flagged. A file with a NUL in its first [`BINARY_PROBE_BYTES`] is binary and a
//! file that is not UTF-8 throughout is reported as such; neither is shown. Their JSON stays
//! within the answer bound by construction: at most 256 KiB of text, escaped at most six-fold,
//! and eight paths of at most 4 KiB, is under [`wc_runner_protocol::MAX_ANSWER_BYTES`].

use std::io::Read as _;

use sha2::{Digest as _, Sha256};
use wc_runner_protocol::{
    BINARY_PROBE_BYTES, EntryKind, FileContent, FileRange, FileRead, MAX_READ_BYTES_PER_CALL,
    MAX_READ_BYTES_PER_FILE, MAX_READ_FILE_SIZE, OpErrorKind, ReadFilesOp, WorkAnswer,
};

use super::{Failure, Refusal, Stop};
use crate::beneath::Root;

/// Bytes read at a time.
const READ_CHUNK: usize = 64 * 1024;

pub(super) fn run(root: &Root, op: &ReadFilesOp, stop: &Stop) -> Result<WorkAnswer, Failure> {
    let mut room = MAX_READ_BYTES_PER_CALL;
    let mut files = Vec::with_capacity(op.files.len());
    for range in &op.files {
        stop.check()?;
        let read = read_one(root, range, room.min(MAX_READ_BYTES_PER_FILE), stop)?;
        if let FileContent::Text { text, .. } = &read.content {
            room -= text.len();
        }
        files.push(read);
    }
    Ok(WorkAnswer::ReadFiles(wc_runner_protocol::ReadFilesAnswer {
        files,
    }))
}

fn read_one(root: &Root, range: &FileRange, room: usize, stop: &Stop) -> Result<FileRead, Failure> {
    let path = &range.path;
    let opened = root.open_path(path, true)?;
    match opened.kind() {
        EntryKind::File => {}
        EntryKind::Directory => {
            return Err(Refusal::at(OpErrorKind::NotAFile, path, "is a directory").into());
        }
        _ => {
            return Err(Refusal::at(
                OpErrorKind::SpecialFile,
                path,
                "is a device, FIFO or socket; it is never opened",
            )
            .into());
        }
    }
    if opened.size() > MAX_READ_FILE_SIZE {
        return Err(Refusal::at(
            OpErrorKind::FileTooLarge,
            path,
            &format!(
                "is {} bytes; files of at most {MAX_READ_FILE_SIZE} bytes are read",
                opened.size()
            ),
        )
        .into());
    }
    let unreadable = |e: std::io::Error| {
        Refusal::at(
            OpErrorKind::Unreadable,
            path,
            &format!("cannot be read: {e}"),
        )
    };
    let file = root.read(&opened).map_err(unreadable)?;
    let start = range.start_line.unwrap_or(1);
    let end = range.end_line.unwrap_or(u64::MAX);
    let mut scan = Scan::new(start, end, room);
    let mut reader = stop.reader(file);
    let mut buf = vec![0; READ_CHUNK];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) if stop.check().is_err() => return Err(Failure::Stopped),
            Err(e) => return Err(unreadable(e).into()),
        };
        scan.feed(&buf[..n]);
        // The size was checked when the file was opened; a file growing since is read up to it.
        if scan.size > MAX_READ_FILE_SIZE {
            return Err(Refusal::at(
                OpErrorKind::FileTooLarge,
                path,
                &format!("grew past {MAX_READ_FILE_SIZE} bytes while it was read"),
            )
            .into());
        }
    }
    Ok(scan.finish(range))
}

/// One pass over a file: hash, size, line count, binary and UTF-8 checks, and the kept range.
struct Scan {
    hasher: Sha256,
    size: u64,
    /// Newlines seen so far.
    newlines: u64,
    last_byte: Option<u8>,
    binary: bool,
    utf8: Utf8Check,
    start: u64,
    end: u64,
    room: usize,
    kept: Vec<u8>,
    /// Bytes of requested lines left out for lack of room.
    left_out: bool,
}

impl Scan {
    fn new(start: u64, end: u64, room: usize) -> Scan {
        Scan {
            hasher: Sha256::new(),
            size: 0,
            newlines: 0,
            last_byte: None,
            binary: false,
            utf8: Utf8Check::default(),
            start,
            end,
            room,
            kept: Vec::new(),
            left_out: false,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        let probed = usize::try_from(self.size).unwrap_or(usize::MAX);
        if probed < BINARY_PROBE_BYTES {
            let probe = &bytes[..bytes.len().min(BINARY_PROBE_BYTES - probed)];
            self.binary |= probe.contains(&0);
        }
        self.hasher.update(bytes);
        self.utf8.feed(bytes);
        self.size += bytes.len() as u64;
        self.last_byte = bytes.last().copied().or(self.last_byte);
        // Walk the chunk line by line, keeping bytes of lines start..=end while room lasts.
        let mut rest = bytes;
        while !rest.is_empty() {
            let line = self.newlines + 1;
            let cut = rest.iter().position(|&b| b == b'\n').map(|i| i + 1);
            let piece = &rest[..cut.unwrap_or(rest.len())];
            if (self.start..=self.end).contains(&line) && !self.left_out {
                let fits = piece.len().min(self.room - self.kept.len());
                self.kept.extend_from_slice(&piece[..fits]);
                self.left_out = fits < piece.len();
            } else if line > self.end {
                // Past the range: only counting remains.
                self.newlines += rest.iter().filter(|&&b| b == b'\n').count() as u64;
                return;
            }
            if cut.is_some() {
                self.newlines += 1;
            }
            rest = &rest[piece.len()..];
        }
    }

    fn finish(self, range: &FileRange) -> FileRead {
        let lines = self.newlines + u64::from(self.last_byte.is_some_and(|b| b != b'\n'));
        let content = if self.binary {
            FileContent::Binary
        } else if !self.utf8.finish() {
            FileContent::NotUtf8
        } else {
            text(self.kept, self.start, self.end.min(lines), self.left_out)
        };
        FileRead {
            path: range.path.clone(),
            size: self.size,
            sha256: hex::encode(self.hasher.finalize()),
            lines,
            content,
        }
    }
}

/// The kept bytes of lines `start..=last` as text. When some were left out, the text ends
/// after its last whole line, or, if not even the first line fit, inside it on a character
/// boundary.
fn text(mut kept: Vec<u8>, start: u64, last: u64, left_out: bool) -> FileContent {
    if start > last {
        return FileContent::Text {
            start_line: start,
            end_line: start - 1,
            text: String::new(),
            truncated: false,
        };
    }
    let mut end_line = last;
    if left_out {
        match kept.iter().rposition(|&b| b == b'\n') {
            Some(i) => {
                kept.truncate(i + 1);
                end_line = start + kept.iter().filter(|&&b| b == b'\n').count() as u64 - 1;
            }
            None => {
                let valid = match std::str::from_utf8(&kept) {
                    Ok(_) => kept.len(),
                    Err(e) => e.valid_up_to(),
                };
                kept.truncate(valid);
                end_line = if kept.is_empty() { start - 1 } else { start };
            }
        }
    }
    // The whole file is UTF-8, and the cuts above keep whole characters.
    let text = String::from_utf8(kept).unwrap_or_else(|e| {
        let valid = e.utf8_error().valid_up_to();
        let mut bytes = e.into_bytes();
        bytes.truncate(valid);
        String::from_utf8(bytes).unwrap_or_default()
    });
    FileContent::Text {
        start_line: start,
        end_line,
        text,
        truncated: left_out,
    }
}

/// UTF-8 validity of a stream read in pieces: a character split between pieces is carried.
#[derive(Default)]
struct Utf8Check {
    invalid: bool,
    carry: Vec<u8>,
}

impl Utf8Check {
    fn feed(&mut self, bytes: &[u8]) {
        if self.invalid {
            return;
        }
        let joined;
        let piece = if self.carry.is_empty() {
            bytes
        } else {
            joined = [std::mem::take(&mut self.carry).as_slice(), bytes].concat();
            &joined
        };
        if let Err(e) = std::str::from_utf8(piece) {
            match e.error_len() {
                None => self.carry = piece[e.valid_up_to()..].to_vec(),
                Some(_) => self.invalid = true,
            }
        }
    }

    fn finish(self) -> bool {
        !self.invalid && self.carry.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_between_reads_is_still_utf8_and_a_broken_one_is_not() {
        let text = "é€𝄞x".as_bytes();
        for split in 0..=text.len() {
            let mut check = Utf8Check::default();
            check.feed(&text[..split]);
            check.feed(&text[split..]);
            assert!(check.finish(), "split at {split}");
        }
        let mut cut = Utf8Check::default();
        cut.feed(&text[..1]);
        assert!(!cut.finish(), "a file ending inside a character");
        let mut bad = Utf8Check::default();
        bad.feed(b"ok\xff");
        assert!(!bad.finish());
    }

    fn scan(content: &[u8], chunk: usize, start: u64, end: u64, room: usize) -> FileContent {
        let mut s = Scan::new(start, end, room);
        for piece in content.chunks(chunk) {
            s.feed(piece);
        }
        let range = FileRange {
            path: wc_runner_protocol::RelativePath::parse("f").unwrap(),
            start_line: Some(start),
            end_line: Some(end),
        };
        s.finish(&range).content
    }

    fn text_of(c: FileContent) -> (u64, u64, String, bool) {
        match c {
            FileContent::Text {
                start_line,
                end_line,
                text,
                truncated,
            } => (start_line, end_line, text, truncated),
            other => panic!("not text: {other:?}"),
        }
    }

    #[test]
    fn ranges_are_the_same_lines_whatever_the_read_size() {
        let content = b"one\ntwo\nthree\nfour";
        for chunk in 1..=content.len() {
            let t = |s, e, room| text_of(scan(content, chunk, s, e, room));
            assert_eq!(
                t(1, u64::MAX, 100),
                (1, 4, "one\ntwo\nthree\nfour".into(), false)
            );
            assert_eq!(t(2, 3, 100), (2, 3, "two\nthree\n".into(), false));
            assert_eq!(t(4, 9, 100), (4, 4, "four".into(), false));
            assert_eq!(t(7, 9, 100), (7, 6, String::new(), false));
            // Room for "two\nth": the text ends after its last whole line.
            assert_eq!(t(2, 4, 6), (2, 2, "two\n".into(), true));
            // Not even the first line fits: its beginning, flagged.
            assert_eq!(t(3, 3, 2), (3, 3, "th".into(), true));
            // No room at all: nothing, flagged.
            assert_eq!(t(2, 2, 0), (2, 1, String::new(), true));
        }
    }
}
