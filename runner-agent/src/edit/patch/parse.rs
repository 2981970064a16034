//! Reading a unified diff into its file parts: `diff --git` sections and plain `---`/`+++`
//! pairs, their headers and hunks, refusing what cannot be applied exactly (renames, copies,
//! mode changes, binary diffs, quoted paths) with the line and the reason.

use std::collections::HashSet;

use wc_runner_protocol::{FileChange, MAX_PATCH_FILES, RelativePath};

/// One file's part of a patch.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct FilePatch<'p> {
    /// The file.
    pub(super) path: RelativePath,
    /// What the part does to it.
    pub(super) change: FileChange,
    /// A created file is executable (`new file mode 100755`).
    pub(super) executable: bool,
    pub(super) hunks: Vec<Hunk<'p>>,
}

/// One hunk: where it goes and its lines, each with its line ending (the last of a side may
/// have none: `\ No newline at end of file`).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Hunk<'p> {
    /// `-<start>` of the header.
    pub(super) old_start: u64,
    /// Lines of the old side.
    pub(super) old_len: u64,
    pub(super) lines: Vec<(Side, &'p str)>,
    /// The header's line in the patch (from 1).
    pub(super) patch_line: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Context,
    Removed,
    Added,
}

/// A patch that cannot be read: the line (from 1) and why.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Unreadable {
    pub(super) line: u64,
    pub(super) message: String,
}

pub(super) fn unreadable<T>(line: u64, message: impl Into<String>) -> Result<T, Unreadable> {
    Err(Unreadable {
        line,
        message: message.into(),
    })
}

/// A line without its line ending.
pub(super) fn bare(line: &str) -> &str {
    line.trim_end_matches('\n').trim_end_matches('\r')
}

/// Reads `text` (whose every line ends with `\n`) into its file parts.
pub(super) fn parse(text: &str) -> Result<Vec<FilePatch<'_>>, Unreadable> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut files: Vec<FilePatch<'_>> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = bare(lines[i]);
        let next = lines.get(i + 1).map(|l| bare(l));
        if line.starts_with("diff --git ") {
            files.push(git_part(&lines, &mut i)?);
        } else if line.starts_with("--- ") && next.is_some_and(|n| n.starts_with("+++ ")) {
            files.push(plain_part(&lines, &mut i)?);
        } else if files.is_empty() || line.is_empty() {
            i += 1;
        } else if line == "-- " {
            break;
        } else {
            let what = if line.starts_with("@@") {
                "a hunk header where a file header is expected (the previous hunk has more lines than its header counts?)"
            } else {
                "a line outside any hunk"
            };
            return unreadable(i as u64 + 1, format!("{what}: {}", shown(line)));
        }
    }
    if files.is_empty() {
        return unreadable(
            1,
            "no file in the patch: expected `--- a/<path>` and `+++ b/<path>` lines followed by hunks",
        );
    }
    if files.len() > MAX_PATCH_FILES {
        return unreadable(
            1,
            format!("the patch changes more than {MAX_PATCH_FILES} files"),
        );
    }
    let mut seen = HashSet::new();
    for f in &files {
        if !seen.insert(f.path.clone()) {
            return unreadable(
                1,
                format!("`{}` appears twice in the patch; merge its hunks", f.path),
            );
        }
    }
    Ok(files)
}

/// A line for a message: at most 120 characters of it.
pub(super) fn shown(line: &str) -> String {
    match line.char_indices().nth(120) {
        Some((cut, _)) => format!("`{}…`", &line[..cut]),
        None => format!("`{line}`"),
    }
}

