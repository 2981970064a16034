//! `patch`: a unified diff applied all-or-nothing across its files.
//!
//! The whole patch is read first ([`parse`]); then every file is locked and every hunk checked
//! against the file's current content ([`apply`]); only when all of them fit are the new
//! contents staged beside their targets, and then put in place: created files first (a file
//! created meanwhile by another writer still refuses the whole patch), then replaced ones, then
//! deleted ones.
//!
//! What is read: `diff --git` sections and plain `---`/`+++` pairs, each followed by hunks.
//! Text before the first file (a commit message) is skipped, and a `-- ` line after the last
//! hunk ends the patch (a mail signature). `a/` and `b/` prefixes are stripped when the old
//! path has the one and the new path the other; a tab ends a path (`diff -u` writes a time
//! after it). `/dev/null` as the old path creates the file, as the new path deletes it. Git
//! headers `index`, `new file mode` (100644 or 100755) and `deleted file mode` are read;
//! renames, copies, mode changes and binary diffs are refused `invalid_patch`, naming the
//! header. Quoted (escaped) paths are refused too.
//!
//! How a hunk applies: its old lines must equal the file's lines exactly (no fuzz; a
//! `\ No newline at end of file` line is honoured) where its header puts them, shifted by how
//! far the previous hunks of the file landed from theirs; failing that, at the nearest place
//! within [`MAX_HUNK_OFFSET_LINES`] lines after the previous hunk, as `patch` searches. In a
//! file that uses CRLF line endings (see [`super::text`]), a hunk line's `\n` not preceded by
//! `\r` is read as `\r\n`.

use std::collections::HashSet;

use wc_runner_protocol::{
    FileChange, MAX_EDIT_FILE_SIZE, MAX_HUNK_OFFSET_LINES, OpErrorKind, PatchAnswer, PatchOp,
    PatchedFile, RelativePath, WorkAnswer,
};

mod parse;

use super::diff::BoundedDiff;
use super::file::{self, Current, Staged};
use super::text::{to_crlf, uses_crlf};
use crate::answer::Refusal;
use crate::beneath::Root;
use crate::explore::{Failure, Stop};
use parse::{FilePatch, Hunk, Side, bare, parse, shown};

/// Why a hunk does not apply: its index in the file's hunks and words.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Misfit {
    hunk: usize,
    message: String,
}

