//! `git status --porcelain=v2 --branch -z`: the one reading of a work tree's state, for
//! `git_status` answers, commit checks and the overview's Git summary.
//!
//! Records are NUL-terminated and names are never quoted, so a name with spaces or newlines
//! reads back exactly; a name no project path can name is counted, not listed. Git prints
//! paths from the top of the work tree; they are made project-relative by cutting the
//! project root's prefix.

use wc_runner_protocol::{
    ChangeKind, GitStatusAnswer, GitSummary, MAX_GIT_TEXT_BYTES, MAX_STATUS_ENTRIES, RelativePath,
    StatusEntry,
};

use super::job::{GitError, GitJobs, bounded};
use crate::answer::Budget;

/// What `git status` said: the branch headers and one record per file.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Status<'a> {
    pub(crate) branch: Option<String>,
    pub(crate) head: Option<String>,
    pub(crate) upstream: Option<String>,
    pub(crate) ahead: Option<u64>,
    pub(crate) behind: Option<u64>,
    pub(crate) records: Vec<Record<'a>>,
    /// Git's output was longer than kept: records after its end are missing.
    pub(crate) truncated: bool,
}

/// One file of a status, its path as Git printed it (from the top of the work tree).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    pub(crate) path: &'a [u8],
    pub(crate) original: Option<&'a [u8]>,
    pub(crate) index: Option<ChangeKind>,
    pub(crate) worktree: Option<ChangeKind>,
    pub(crate) conflicted: bool,
}

/// Runs `git status` for the project root's part of the work tree, keeping `stdout_bytes`.
pub(crate) async fn query(jobs: &GitJobs<'_>, stdout_bytes: u64) -> Result<Output, GitError> {
    let mut args = vec![
        "status",
        "--porcelain=v2",
        "--branch",
        "-z",
        "--untracked-files=normal",
    ];
    let specs = jobs.pathspecs(&[""]);
    args.extend(specs.iter().map(String::as_str));
    let out = jobs.output(&args, stdout_bytes).await?;
    Ok(Output {
        bytes: out.stdout,
        truncated: out.stdout_truncated,
    })
}

/// The raw output of [`query`].
pub(crate) struct Output {
    bytes: Vec<u8>,
    truncated: bool,
}

impl Output {
    /// Its records.
    pub(crate) fn parse(&self) -> Status<'_> {
        let mut status = parse(&self.bytes);
        status.truncated |= self.truncated;
        status
    }
}

/// Reads porcelain v2 output. A record cut by the output bound is dropped and flags the
/// status truncated; a record of a form this reading does not know is skipped.
pub(crate) fn parse(out: &[u8]) -> Status<'_> {
    let mut status = Status::default();
    let mut tokens: Vec<&[u8]> = out.split(|&b| b == 0).collect();
    // The last piece is empty after complete output, or a record cut short.
    if tokens.pop().is_some_and(|last| !last.is_empty()) {
        status.truncated = true;
    }
    let mut tokens = tokens.into_iter();
    while let Some(token) = tokens.next() {
        let Some((&tag, _)) = token.split_first() else {
            continue;
        };
        match tag {
            b'#' => header(&mut status, token),
            b'1' => {
                if let Some(fields) = fields(token, 9) {
                    status.records.push(changed(fields[1], fields[8], None));
                }
            }
            b'2' => {
                let Some(original) = tokens.next() else {
                    status.truncated = true;
                    break;
                };
                if let Some(fields) = fields(token, 10) {
                    status
                        .records
                        .push(changed(fields[1], fields[9], Some(original)));
                }
            }
            b'u' => {
                if let Some(fields) = fields(token, 11) {
                    let (index, worktree) = letters(fields[1]);
                    status.records.push(Record {
                        path: fields[10],
                        original: None,
                        index,
                        worktree,
                        conflicted: true,
                    });
                }
            }
            b'?' => {
                if let Some(path) = token.strip_prefix(b"? ") {
                    status.records.push(Record {
                        path,
                        original: None,
                        index: None,
                        worktree: Some(ChangeKind::Untracked),
                        conflicted: false,
                    });
                }
            }
            _ => {}
        }
    }
    status
}

/// `token` split at its first `count - 1` spaces (the last field, a path, may hold spaces).
fn fields(token: &[u8], count: usize) -> Option<Vec<&[u8]>> {
    let fields: Vec<&[u8]> = token.splitn(count, |&b| b == b' ').collect();
    (fields.len() == count).then_some(fields)
}

fn changed<'a>(xy: &[u8], path: &'a [u8], original: Option<&'a [u8]>) -> Record<'a> {
    let (index, worktree) = letters(xy);
    Record {
        path,
        original,
        index,
        worktree,
        conflicted: false,
    }
}

