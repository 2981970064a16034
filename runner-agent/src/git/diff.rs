//! `git_diff`: the unified diff of the project's changes, cut to its byte bound at a line
//! end, with every changed file's line counts from `--numstat -z`.

use wc_runner_protocol::{
    DiffFile, GitDiffAnswer, GitDiffOp, MAX_ANSWER_BYTES, MAX_DIFF_FILES,
    MAX_OUTPUT_BYTES_PER_STREAM, WorkAnswer,
};

use super::Ctx;
use super::job::GitError;
use crate::answer::{Budget, Ended};

/// Room of the diff text in an answer's JSON; the files' line counts take what is left. A
/// diff text of escape-heavy bytes is cut shorter than `limit_bytes` to stay within it.
const DIFF_JSON_BYTES: usize = MAX_ANSWER_BYTES / 2 + MAX_ANSWER_BYTES / 4;

/// `git diff` with the options that keep its output Git's own whatever the repository
/// configures: no colour, no external diff or text conversion program, paths from the project
/// root and only its files.
pub(super) const DIFF: [&str; 5] = [
    "diff",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--relative",
];

pub(super) async fn run(ctx: &Ctx<'_>, op: &GitDiffOp) -> Result<WorkAnswer, Ended> {
    ctx.check_beneath(&op.paths)?;
    let compared: &[&str] = if op.staged { &["--cached"] } else { &[] };
    let answer = changes(ctx, compared, &op.paths, op.context_lines, op.limit_bytes).await?;
    Ok(WorkAnswer::GitDiff(answer))
}

/// The diff of what `compared` names (nothing: the work tree against the index; `--cached`;
/// or two trees) for `paths`, its text cut to `limit_bytes`, with every file's line counts.
pub(super) async fn changes(
    ctx: &Ctx<'_>,
    compared: &[&str],
    paths: &[wc_runner_protocol::RelativePath],
    context_lines: u32,
    limit_bytes: u32,
) -> Result<GitDiffAnswer, Ended> {
    let context = format!("-U{context_lines}");
    let mut common = DIFF.to_vec();
    common.extend(compared);
    let jobs = ctx.jobs();
    let specs = jobs.pathspecs(&super::named(paths));
    let mut text_args = common.clone();
    text_args.extend(["--src-prefix=a/", "--dst-prefix=b/", &context]);
    text_args.extend(specs.iter().map(String::as_str));
    let mut stat_args = common;
    stat_args.extend(["--numstat", "-z"]);
    stat_args.extend(specs.iter().map(String::as_str));
    let (text, stats) = tokio::join!(
        jobs.output(&text_args, u64::from(limit_bytes)),
        jobs.output(&stat_args, MAX_OUTPUT_BYTES_PER_STREAM),
    );
    let (text, stats) = (text?, stats?);
    let (diff, cut) = cut_text(
        &text.stdout,
        text.stdout_truncated,
        limit_bytes as usize,
        DIFF_JSON_BYTES,
    );
    let mut budget = Budget::new();
    if !budget.take(&diff) {
        return Err(GitError::Unavailable("the diff text does not fit an answer".into()).into());
    }
    let (files, files_truncated) = numstat(&stats.stdout, stats.stdout_truncated, &mut budget);
    Ok(GitDiffAnswer {
        diff,
        truncated: cut,
        files,
        files_truncated,
    })
}

/// The head of `raw` (Git's output, `more` when it was longer than kept) as text of at most
/// `limit` bytes whose JSON string is at most `json_limit` bytes: whole lines, or the start
/// of a first line too long for either bound. Invalid UTF-8 is replaced. Returns the text and
/// whether anything was left out.
fn cut_text(raw: &[u8], more: bool, limit: usize, json_limit: usize) -> (String, bool) {
    let text = String::from_utf8_lossy(raw);
    let mut kept = 0;
    let mut json = 2;
    let mut cut = more;
    for line in text.split_inclusive('\n') {
        let escaped: usize = line.chars().map(json_len).sum();
        if kept + line.len() > limit || json + escaped > json_limit {
            cut = true;
            break;
        }
        // A last line without its end may be one the output bound cut.
        if more && !line.ends_with('\n') {
            break;
        }
        kept += line.len();
        json += escaped;
    }
    if kept == 0 && cut {
        // Even the first line is over a bound: its beginning, on a character boundary.
        for c in text.chars() {
            if kept + c.len_utf8() > limit || json + json_len(c) > json_limit {
                break;
            }
            kept += c.len_utf8();
            json += json_len(c);
        }
    }
    (text[..kept].to_owned(), cut || kept < text.len())
}

/// Bytes `c` takes inside a JSON string.
fn json_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if c < ' ' => 6,
        c => c.len_utf8(),
    }
}

/// One record of `--numstat -z`: the file's (new) path as Git wrote it, and its lines added
/// and removed (`None` for a binary file).
pub(super) struct Counted<'a> {
    pub(super) path: &'a [u8],
    pub(super) lines: Option<(u64, u64)>,
}

