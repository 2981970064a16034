//! `text_edits`: exact-text replacements in one file, or the creation of one file.
//!
//! Every edit is located in the content as it was before any of them: its `old_text` is
//! matched byte for byte, counting non-overlapping matches from the start (as
//! `str::match_indices` does). Without `occurrence` it must match exactly once; with it, that
//! match is replaced. Matched ranges of two edits must not overlap (touching is fine).
//!
//! Line endings: a file whose every `\n` is preceded by `\r` (and that has at least one) uses
//! CRLF; then each `\n` in `old_text` and `new_text` that is not already preceded by `\r` is
//! read as `\r\n`, so a caller's LF text matches and keeps the file CRLF. Any other file's
//! texts are used exactly as given.

use std::borrow::Cow;

use wc_runner_protocol::{
    MAX_EDIT_FILE_SIZE, OpErrorKind, TextEdit, TextEditsAnswer, TextEditsOp, WorkAnswer,
};

use super::diff::BoundedDiff;
use super::file::{self, Current};
use crate::answer::Refusal;
use crate::beneath::Root;
use crate::explore::{Failure, Stop};

pub(super) fn run(root: &Root, op: &TextEditsOp, stop: &Stop) -> Result<WorkAnswer, Failure> {
    let target = file::lock(root, &op.path, stop)?;
    if op.create {
        return create(root, op, target, stop);
    }
    let current = match target {
        Some(current) => current,
        None => {
            return Err(Refusal::at(
                OpErrorKind::NotFound,
                &op.path,
                "does not exist (set `create` to make a new file)",
            )
            .into());
        }
    };
    let with_sha = |r: Refusal| r.conflict(|c| c.current_sha256 = Some(current.sha256.clone()));
    if let Some(expected) = &op.expected_sha256
        && *expected != current.sha256
    {
        return Err(with_sha(Refusal::at(
            OpErrorKind::Sha256Mismatch,
            &op.path,
            &format!(
                "has changed: its SHA-256 is {}, not the expected {expected}; read it again",
                current.sha256
            ),
        ))
        .into());
    }
    let new = apply(&current.text, &op.edits).map_err(|e| with_sha(e.refusal(&op.path)))?;
    if new.len() as u64 > MAX_EDIT_FILE_SIZE {
        return Err(with_sha(file::too_large(&op.path, new.len() as u64)).into());
    }
    let changed = new != current.text;
    let name = format!("a/{}", op.path);
    let mut diff = BoundedDiff::default();
    diff.add(&current.text, &new, &name, &format!("b/{}", op.path));
    let sha256 = if changed {
        stop.check()?;
        file::replace(&current, &new).map_err(|e| file::unwritable(&op.path, e))?;
        file::sha256(new.as_bytes())
    } else {
        current.sha256.clone()
    };
    let (diff, diff_truncated) = diff.finish();
    Ok(WorkAnswer::TextEdits(TextEditsAnswer {
        path: op.path.clone(),
        created: false,
        previous_sha256: Some(current.sha256.clone()),
        sha256,
        size: new.len() as u64,
        edits_applied: op.edits.len() as u32,
        changed,
        diff,
        diff_truncated,
    }))
}

fn create(
    root: &Root,
    op: &TextEditsOp,
    target: Option<Current>,
    stop: &Stop,
) -> Result<WorkAnswer, Failure> {
    if let Some(current) = target {
        return Err(Refusal::at(
            OpErrorKind::AlreadyExists,
            &op.path,
            "already exists; edit it instead of creating it",
        )
        .conflict(|c| c.current_sha256 = Some(current.sha256.clone()))
        .into());
    }
    let content = op.edits.first().map_or("", |e| e.new_text.as_str());
    file::create(root, &op.path, content, stop)?;
    let mut diff = BoundedDiff::default();
    diff.add("", content, "/dev/null", &format!("b/{}", op.path));
    let (diff, diff_truncated) = diff.finish();
    Ok(WorkAnswer::TextEdits(TextEditsAnswer {
        path: op.path.clone(),
        created: true,
        previous_sha256: None,
        sha256: file::sha256(content.as_bytes()),
        size: content.len() as u64,
        edits_applied: 1,
        changed: true,
        diff,
        diff_truncated,
    }))
}