/// The index and work-tree changes of a two-letter `XY` field.
fn letters(xy: &[u8]) -> (Option<ChangeKind>, Option<ChangeKind>) {
    let kind = |letter: Option<&u8>| match letter? {
        b'.' => None,
        b'A' => Some(ChangeKind::Added),
        b'D' => Some(ChangeKind::Deleted),
        b'R' => Some(ChangeKind::Renamed),
        b'C' => Some(ChangeKind::Copied),
        b'T' => Some(ChangeKind::TypeChanged),
        b'U' => Some(ChangeKind::Unmerged),
        // `M`, and any letter a later Git adds: something changed.
        _ => Some(ChangeKind::Modified),
    };
    (kind(xy.first()), kind(xy.get(1)))
}

fn header(status: &mut Status<'_>, token: &[u8]) {
    let Some(header) = token.strip_prefix(b"# ") else {
        return;
    };
    let text = |value: &[u8]| {
        bounded(
            String::from_utf8_lossy(value).into_owned(),
            MAX_GIT_TEXT_BYTES,
        )
    };
    if let Some(oid) = header.strip_prefix(b"branch.oid ") {
        status.head = std::str::from_utf8(oid)
            .ok()
            .filter(|o| o.len() <= 64 && o.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_owned);
    } else if let Some(name) = header.strip_prefix(b"branch.head ") {
        status.branch = (name != b"(detached)").then(|| text(name));
    } else if let Some(name) = header.strip_prefix(b"branch.upstream ") {
        status.upstream = Some(text(name));
    } else if let Some(counts) = header.strip_prefix(b"branch.ab ") {
        let counts = String::from_utf8_lossy(counts);
        let mut counts = counts.split(' ');
        let ahead = counts
            .next()
            .and_then(|a| a.strip_prefix('+')?.parse().ok());
        let behind = counts
            .next()
            .and_then(|b| b.strip_prefix('-')?.parse().ok());
        if let (Some(ahead), Some(behind)) = (ahead, behind) {
            status.ahead = Some(ahead);
            status.behind = Some(behind);
        }
    }
}

impl Status<'_> {
    /// The overview's summary: the branch, HEAD, and whether anything is changed.
    pub(crate) fn summary(&self) -> GitSummary {
        GitSummary::Repository {
            branch: self.branch.clone(),
            head: self.head.clone(),
            dirty: !self.records.is_empty() || self.truncated,
        }
    }

    /// The `git_status` answer, paths made relative to the project root at `prefix` (its
    /// place in the work tree, `sub/` or empty).
    pub(crate) fn answer(&self, prefix: &str) -> GitStatusAnswer {
        let mut answer = GitStatusAnswer {
            branch: self.branch.clone(),
            head: self.head.clone(),
            upstream: self.upstream.clone(),
            ahead: self.ahead,
            behind: self.behind,
            entries: Vec::new(),
            entries_truncated: self.truncated,
            unlisted: 0,
            dirty: !self.records.is_empty() || self.truncated,
            conflicts: 0,
            staged: 0,
            unstaged: 0,
            untracked: 0,
        };
        let mut budget = Budget::new();
        for record in &self.records {
            if record.conflicted {
                answer.conflicts += 1;
            } else if record.worktree == Some(ChangeKind::Untracked) {
                answer.untracked += 1;
            } else {
                answer.staged += u64::from(record.index.is_some());
                answer.unstaged += u64::from(record.worktree.is_some());
            }
            let Some(path) = project_path(prefix, record.path) else {
                answer.unlisted += 1;
                continue;
            };
            if answer.entries_truncated {
                continue;
            }
            let entry = StatusEntry {
                path,
                original_path: record.original.and_then(|o| project_path(prefix, o)),
                index: record.index,
                worktree: record.worktree,
                conflicted: record.conflicted,
            };
            if answer.entries.len() == MAX_STATUS_ENTRIES || !budget.take(&entry) {
                answer.entries_truncated = true;
                continue;
            }
            answer.entries.push(entry);
        }
        answer
    }

    /// The project-relative paths of unmerged files (those a project path can name).
    pub(crate) fn conflicted(&self, prefix: &str) -> Vec<RelativePath> {
        self.records
            .iter()
            .filter(|r| r.conflicted)
            .filter_map(|r| project_path(prefix, r.path))
            .collect()
    }
}