/// Reads `--numstat -z`: `added TAB removed TAB path NUL`, or for a rename `added TAB removed
/// TAB NUL from NUL to NUL`; `-` counts mark a binary file. Returns the records and whether
/// the output ended inside one (cut).
pub(super) fn numstat_records(raw: &[u8]) -> (Vec<Counted<'_>>, bool) {
    let mut tokens: Vec<&[u8]> = raw.split(|&b| b == 0).collect();
    let mut cut = tokens.pop().is_some_and(|last| !last.is_empty());
    let mut records = Vec::new();
    let mut tokens = tokens.into_iter();
    while let Some(token) = tokens.next() {
        let mut parts = token.splitn(3, |&b| b == b'\t');
        let (Some(added), Some(removed), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = if path.is_empty() {
            // A rename: its origin, then its new path.
            let (Some(_from), Some(to)) = (tokens.next(), tokens.next()) else {
                cut = true;
                break;
            };
            to
        } else {
            path
        };
        let count = |n: &[u8]| std::str::from_utf8(n).ok().and_then(|n| n.parse().ok());
        let lines = count(added).zip(count(removed));
        records.push(Counted { path, lines });
    }
    (records, cut)
}

/// [`numstat_records`] as diff files. Files whose path no project path can name are left out,
/// as are files past the bound or the answer's room (flagged).
fn numstat(raw: &[u8], more: bool, budget: &mut Budget) -> (Vec<DiffFile>, bool) {
    let (records, cut) = numstat_records(raw);
    let mut truncated = cut || more;
    let mut files = Vec::new();
    for record in records {
        let Some(path) = super::status::project_path("", record.path) else {
            continue;
        };
        let (added, removed) = record.lines.unwrap_or((0, 0));
        let file = DiffFile {
            path,
            added,
            removed,
            binary: record.lines.is_none(),
        };
        if files.len() == MAX_DIFF_FILES || !budget.take(&file) {
            truncated = true;
            break;
        }
        files.push(file);
    }
    (files, truncated)
}

/// Sums of `--numstat -z` output: files, lines added, lines removed.
pub(super) fn totals(raw: &[u8]) -> (u64, u64, u64) {
    let mut budget = Budget::new();
    let (files, _) = numstat(raw, false, &mut budget);
    files.iter().fold((0, 0, 0), |(n, a, r), f| {
        (n + 1, a + f.added, r + f.removed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_is_cut_after_its_last_whole_line_within_the_limit() {
        let raw = b"line one\nline two\nline three\n";
        assert_eq!(
            cut_text(raw, false, 100, 1000),
            (String::from_utf8_lossy(raw).into(), false)
        );
        assert_eq!(
            cut_text(raw, false, 20, 1000),
            ("line one\nline two\n".into(), true)
        );
        // Cut by the output bound inside a line: that line is dropped.
        assert_eq!(
            cut_text(b"line one\nline t", true, 100, 1000),
            ("line one\n".into(), true)
        );
        // A first line longer than the limit: its beginning.
        assert_eq!(
            cut_text(b"abcdefgh\n", false, 4, 1000),
            ("abcd".into(), true)
        );
        // Multi-byte characters are never split.
        assert_eq!(
            cut_text("ééé".as_bytes(), false, 5, 1000),
            ("éé".into(), true)
        );
    }

    #[test]
    fn escape_heavy_text_is_cut_to_its_json_room() {
        let raw = "\u{1}\u{1}\u{1}\n\"\"\n".as_bytes();
        // 2 quotes + 3 × 6 + 2 for the newline = 22.
        assert_eq!(
            cut_text(raw, false, 100, 22),
            ("\u{1}\u{1}\u{1}\n".into(), true)
        );
        let (all, cut) = cut_text(raw, false, 100, 1000);
        assert!(!cut);
        assert_eq!(
            serde_json::to_string(&all).unwrap().len(),
            2 + 3 * 6 + 2 + 4 + 2
        );
    }

    #[test]
    fn numstat_reads_counts_renames_and_binary_files() {
        let raw = b"1\t2\tsrc/a b.rs\0-\t-\timg.png\x003\t0\t\0old name\0new name\0";
        let (files, truncated) = numstat(raw, false, &mut Budget::new());
        assert!(!truncated);
        let got: Vec<(&str, u64, u64, bool)> = files
            .iter()
            .map(|f| (f.path.as_str(), f.added, f.removed, f.binary))
            .collect();
        assert_eq!(
            got,
            [
                ("src/a b.rs", 1, 2, false),
                ("img.png", 0, 0, true),
                ("new name", 3, 0, false)
            ]
        );
        assert_eq!(totals(raw), (3, 4, 2));
        let (files, truncated) = numstat(&raw[..raw.len() - 4], false, &mut Budget::new());
        assert_eq!(files.len(), 2);
        assert!(truncated);
    }
}