/// Why the edits do not apply to a content.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Misfit {
    kind: OpErrorKind,
    /// The edit (its index in `edits`).
    index: usize,
    /// Matches of its `old_text`, where that was counted.
    matches: Option<u64>,
    message: String,
}

impl Misfit {
    fn refusal(self, path: &wc_runner_protocol::RelativePath) -> Refusal {
        let index = self.index;
        let matches = self.matches;
        Refusal::at(self.kind, path, &self.message).conflict(|c| {
            c.edit_index = Some(index as u32);
            c.matches = matches;
        })
    }
}

/// Whether `content` uses CRLF line endings (the rule in the module header).
pub(super) fn uses_crlf(content: &str) -> bool {
    let lf = content.matches('\n').count();
    lf > 0 && content.matches("\r\n").count() == lf
}

/// `text` with each `\n` not preceded by `\r` written as `\r\n`.
pub(super) fn to_crlf(text: &str) -> Cow<'_, str> {
    if !text.contains('\n') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    let mut previous = None;
    for c in text.chars() {
        if c == '\n' && previous != Some('\r') {
            out.push('\r');
        }
        out.push(c);
        previous = Some(c);
    }
    Cow::Owned(out)
}

/// Applies `edits` to `content` all at once: each located in `content` as given.
pub(super) fn apply(content: &str, edits: &[TextEdit]) -> Result<String, Misfit> {
    let crlf = uses_crlf(content);
    let adapt = |t: &str| -> String {
        if crlf {
            to_crlf(t).into_owned()
        } else {
            t.to_owned()
        }
    };
    // (start, end, replacement, edit index), one per edit.
    let mut located: Vec<(usize, usize, String, usize)> = Vec::with_capacity(edits.len());
    for (index, edit) in edits.iter().enumerate() {
        let old = adapt(&edit.old_text);
        let mut count: u64 = 0;
        let mut chosen = None;
        let wanted = edit.occurrence.map_or(1, u64::from);
        for (at, _) in content.match_indices(old.as_str()) {
            count += 1;
            if count == wanted {
                chosen = Some(at);
            }
        }
        let misfit = |kind, message: String| Misfit {
            kind,
            index,
            matches: Some(count),
            message: format!("edits[{index}]: {message}"),
        };
        let start = match (count, edit.occurrence, chosen) {
            (0, _, _) => {
                return Err(misfit(
                    OpErrorKind::MatchNotFound,
                    "old_text is not in the file (it must match exactly, whitespace and line \
                     endings included)"
                        .into(),
                ));
            }
            (1, None, Some(at)) => at,
            (n, None, _) => {
                return Err(misfit(
                    OpErrorKind::MultipleMatches,
                    format!(
                        "old_text matches {n} times; add surrounding lines to make it unique, \
                         or name the occurrence"
                    ),
                ));
            }
            (_, Some(_), Some(at)) => at,
            (n, Some(k), None) => {
                return Err(misfit(
                    OpErrorKind::OccurrenceOutOfRange,
                    format!("occurrence {k} asked, but old_text matches {n} times"),
                ));
            }
        };
        located.push((start, start + old.len(), adapt(&edit.new_text), index));
    }
    located.sort_by_key(|l| (l.0, l.3));
    for pair in located.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if b.0 < a.1 {
            let (first, second) = (a.3.min(b.3), a.3.max(b.3));
            return Err(Misfit {
                kind: OpErrorKind::OverlappingEdits,
                index: second,
                matches: None,
                message: format!(
                    "edits[{second}]: its match overlaps the match of edits[{first}]; merge \
                     them into one edit"
                ),
            });
        }
    }
    let mut out = String::with_capacity(content.len());
    let mut at = 0;
    for (start, end, replacement, _) in &located {
        out.push_str(&content[at..*start]);
        out.push_str(replacement);
        at = *end;
    }
    out.push_str(&content[at..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn edit(old: &str, new: &str, occurrence: Option<u32>) -> TextEdit {
        TextEdit {
            old_text: old.into(),
            new_text: new.into(),
            occurrence,
        }
    }

    fn kind(content: &str, edits: &[TextEdit]) -> (OpErrorKind, usize, Option<u64>) {
        let m = apply(content, edits).unwrap_err();
        (m.kind, m.index, m.matches)
    }

    #[test]
    fn edits_are_located_in_the_original_and_applied_together() {
        let content = "fn a() {}\nfn b() {}\nfn c() {}\n";
        let out = apply(
            content,
            &[edit("fn c", "fn z", None), edit("fn a() {}\n", "", None)],
        )
        .unwrap();
        assert_eq!(out, "fn b() {}\nfn z() {}\n");
        // A later edit's text made by an earlier one is not there to match.
        assert_eq!(
            kind(
                content,
                &[edit("fn a", "fn q", None), edit("fn q", "x", None)]
            ),
            (OpErrorKind::MatchNotFound, 1, Some(0))
        );
        // Touching ranges are fine; overlapping ones are not.
        assert_eq!(
            apply("abcdef", &[edit("abc", "1", None), edit("def", "2", None)]).unwrap(),
            "12"
        );
        assert_eq!(
            kind("abcdef", &[edit("cde", "1", None), edit("abcd", "2", None)]),
            (OpErrorKind::OverlappingEdits, 1, None)
        );
    }

    #[test]
    fn matches_are_counted_without_overlap_and_occurrences_pick_one() {
        assert_eq!(
            kind("x = 1; x = 1;", &[edit("x = 1", "y", None)]),
            (OpErrorKind::MultipleMatches, 0, Some(2))
        );
        assert_eq!(
            apply("x = 1; x = 1;", &[edit("x = 1", "y", Some(2))]).unwrap(),
            "x = 1; y;"
        );
        assert_eq!(
            kind("x x", &[edit("x", "y", Some(3))]),
            (OpErrorKind::OccurrenceOutOfRange, 0, Some(2))
        );
        // "aa" in "aaa" is one non-overlapping match.
        assert_eq!(apply("aaa", &[edit("aa", "b", None)]).unwrap(), "ba");
        // An edit that changes nothing applies.
        assert_eq!(
            apply("same", &[edit("same", "same", None)]).unwrap(),
            "same"
        );
    }

    #[test]
    fn a_crlf_file_reads_lf_texts_as_crlf_and_stays_crlf() {
        assert!(uses_crlf("a\r\nb\r\n"));
        assert!(!uses_crlf("a\r\nb\n"), "mixed endings are used as given");
        assert!(!uses_crlf("no newline"));
        assert_eq!(to_crlf("a\nb\r\nc"), "a\r\nb\r\nc");
        let out = apply("one\r\ntwo\r\n", &[edit("one\ntwo", "1\n2\n3", None)]).unwrap();
        assert_eq!(out, "1\r\n2\r\n3\r\n");
        // In an LF file a CR in the text must be there to match.
        assert_eq!(
            kind("one\ntwo\n", &[edit("one\r\ntwo", "x", None)]).0,
            OpErrorKind::MatchNotFound
        );
    }

    proptest! {
        /// Replacing unique markers and then replacing the results back gives the original.
        #[test]
        fn edits_then_their_reverse_give_the_original(
            pieces in proptest::collection::vec("[a-z \n]{0,12}", 1..6),
            news in proptest::collection::vec("[A-Z\n]{0,8}", 6),
            crlf in any::<bool>(),
        ) {
            let newline = if crlf { "\r\n" } else { "\n" };
            let mut content = String::new();
            let mut edits = Vec::new();
            for (i, piece) in pieces.iter().enumerate() {
                content.push_str(&piece.replace('\n', newline));
                let marker = format!("<{i}>");
                content.push_str(&marker);
                // Replacements are tagged, so each is unique in the result as well.
                edits.push(edit(&marker, &format!("[{i}{}]", news[i]), None));
            }
            content.push_str(newline);
            let edited = apply(&content, &edits).unwrap();
            let reverse: Vec<TextEdit> = edits
                .iter()
                .map(|e| edit(&e.new_text, &e.old_text, None))
                .collect();
            prop_assert_eq!(apply(&edited, &reverse).unwrap(), content);
        }
    }
}