/// The project path of a path Git printed from the top of the work tree, if it lies in the
/// project and a project path can name it.
pub(crate) fn project_path(prefix: &str, path: &[u8]) -> Option<RelativePath> {
    let rel = path.strip_prefix(prefix.as_bytes())?;
    let rel = std::str::from_utf8(rel).ok()?;
    RelativePath::parse(rel).ok().filter(|p| !p.is_root())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ChangeKind::*;

    const OID: &str = "1111111111111111111111111111111111111111";

    fn sample() -> Vec<u8> {
        let m = "100644 100644 100644";
        let h = format!("{OID} {OID}");
        [
            format!("# branch.oid {OID}"),
            "# branch.head main".to_owned(),
            "# branch.upstream origin/main".to_owned(),
            "# branch.ab +2 -1".to_owned(),
            format!("1 .M N... {m} {h} sub/a file.txt"),
            format!("1 A. N... 000000 100644 100644 {h} sub/new"),
            format!("1 D. N... 100644 000000 000000 {h} sub/gone"),
            format!("1 MT N... {m} {h} sub/both"),
            format!("2 R. N... {m} {h} R100 sub/moved to"),
            "sub/moved from".to_owned(),
            format!("2 RM N... {m} {h} R90 sub/in"),
            "elsewhere/out".to_owned(),
            format!("u UU N... {m} 100644 {h} {OID} sub/clash"),
            format!("u AU N... {m} 100644 {h} {OID} sub/ours"),
            "1 .M N... 100644 100644 100644 x x sub/line\nbreak".to_owned(),
            "? sub/untracked dir/".to_owned(),
            "? sub/colon:name".to_owned(),
        ]
        .join("\0")
        .into_bytes()
        .into_iter()
        .chain([0])
        .collect()
    }

    fn entry(
        path: &str,
        original: Option<&str>,
        index: Option<ChangeKind>,
        worktree: Option<ChangeKind>,
    ) -> StatusEntry {
        StatusEntry {
            path: RelativePath::parse(path).unwrap(),
            original_path: original.map(|o| RelativePath::parse(o).unwrap()),
            index,
            worktree,
            conflicted: false,
        }
    }

    #[test]
    fn porcelain_v2_reads_branch_upstream_renames_conflicts_and_odd_names() {
        let out = sample();
        let status = parse(&out);
        assert!(!status.truncated);
        let answer = status.answer("sub/");
        assert_eq!(answer.branch.as_deref(), Some("main"));
        assert_eq!(answer.head.as_deref(), Some(OID));
        assert_eq!(answer.upstream.as_deref(), Some("origin/main"));
        assert_eq!((answer.ahead, answer.behind), (Some(2), Some(1)));
        let conflicted = |path: &str, index, worktree| StatusEntry {
            conflicted: true,
            ..entry(path, None, index, worktree)
        };
        assert_eq!(
            answer.entries,
            [
                entry("a file.txt", None, None, Some(Modified)),
                entry("new", None, Some(Added), None),
                entry("gone", None, Some(Deleted), None),
                entry("both", None, Some(Modified), Some(TypeChanged)),
                entry("moved to", Some("moved from"), Some(Renamed), None),
                // Its origin lies outside the project: not named.
                entry("in", None, Some(Renamed), Some(Modified)),
                conflicted("clash", Some(Unmerged), Some(Unmerged)),
                conflicted("ours", Some(Added), Some(Unmerged)),
                entry("untracked dir", None, None, Some(Untracked)),
            ]
        );
        // A newline and a colon: counted, not listed.
        assert_eq!(answer.unlisted, 2);
        assert_eq!(
            (
                answer.staged,
                answer.unstaged,
                answer.conflicts,
                answer.untracked
            ),
            (5, 4, 2, 2)
        );
        assert!(answer.dirty && !answer.entries_truncated);
        assert_eq!(
            status.conflicted("sub/"),
            [
                RelativePath::parse("clash").unwrap(),
                RelativePath::parse("ours").unwrap()
            ]
        );
    }

    #[test]
    fn a_fresh_or_detached_clean_tree_has_no_head_or_branch_and_is_clean() {
        let out = b"# branch.oid (initial)\0# branch.head (detached)\0";
        let status = parse(out);
        assert_eq!(
            status.summary(),
            GitSummary::Repository {
                branch: None,
                head: None,
                dirty: false
            }
        );
        let answer = status.answer("");
        assert_eq!((answer.upstream, answer.ahead), (None, None));
        assert!(answer.entries.is_empty() && !answer.dirty);
    }

    #[test]
    fn output_cut_by_its_bound_drops_the_cut_record_and_says_so() {
        let out = sample();
        // Cut inside the rename's pair: the rename is dropped, earlier records stay.
        let at = out
            .windows(b"sub/moved from".len())
            .position(|w| w == b"sub/moved from")
            .unwrap();
        let status = parse(&out[..at]);
        assert!(status.truncated);
        assert_eq!(status.records.len(), 4);
        let answer = status.answer("sub/");
        assert!(answer.entries_truncated && answer.dirty);
    }

    #[test]
    fn entries_past_the_bound_are_counted_not_listed() {
        let many: Vec<u8> = (0..MAX_STATUS_ENTRIES + 5)
            .flat_map(|i| format!("? f{i}\0").into_bytes())
            .collect();
        let answer = parse(&many).answer("");
        assert_eq!(answer.entries.len(), MAX_STATUS_ENTRIES);
        assert!(answer.entries_truncated);
        assert_eq!(answer.untracked, MAX_STATUS_ENTRIES as u64 + 5);
    }
}