/// A `diff --git` section: its extended headers, then `---`/`+++` and hunks (or none, for an
/// empty file created or deleted).
pub(super) fn git_part<'p>(lines: &[&'p str], i: &mut usize) -> Result<FilePatch<'p>, Unreadable> {
    let header_line = *i as u64 + 1;
    let paths = bare(lines[*i])["diff --git ".len()..].to_owned();
    if paths.starts_with('"') {
        return unreadable(header_line, "quoted paths are not supported");
    }
    *i += 1;
    let (mut created, mut deleted, mut executable) = (false, false, false);
    while *i < lines.len() {
        let line = bare(lines[*i]);
        let at = *i as u64 + 1;
        if line.starts_with("index ") {
            // Blob ids: the hunks themselves are checked against the file.
        } else if let Some(mode) = line.strip_prefix("new file mode ") {
            created = true;
            executable = match mode {
                "100644" => false,
                "100755" => true,
                _ => {
                    return unreadable(
                        at,
                        format!("new file mode {mode} is not applied (only 100644 and 100755)"),
                    );
                }
            };
        } else if line.starts_with("deleted file mode ") {
            deleted = true;
        } else if let Some(header) = ["old mode", "new mode"]
            .iter()
            .find(|h| line.starts_with(**h))
        {
            return unreadable(at, format!("`{header}`: mode changes are not applied"));
        } else if let Some(header) = [
            "similarity index",
            "dissimilarity index",
            "rename from",
            "rename to",
            "copy from",
            "copy to",
        ]
        .iter()
        .find(|h| line.starts_with(**h))
        {
            return unreadable(
                at,
                format!(
                    "`{header}`: renames and copies are not applied; delete and add the file instead"
                ),
            );
        } else if line.starts_with("Binary files ") || line == "GIT binary patch" {
            return unreadable(at, "binary diffs are not applied");
        } else {
            break;
        }
        *i += 1;
    }
    let part = if *i < lines.len() && bare(lines[*i]).starts_with("--- ") {
        if !lines.get(*i + 1).is_some_and(|l| l.starts_with("+++ ")) {
            return unreadable(
                *i as u64 + 2,
                "a `---` line must be followed by a `+++` line",
            );
        }
        plain_part(lines, i)?
    } else if created || deleted {
        // An empty file: Git writes no hunks, and the path only in the section header.
        let Some(path) = same_paths(&paths) else {
            return unreadable(header_line, "cannot tell the path of the empty file");
        };
        FilePatch {
            path: parse_path(&path, header_line)?,
            change: if created {
                FileChange::Added
            } else {
                FileChange::Deleted
            },
            executable,
            hunks: Vec::new(),
        }
    } else {
        return unreadable(
            header_line,
            "a `diff --git` section without `---`/`+++` lines changes nothing this applies",
        );
    };
    if (created && part.change != FileChange::Added)
        || (deleted && part.change != FileChange::Deleted)
    {
        return unreadable(
            header_line,
            "the file mode header and the `---`/`+++` paths disagree on whether the file is created or deleted",
        );
    }
    Ok(FilePatch { executable, ..part })
}

/// The path of `a/<p> b/<p>` when both sides name the same `<p>`.
pub(super) fn same_paths(paths: &str) -> Option<String> {
    let rest = paths.strip_prefix("a/")?;
    let half = rest.len().checked_sub(3)? / 2;
    let (a, b) = (rest.get(..half)?, rest.get(half..)?);
    (b.strip_prefix(" b/")? == a).then(|| a.to_owned())
}

/// A `---`/`+++` pair and the hunks after it.
pub(super) fn plain_part<'p>(
    lines: &[&'p str],
    i: &mut usize,
) -> Result<FilePatch<'p>, Unreadable> {
    let (old_at, new_at) = (*i as u64 + 1, *i as u64 + 2);
    let old_raw = header_path(&bare(lines[*i])["--- ".len()..]);
    let new_raw = header_path(&bare(lines[*i + 1])["+++ ".len()..]);
    *i += 2;
    let strip = (old_raw == "/dev/null" || old_raw.starts_with("a/"))
        && (new_raw == "/dev/null" || new_raw.starts_with("b/"));
    let side = |raw: &str, prefix: &str, at: u64| -> Result<Option<RelativePath>, Unreadable> {
        if raw == "/dev/null" {
            return Ok(None);
        }
        let raw = if strip { &raw[prefix.len()..] } else { raw };
        parse_path(raw, at).map(Some)
    };
    let (path, change) = match (side(old_raw, "a/", old_at)?, side(new_raw, "b/", new_at)?) {
        (None, None) => return unreadable(old_at, "both sides are /dev/null"),
        (None, Some(path)) => (path, FileChange::Added),
        (Some(path), None) => (path, FileChange::Deleted),
        (Some(a), Some(b)) if a != b => {
            return unreadable(
                new_at,
                format!(
                    "`{a}` becomes `{b}`: renames are not applied; delete and add the file instead"
                ),
            );
        }
        (Some(path), Some(_)) => (path, FileChange::Modified),
    };
    let mut hunks = Vec::new();
    while *i < lines.len() && lines[*i].starts_with("@@ ") {
        hunks.push(hunk(lines, i)?);
    }
    if hunks.is_empty() {
        return unreadable(
            new_at + 1,
            "a `---`/`+++` pair must be followed by a hunk (`@@ -l,n +l,n @@`)",
        );
    }
    let created = change == FileChange::Added;
    let deleted = change == FileChange::Deleted;
    for pair in hunks.windows(2) {
        if pair[1].old_start < pair[0].old_start + pair[0].old_len {
            return unreadable(
                pair[1].patch_line,
                "hunks of one file must be in order and must not overlap",
            );
        }
    }
    for h in &hunks {
        let (old_lines, new_lines) = sides(h);
        if created && (old_lines > 0 || hunks.len() > 1) {
            return unreadable(
                h.patch_line,
                "a created file (`--- /dev/null`) has one hunk of added lines",
            );
        }
        if deleted && new_lines > 0 {
            return unreadable(
                h.patch_line,
                "a deleted file (`+++ /dev/null`) has only removed lines",
            );
        }
    }
    Ok(FilePatch {
        path,
        change,
        executable: false,
        hunks,
    })
}