/// The file's content with `hunks` applied, or the first hunk that does not fit.
fn apply(content: &str, hunks: &[Hunk<'_>]) -> Result<String, Misfit> {
    let crlf = uses_crlf(content);
    let file: Vec<&str> = content.split_inclusive('\n').collect();
    let mut out = String::with_capacity(content.len());
    // The next line of the file not yet copied, and how far hunks landed from their headers.
    let mut next = 0usize;
    let mut shift: i64 = 0;
    for (index, h) in hunks.iter().enumerate() {
        let adapt = |t: &str| {
            if crlf {
                to_crlf(t).into_owned()
            } else {
                t.to_owned()
            }
        };
        let old: Vec<String> = h
            .lines
            .iter()
            .filter(|(s, _)| *s != Side::Added)
            .map(|(_, t)| adapt(t))
            .collect();
        let new: Vec<String> = h
            .lines
            .iter()
            .filter(|(s, _)| *s != Side::Removed)
            .map(|(_, t)| adapt(t))
            .collect();
        let header = h.old_start.saturating_sub(u64::from(h.old_len > 0)) as i64;
        let expected = header + shift;
        let fits = |at: i64| -> bool {
            at >= next as i64
                && (at as usize) + old.len() <= file.len()
                && file[at as usize..at as usize + old.len()]
                    .iter()
                    .zip(&old)
                    .all(|(f, o)| *f == o.as_str())
        };
        let found = (0..=MAX_HUNK_OFFSET_LINES as i64)
            .flat_map(|d| [expected - d, expected + d])
            .find(|&at| fits(at));
        let Some(at) = found else {
            return Err(Misfit {
                hunk: index,
                message: mismatch(&file, &old, expected),
            });
        };
        let at = at as usize;
        let end = at + old.len();
        if new.last().is_some_and(|l| !l.ends_with('\n')) && end < file.len() {
            return Err(Misfit {
                hunk: index,
                message: format!(
                    "hunk {} ends the file without a final newline, but the file goes on after line {end}",
                    index + 1
                ),
            });
        }
        out.extend(file[next..at].iter().copied());
        out.extend(new.iter().map(String::as_str));
        next = end;
        shift = at as i64 - header;
    }
    out.extend(file[next..].iter().copied());
    Ok(out)
}

/// Words for a hunk found nowhere: what differs where its header puts it.
fn mismatch(file: &[&str], old: &[String], expected: i64) -> String {
    let start = expected.max(0) as usize;
    let first_difference = old.iter().enumerate().find_map(|(k, o)| {
        let line = file.get(start + k).copied();
        (line != Some(o.as_str())).then_some((k, line))
    });
    let detail = match first_difference {
        Some((k, Some(line))) => format!(
            "line {} of the file is {} where the hunk has {}",
            start + k + 1,
            shown(bare(line)),
            shown(bare(&old[k]))
        ),
        Some((k, None)) => format!(
            "the file has {} lines; the hunk needs line {}",
            file.len(),
            start + k + 1
        ),
        None => "an earlier hunk already took those lines".to_owned(),
    };
    format!(
        "its lines are not at line {} (nor within {MAX_HUNK_OFFSET_LINES} lines of it): {detail}; read the file again",
        start + 1
    )
}

/// What will be done to one file of the patch, checked.
enum Plan {
    /// Create it with this content.
    Add(String),
    /// Replace its content.
    Modify(Current, String),
    /// Remove it.
    Delete(Current),
}

impl Plan {
    fn current(&self) -> Option<&Current> {
        match self {
            Plan::Add(_) => None,
            Plan::Modify(current, _) | Plan::Delete(current) => Some(current),
        }
    }

    fn new_content(&self) -> Option<&str> {
        match self {
            Plan::Add(new) | Plan::Modify(_, new) => Some(new),
            Plan::Delete(_) => None,
        }
    }
}

pub(super) fn run(root: &Root, op: &PatchOp, stop: &Stop) -> Result<WorkAnswer, Failure> {
    let text = if op.patch.ends_with('\n') {
        op.patch.clone()
    } else {
        // A last line without its newline is still a line.
        format!("{}\n", op.patch)
    };
    let parts = parse(&text).map_err(|u| {
        Refusal::new(
            OpErrorKind::InvalidPatch,
            format!("line {} of the patch: {}", u.line, u.message),
        )
        .conflict(|c| c.patch_line = Some(u.line))
    })?;
    // Every file is checked, so that the refusal reported is the first in patch order
    // whatever the lock order.
    let mut plans: Vec<Option<Result<Plan, Refusal>>> = parts.iter().map(|_| None).collect();
    for index in lock_order(root, &parts)? {
        stop.check()?;
        plans[index] = Some(match plan(root, &parts[index], stop) {
            Ok(plan) => Ok(plan),
            Err(Failure::Refused(refusal)) => Err(refusal),
            Err(Failure::Stopped) => return Err(Failure::Stopped),
        });
    }
    let mut planned: Vec<(&FilePatch<'_>, Plan)> = Vec::with_capacity(parts.len());
    for (part, plan) in parts.iter().zip(plans.into_iter().flatten()) {
        planned.push((part, plan?));
    }
    let mut files = Vec::with_capacity(planned.len());
    let mut diff = BoundedDiff::default();
    for (part, plan) in &planned {
        let path = &part.path;
        let old = plan.current().map(|c| c.text.as_str());
        let new = plan.new_content();
        diff.add(
            old.unwrap_or(""),
            new.unwrap_or(""),
            &old.map_or("/dev/null".to_owned(), |_| format!("a/{path}")),
            &new.map_or("/dev/null".to_owned(), |_| format!("b/{path}")),
        );
        files.push(PatchedFile {
            path: path.clone(),
            change: part.change,
            previous_sha256: plan.current().map(|c| c.sha256.clone()),
            sha256: new.map(|n| file::sha256(n.as_bytes())),
            hunks: part.hunks.len() as u32,
        });
    }
    stop.check()?;
    write(root, &planned)?;
    let (diff, diff_truncated) = diff.finish();
    Ok(WorkAnswer::Patch(PatchAnswer {
        files,
        diff,
        diff_truncated,
    }))
}

/// The order in which the files are locked: by device and inode, so two patches over the same
/// files take their locks in the same order. One file named twice (through a symlinked
/// directory) is refused: its second lock would wait for the first.
fn lock_order(root: &Root, parts: &[FilePatch<'_>]) -> Result<Vec<usize>, Refusal> {
    let mut keyed = Vec::with_capacity(parts.len());
    let mut seen = HashSet::new();
    for (index, part) in parts.iter().enumerate() {
        let (dir, name) = file::split(&part.path);
        let identity = root
            .open_dir(dir)
            .ok()
            .and_then(|d| d.identity_of(name).ok().flatten());
        if let Some(id) = identity
            && !seen.insert(id)
        {
            return Err(Refusal::at(
                OpErrorKind::InvalidPatch,
                &part.path,
                "is a file another path of the patch names too; name each file once",
            )
            .conflict(|c| c.path = Some(part.path.clone())));
        }
        keyed.push((identity, index));
    }
    keyed.sort();
    Ok(keyed.into_iter().map(|(_, index)| index).collect())
}

/// Locks and checks one file of the patch and computes its new content.
fn plan(root: &Root, part: &FilePatch<'_>, stop: &Stop) -> Result<Plan, Failure> {
    let path = &part.path;
    let about = |r: Refusal| r.conflict(|c| c.path = Some(path.clone()));
    let target = file::lock(root, path, stop).map_err(|f| match f {
        Failure::Refused(r) => Failure::Refused(about(r)),
        stopped => stopped,
    })?;
    let current = match (target, part.change) {
        (None, FileChange::Added) => {
            let new: String = part
                .hunks
                .iter()
                .flat_map(|h| h.lines.iter().map(|(_, t)| *t))
                .collect();
            if new.len() as u64 > MAX_EDIT_FILE_SIZE {
                return Err(about(file::too_large(path, new.len() as u64)).into());
            }
            return Ok(Plan::Add(new));
        }
        (Some(current), FileChange::Added) => {
            return Err(about(Refusal::at(
                OpErrorKind::AlreadyExists,
                path,
                "already exists; the patch creates it (`--- /dev/null`)",
            ))
            .conflict(|c| c.current_sha256 = Some(current.sha256.clone()))
            .into());
        }
        (None, _) => {
            return Err(about(Refusal::at(OpErrorKind::NotFound, path, "does not exist")).into());
        }
        (Some(current), _) => current,
    };
    let with_sha =
        |r: Refusal| about(r).conflict(|c| c.current_sha256 = Some(current.sha256.clone()));
    let new = apply(&current.text, &part.hunks).map_err(|m| {
        let h = &part.hunks[m.hunk];
        with_sha(Refusal::at(
            OpErrorKind::PatchDoesNotApply,
            path,
            &format!(
                "hunk {} (line {} of the patch): {}",
                m.hunk + 1,
                h.patch_line,
                m.message
            ),
        ))
        .conflict(|c| {
            c.hunk = Some(m.hunk as u32 + 1);
            c.patch_line = Some(h.patch_line);
        })
    })?;
    if part.change == FileChange::Deleted {
        if !new.is_empty() {
            return Err(with_sha(Refusal::at(
                OpErrorKind::PatchDoesNotApply,
                path,
                "holds lines the patch does not remove, so it is not deleted; read it again",
            ))
            .into());
        }
        return Ok(Plan::Delete(current));
    }
    if new.len() as u64 > MAX_EDIT_FILE_SIZE {
        return Err(with_sha(file::too_large(path, new.len() as u64)).into());
    }
    Ok(Plan::Modify(current, new))
}

/// Writes every planned file: all new contents staged first (the directories of created files
/// made only now that everything checked), then created files put in place (undone if one
/// exists by now), then replaced ones, then deleted ones removed.
fn write(root: &Root, planned: &[(&FilePatch<'_>, Plan)]) -> Result<(), Refusal> {
    let failed = |path: &RelativePath, e: std::io::Error| {
        file::unwritable(path, e).conflict(|c| c.path = Some(path.clone()))
    };
    let mut staged = Vec::with_capacity(planned.len());
    for (part, plan) in planned {
        let path = &part.path;
        let s = match plan {
            Plan::Add(new) => {
                let dir = root.make_dirs(file::split(path).0).map_err(|e| {
                    file::dir_refusal(path, e).conflict(|c| c.path = Some(path.clone()))
                })?;
                Staged::write(
                    &dir,
                    new.as_bytes(),
                    None,
                    file::new_file_mode(part.executable),
                )
            }
            Plan::Modify(current, new) => {
                Staged::write(&current.dir, new.as_bytes(), Some(&current.opened), 0)
            }
            Plan::Delete(_) => {
                staged.push(None);
                continue;
            }
        };
        staged.push(Some(s.map_err(|e| failed(path, e))?));
    }
    let mut created: Vec<usize> = Vec::new();
    for (k, (part, plan)) in planned.iter().enumerate() {
        let (Plan::Add(_), Some(s)) = (plan, staged[k].as_mut()) else {
            continue;
        };
        if let Err(e) = s.create(file::split(&part.path).1) {
            for &j in &created {
                if let Some(s) = &staged[j] {
                    let _ = s.dir().remove(file::split(&planned[j].0.path).1);
                }
            }
            let path = &part.path;
            return Err(
                if e.raw_os_error() == Some(rustix::io::Errno::EXIST.raw_os_error()) {
                    Refusal::at(
                        OpErrorKind::AlreadyExists,
                        path,
                        "was created by another writer meanwhile; nothing was changed",
                    )
                    .conflict(|c| c.path = Some(path.clone()))
                } else {
                    failed(path, e)
                },
            );
        }
        created.push(k);
    }
    let mut written = !created.is_empty();
    // Deletions last: a file is gone only once everything else is in place.
    for deleting in [false, true] {
        for (k, (part, plan)) in planned.iter().enumerate() {
            let result = match (plan, staged[k].as_mut()) {
                (Plan::Modify(current, _), Some(s)) if !deleting => s.replace(&current.name),
                (Plan::Delete(current), _) if deleting => current
                    .dir
                    .remove(&current.name)
                    .and_then(|()| current.dir.sync()),
                _ => continue,
            };
            if let Err(e) = result {
                let mut refusal = failed(&part.path, e);
                if written {
                    refusal
                        .message
                        .push_str("; the files before it in the patch were already written");
                }
                return Err(refusal);
            }
            written = true;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Vec<FilePatch<'_>> {
        parse(text).unwrap()
    }

    fn error(text: &str) -> (u64, String) {
        let u = parse(text).unwrap_err();
        (u.line, u.message)
    }

    fn applied(content: &str, patch: &str) -> Result<String, Misfit> {
        let parts = parsed(patch);
        apply(content, &parts[0].hunks)
    }

    const GIT: &str = "\
commit message to skip
diff --git a/src/lib.rs b/src/lib.rs
index 3b18e51..a8c3f2d 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,3 +1,3 @@ fn context
 one
-two
+TWO
 three
diff --git a/new.txt b/new.txt
new file mode 100755
index 0000000..e69de29
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
\\ No newline at end of file
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/empty b/empty
new file mode 100644
index 0000000..e69de29
-- 
2.43.0
";

    #[test]
    fn a_git_patch_reads_into_its_files_and_hunks() {
        let parts = parsed(GIT);
        let paths: Vec<(&str, FileChange, bool)> = parts
            .iter()
            .map(|p| (p.path.as_str(), p.change, p.executable))
            .collect();
        assert_eq!(
            paths,
            [
                ("src/lib.rs", FileChange::Modified, false),
                ("new.txt", FileChange::Added, true),
                ("gone.txt", FileChange::Deleted, false),
                ("empty", FileChange::Added, false),
            ]
        );
        assert_eq!(
            parts[0].hunks[0].lines,
            [
                (Side::Context, "one\n"),
                (Side::Removed, "two\n"),
                (Side::Added, "TWO\n"),
                (Side::Context, "three\n")
            ]
        );
        assert_eq!(parts[0].hunks[0].patch_line, 6);
        assert_eq!(parts[1].hunks[0].lines[1], (Side::Added, "world"));
        assert!(parts[3].hunks.is_empty());
    }

    #[test]
    fn plain_diffs_keep_paths_without_prefixes_and_drop_times() {
        let parts = parsed(
            "--- src/a.rs\t2024-01-01 10:00:00\n+++ src/a.rs\t2024-01-02 10:00:00\n@@ -1 +1 @@\n-a\n+b\n",
        );
        assert_eq!(parts[0].path.as_str(), "src/a.rs");
        // A missing leading space on an empty context line is read as that line.
        let parts = parsed("--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n");
        assert_eq!(parts[0].hunks[0].lines[1], (Side::Context, "\n"));
    }

    #[test]
    fn unreadable_patches_name_their_line() {
        let cases: &[(&str, u64, &str)] = &[
            ("just words\n", 1, "no file"),
            ("--- a/x\n+++ b/x\n", 3, "followed by a hunk"),
            ("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n", 3, "ends inside"),
            (
                "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n+c\n",
                6,
                "outside any hunk",
            ),
            ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n-b\n", 5, "more lines"),
            ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n*a\n+b\n", 4, "starts with"),
            ("--- a/x\n+++ b/x\n@@ -x +1 @@\n", 3, "not a hunk header"),
            ("--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n", 1, "`..`"),
            (
                "--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n",
                1,
                "absolute",
            ),
            ("--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n", 2, "renames"),
            (
                "diff --git a/x b/y\nsimilarity index 90%\nrename from x\n",
                2,
                "`similarity index`",
            ),
            (
                "diff --git a/x b/x\nold mode 100644\nnew mode 100755\n",
                2,
                "`old mode`",
            ),
            (
                "diff --git a/x b/x\nBinary files a/x and b/x differ\n",
                2,
                "binary",
            ),
            ("diff --git a/x b/x\nnew file mode 120000\n", 2, "120000"),
            ("diff --git \"a/x y\" \"b/x y\"\n", 1, "quoted"),
            (
                "--- a/x\n+++ b/x\n@@ -3 +3 @@\n-a\n+b\n@@ -1 +1 @@\n-c\n+d\n",
                6,
                "in order",
            ),
            (
                "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/x\n+++ b/x\n@@ -2 +2 @@\n-a\n+b\n",
                1,
                "twice",
            ),
            (
                "--- /dev/null\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
                3,
                "one hunk of added",
            ),
            (
                "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n\\ No newline at end of file\n-b\n+c\n+d\n",
                3,
                "not the last",
            ),
        ];
        for (patch, line, why) in cases {
            let (at, message) = error(patch);
            assert!(message.contains(why), "{patch:?}: {message}");
            assert_eq!(at, *line, "{patch:?}: {message}");
        }
    }

    #[test]
    fn hunks_apply_exactly_or_shifted_never_fuzzily() {
        let content = "a\nb\nc\nd\ne\n";
        let patch = "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n";
        assert_eq!(applied(content, patch).unwrap(), "a\nb\nC\nd\ne\n");
        // Two lines were added above: found two lines down.
        let shifted = format!("x\ny\n{content}");
        assert_eq!(applied(&shifted, patch).unwrap(), "x\ny\na\nb\nC\nd\ne\n");
        // One context line differs: no fuzz.
        let m = applied("a\nb\nc\nD\ne\n", patch).unwrap_err();
        assert_eq!(m.hunk, 0);
        assert!(
            m.message
                .contains("line 4 of the file is `D` where the hunk has `d`"),
            "{}",
            m.message
        );
        // A missing newline at the end must be there, and be absent, as the patch says.
        let eof = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n";
        assert_eq!(applied("a", eof).unwrap(), "a\n");
        assert!(applied("a\n", eof).is_err());
        // Insertion into an empty file, and CRLF files read LF hunks as CRLF.
        assert_eq!(
            applied("", "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+x\n").unwrap(),
            "x\n"
        );
        assert_eq!(
            applied(
                "a\r\nb\r\n",
                "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n"
            )
            .unwrap(),
            "a\r\nB\r\n"
        );
    }

    #[test]
    fn later_hunks_follow_earlier_ones_and_never_reuse_their_lines() {
        let content = "x\nx\nx\nx\n";
        let patch = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+1\n@@ -2 +2 @@\n-x\n+2\n";
        assert_eq!(applied(content, patch).unwrap(), "1\n2\nx\nx\n");
        let too_few =
            "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+1\n@@ -2 +2 @@\n-x\n+2\n@@ -3 +3 @@\n-x\n+3\n";
        assert_eq!(applied("x\nx\n", too_few).unwrap_err().hunk, 2);
    }
}
