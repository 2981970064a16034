//! `git_log`: the latest commits that touch the project (or one path of it), read from a
//! NUL-separated `--format` so no name or subject can break the reading.

use wc_runner_protocol::{
    CommitSummary, GitLogAnswer, GitLogOp, MAX_GIT_TEXT_BYTES, RelativePath, WorkAnswer,
};

use super::Ctx;
use super::job::{Command, bounded};
use crate::answer::Ended;

/// Fields of one commit: id, parents, author name, author email, author date (strict ISO
/// 8601, which is RFC 3339), subject.
const FORMAT: &str = "--format=tformat:%H%x00%P%x00%an%x00%ae%x00%aI%x00%s";
const FIELDS: usize = 6;

/// Git's output kept: far more than the bounded commits take, however long their subjects.
const LOG_BYTES: u64 = 4 * 1024 * 1024;

pub(super) async fn run(ctx: &Ctx<'_>, op: &GitLogOp) -> Result<WorkAnswer, Ended> {
    if let Some(path) = &op.path {
        ctx.check_beneath(std::slice::from_ref(path))?;
    }
    let jobs = ctx.jobs();
    let prefix = jobs.prefix().await?;
    let count = format!("--max-count={}", op.limit);
    // A signature check would run a program the configuration names, and print into the
    // output; the subject is the message's first line whatever the encoding settings.
    let mut args = vec![
        "-c",
        "log.showSignature=false",
        "log",
        "--no-color",
        "-z",
        FORMAT,
        &count,
    ];
    let path = op.path.as_ref().map(RelativePath::as_str);
    let specs = match path {
        Some(p) => jobs.pathspecs(&[p]),
        // The whole repository's history is the project's unless the root is a part of it.
        None if !prefix.is_empty() => jobs.pathspecs(&[""]),
        None => Vec::new(),
    };
    args.extend(specs.iter().map(String::as_str));
    let finished = jobs.run(Command::new(&args, LOG_BYTES)).await?;
    if !finished.succeeded() {
        // A branch without commits has no history to show.
        if finished.stderr.contains("does not have any commits yet") {
            return Ok(WorkAnswer::GitLog(GitLogAnswer {
                commits: Vec::new(),
            }));
        }
        return Err(Ended::from(finished.error()));
    }
    Ok(WorkAnswer::GitLog(GitLogAnswer {
        commits: parse(&finished.stdout),
    }))
}

/// Reads the commits of [`FORMAT`] output with `-z`: six NUL-separated fields per commit, each
/// commit NUL-terminated. A commit cut by the output bound is dropped.
fn parse(out: &[u8]) -> Vec<CommitSummary> {
    let mut fields: Vec<&[u8]> = out.split(|&b| b == 0).collect();
    // The last piece is empty after complete output, or a commit cut short.
    fields.pop();
    let text = |f: &[u8]| bounded(String::from_utf8_lossy(f).into_owned(), MAX_GIT_TEXT_BYTES);
    fields
        .chunks_exact(FIELDS)
        .map(|c| CommitSummary {
            commit: text(c[0]),
            parents: String::from_utf8_lossy(c[1])
                .split(' ')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect(),
            author_name: text(c[2]),
            author_email: text(c[3]),
            authored_at: text(c[4]),
            subject: text(c[5]),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_read_field_by_field_and_a_cut_one_is_dropped() {
        let out = b"c2\0c1 c0\0Ann O'Neil\0ann@example.com\x002025-03-01T12:00:00+01:00\0merge: a \"b\"\0\
                    c0\0\0Bob\0bob@example.com\x002025-02-01T00:00:00Z\0init\0";
        let commits = parse(out);
        assert_eq!(commits.len(), 2);
        assert_eq!(commits[0].commit, "c2");
        assert_eq!(commits[0].parents, ["c1", "c0"]);
        assert_eq!(commits[0].author_name, "Ann O'Neil");
        assert_eq!(commits[0].subject, "merge: a \"b\"");
        assert_eq!(commits[1].parents, Vec::<String>::new());
        assert_eq!(commits[1].authored_at, "2025-02-01T00:00:00Z");
        assert_eq!(parse(&out[..out.len() - 3]).len(), 1);
        let long = format!("c\0\0n\0e\0d\0{}\0", "s".repeat(MAX_GIT_TEXT_BYTES + 10));
        assert_eq!(parse(long.as_bytes())[0].subject.len(), MAX_GIT_TEXT_BYTES);
    }
}