/// The path of a `---`/`+++` line: up to a tab (a time may follow).
pub(super) fn header_path(raw: &str) -> &str {
    raw.split('\t').next().unwrap_or_default()
}

pub(super) fn parse_path(raw: &str, at: u64) -> Result<RelativePath, Unreadable> {
    if raw.starts_with('"') {
        return unreadable(at, "quoted paths are not supported");
    }
    match RelativePath::parse(raw) {
        Ok(path) if path.is_root() => unreadable(at, "the path names no file"),
        Ok(path) => Ok(path),
        Err(e) => unreadable(at, format!("{}: {e}", shown(raw))),
    }
}

/// Lines of the old and the new side of a hunk.
pub(super) fn sides(h: &Hunk<'_>) -> (u64, u64) {
    let old = h.lines.iter().filter(|(s, _)| *s != Side::Added).count() as u64;
    let new = h.lines.iter().filter(|(s, _)| *s != Side::Removed).count() as u64;
    (old, new)
}

/// `@@ -a[,b] +c[,d] @@ …` and the lines it counts.
pub(super) fn hunk<'p>(lines: &[&'p str], i: &mut usize) -> Result<Hunk<'p>, Unreadable> {
    let at = *i as u64 + 1;
    let header = bare(lines[*i]);
    let bad = || {
        unreadable(
            at,
            format!("{} is not a hunk header `@@ -l,n +l,n @@`", shown(header)),
        )
    };
    let Some(ranges) = header
        .strip_prefix("@@ -")
        .and_then(|r| r.split_once(" @@"))
        .map(|(r, _)| r)
    else {
        return bad();
    };
    let Some((old, new)) = ranges.split_once(" +") else {
        return bad();
    };
    let range = |r: &str| -> Option<(u64, u64)> {
        match r.split_once(',') {
            Some((start, len)) => Some((start.parse().ok()?, len.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (Some((old_start, old_len)), Some((_, new_len))) = (range(old), range(new)) else {
        return bad();
    };
    if old_start == 0 && old_len > 0 {
        return bad();
    }
    *i += 1;
    let (mut old_left, mut new_left) = (old_len, new_len);
    let mut body: Vec<(Side, &'p str)> = Vec::new();
    while old_left > 0 || new_left > 0 {
        let Some(&line) = lines.get(*i) else {
            return unreadable(
                at,
                "the patch ends inside this hunk: it has fewer lines than its header counts",
            );
        };
        let line_at = *i as u64 + 1;
        let (side, text) = match line.as_bytes()[0] {
            b' ' => (Side::Context, &line[1..]),
            b'-' => (Side::Removed, &line[1..]),
            b'+' => (Side::Added, &line[1..]),
            // An empty context line whose leading space was lost.
            b'\n' | b'\r' => (Side::Context, line),
            b'\\' => {
                no_newline(&mut body, line_at)?;
                *i += 1;
                continue;
            }
            _ => {
                return unreadable(
                    line_at,
                    format!(
                        "{}: a hunk line starts with ` `, `-`, `+` or `\\` (the hunk has fewer lines than its header counts?)",
                        shown(bare(line))
                    ),
                );
            }
        };
        let (old_step, new_step) = match side {
            Side::Context => (1, 1),
            Side::Removed => (1, 0),
            Side::Added => (0, 1),
        };
        if old_left < old_step || new_left < new_step {
            return unreadable(
                line_at,
                format!("the hunk at line {at} has more lines than its header counts"),
            );
        }
        old_left -= old_step;
        new_left -= new_step;
        body.push((side, text));
        *i += 1;
    }
    if lines.get(*i).is_some_and(|l| l.starts_with('\\')) {
        no_newline(&mut body, *i as u64 + 1)?;
        *i += 1;
    }
    // Only the last line of each side may go without a newline.
    for side in [Side::Removed, Side::Added] {
        let of_side: Vec<&str> = body
            .iter()
            .filter(|(s, _)| *s == Side::Context || *s == side)
            .map(|(_, t)| *t)
            .collect();
        if of_side.iter().rev().skip(1).any(|t| !t.ends_with('\n')) {
            return unreadable(
                at,
                "`\\ No newline at end of file` follows a line that is not the last of its side",
            );
        }
    }
    Ok(Hunk {
        old_start,
        old_len,
        lines: body,
        patch_line: at,
    })
}

/// `\ No newline at end of file`: the previous line has no line ending.
pub(super) fn no_newline(body: &mut [(Side, &str)], at: u64) -> Result<(), Unreadable> {
    match body.last_mut() {
        Some((_, text)) if text.ends_with('\n') => {
            *text = &text[..text.len() - 1];
            Ok(())
        }
        _ => unreadable(at, "`\\ No newline at end of file` follows no line"),
    }
}
