//! Checkpoints: the working tree's state (tracked files and the untracked files Git does not
//! ignore) written as a commit under `refs/worktree/wc/checkpoints/<id>`, a ref private to the
//! Git work tree, so HEAD, the index and every branch stay as they are.
//!
//! The state is built in a temporary index beside the project's files (named like an edit's
//! leftover, so it is never staged): a copy of the project's index where it agrees with HEAD
//! (unchanged files are not read again), then `git add --all` of the project's files. A
//! checkpoint's commit message carries its kind, state, project prefix and session as
//! trailers; the project at another prefix of the same work tree does not see it. A restore
//! runs `git checkout --no-overlay` of the checkpoint into that temporary index: files of the
//! checkpoint are written, files it lacks are removed, ignored and hidden files are left alone.

use std::path::Path;

use wc_runner_protocol::{
    ChangeKind, Checkpoint, CheckpointKind, CreateCheckpointAnswer, CreateCheckpointOp,
    DeleteCheckpointsAnswer, DeleteCheckpointsOp, DiffCheckpointOp, ListCheckpointsAnswer,
    ListCheckpointsOp, MAX_CHECKPOINTS, MAX_CONFLICT_PATHS, MAX_DIFF_FILES,
    MAX_OUTPUT_BYTES_PER_STREAM, OpErrorKind, RelativePath, RestoreCheckpointAnswer,
    RestoreCheckpointOp, RestoredFile, WorkAnswer,
};

use super::Ctx;
use super::job::{Command, GitError, GitJobs};
use crate::answer::{Ended, Refusal};
use crate::beneath::{Root, TEMP_PREFIX};

/// Where checkpoints live: per work tree (`refs/worktree/`), beside no branch or tag.
const REFS: &str = "refs/worktree/wc/checkpoints/";

/// One checkpoint per record, NUL-separated fields (no field holds a NUL).
const FORMAT: &str = "--format=%(refname:lstrip=4)%00%(objectname)%00%(parent)%00%(creatordate:iso-strict)%00%(contents)%00";

/// Output kept of the small commands (ids, a ref update).
const SMALL: u64 = 64 * 1024;

/// The trailers of a checkpoint's commit message.
const KIND: &str = "Wc-Checkpoint: ";
const STATE: &str = "Wc-State: ";
const PREFIX: &str = "Wc-Prefix: /";
const SESSION: &str = "Wc-Session: ";
/// When it was taken, in milliseconds since the epoch: Git's dates count seconds, and
/// checkpoints of one second are still listed newest first.
const TAKEN: &str = "Wc-Taken-Ms: ";

pub(super) async fn create(ctx: &Ctx<'_>, op: &CreateCheckpointOp) -> Result<WorkAnswer, Ended> {
    let jobs = ctx.jobs();
    let (at, all) = tokio::join!(Place::find(&jobs), load(&jobs));
    let (at, all) = (at?, all?);
    if op.once_per_session {
        let existing = all.iter().find(|e| {
            e.prefix == at.prefix
                && e.checkpoint.kind == op.checkpoint_kind
                && e.checkpoint.session_id == op.session_id
        });
        if let Some(existing) = existing {
            return Ok(WorkAnswer::GitCreateCheckpoint(CreateCheckpointAnswer {
                checkpoint: existing.checkpoint.clone(),
                created: false,
                pruned: Vec::new(),
            }));
        }
    }
    let index = TempIndex::new(ctx);
    let snapshot = snapshot(&jobs, &index, &at).await?;
    let pruned = make_room(&jobs, &all).await?;
    let checkpoint = keep(
        ctx,
        &jobs,
        &at,
        &snapshot,
        op.checkpoint_kind,
        &op.label,
        &op.session_id,
    )
    .await?;
    Ok(WorkAnswer::GitCreateCheckpoint(CreateCheckpointAnswer {
        checkpoint,
        created: true,
        pruned,
    }))
}

pub(super) async fn list(ctx: &Ctx<'_>, op: &ListCheckpointsOp) -> Result<WorkAnswer, Ended> {
    let jobs = ctx.jobs();
    let (at, all) = tokio::join!(Place::find(&jobs), load(&jobs));
    let (at, all) = (at?, all?);
    let index = TempIndex::new(ctx);
    let now = snapshot(&jobs, &index, &at).await?;
    let mine: Vec<Checkpoint> = all
        .into_iter()
        .filter(|e| e.prefix == at.prefix)
        .map(|e| e.checkpoint)
        .collect();
    let limit = op.limit as usize;
    Ok(WorkAnswer::GitListCheckpoints(ListCheckpointsAnswer {
        truncated: mine.len() > limit,
        checkpoints: mine.into_iter().take(limit).collect(),
        current_state: now.state,
    }))
}

pub(super) async fn diff(ctx: &Ctx<'_>, op: &DiffCheckpointOp) -> Result<WorkAnswer, Ended> {
    ctx.check_beneath(&op.paths)?;
    let jobs = ctx.jobs();
    let (at, all) = tokio::join!(Place::find(&jobs), load(&jobs));
    let (at, all) = (at?, all?);
    let from = named(&all, &at, &op.checkpoint)?;
    let index = TempIndex::new(ctx);
    let now = snapshot(&jobs, &index, &at).await?;
    let compared = [from.commit.as_str(), now.tree.as_str()];
    let answer =
        super::diff::changes(ctx, &compared, &op.paths, op.context_lines, op.limit_bytes).await?;
    Ok(WorkAnswer::GitDiffCheckpoint(answer))
}

pub(super) async fn restore(ctx: &Ctx<'_>, op: &RestoreCheckpointOp) -> Result<WorkAnswer, Ended> {
    let jobs = ctx.jobs();
    let (at, all) = tokio::join!(Place::find(&jobs), load(&jobs));
    let (at, all) = (at?, all?);
    let target = named(&all, &at, &op.checkpoint)?.clone();
    let index = TempIndex::new(ctx);
    let now = snapshot(&jobs, &index, &at).await?;
    if now.state != op.expected_state {
        return Err(changed_since(&jobs, &op.expected_state, &now.state)
            .await?
            .into());
    }
    let restored = target.checkpoint.clone();
    if now.state == target.checkpoint.state {
        return Ok(WorkAnswer::GitRestoreCheckpoint(RestoreCheckpointAnswer {
            restored,
            replaced: None,
            files: Vec::new(),
            files_truncated: false,
            pruned: Vec::new(),
        }));
    }
    let (files, files_truncated) = changes(&jobs, &now.state, &target.checkpoint.state).await?;
    let pruned = make_room(&jobs, &all).await?;
    let label = format!("before restoring {}", op.checkpoint);
    let kind = CheckpointKind::BeforeRestore;
    let replaced = keep(ctx, &jobs, &at, &now, kind, &label, &op.session_id).await?;
    let mut checkout = vec!["checkout", "--no-overlay", "-q", target.commit.as_str()];
    let scope = jobs.stageable(&[""]);
    checkout.extend(scope.iter().map(String::as_str));
    let done = jobs.run(index.command(&checkout)).await?;
    if !done.succeeded() {
        return Err(Refusal::new(
            OpErrorKind::Unwritable,
            format!(
                "the checkpoint could not be written back (the state it replaced is kept as {}): {}",
                replaced.id,
                done.said()
            ),
        )
        .into());
    }
    Ok(WorkAnswer::GitRestoreCheckpoint(RestoreCheckpointAnswer {
        restored,
        replaced: Some(replaced),
        files,
        files_truncated,
        pruned,
    }))
}

pub(super) async fn delete(ctx: &Ctx<'_>, op: &DeleteCheckpointsOp) -> Result<WorkAnswer, Ended> {
    let jobs = ctx.jobs();
    let (at, all) = tokio::join!(Place::find(&jobs), load(&jobs));
    let (at, all) = (at?, all?);
    let mut doomed = Vec::with_capacity(op.checkpoints.len());
    for id in &op.checkpoints {
        doomed.push(named(&all, &at, id)?);
    }
    remove(&jobs, &doomed).await?;
    Ok(WorkAnswer::GitDeleteCheckpoints(DeleteCheckpointsAnswer {
        deleted: op.checkpoints.clone(),
    }))
}

/// Where the project is in its repository: its prefix, and the commit HEAD names.
struct Place {
    prefix: String,
    head: Option<String>,
}

impl Place {
    async fn find(jobs: &GitJobs<'_>) -> Result<Place, GitError> {
        let verify = ["rev-parse", "-q", "--verify", "HEAD^{commit}"];
        let (prefix, head) = tokio::join!(jobs.prefix(), jobs.run(Command::new(&verify, SMALL)));
        let (prefix, head) = (prefix?, head?);
        let head = head
            .succeeded()
            .then(|| String::from_utf8_lossy(&head.stdout).trim().to_owned());
        Ok(Place { prefix, head })
    }
}

/// A checkpoint as found under [`REFS`]: its commit, the project prefix it was taken at, and
/// when.
#[derive(Debug, Clone)]
struct Entry {
    checkpoint: Checkpoint,
    commit: String,
    prefix: String,
    taken_ms: u64,
}

/// Every checkpoint of the work tree, newest first; refs that are not checkpoints (no kind or
/// state trailer) are left out.
async fn load(jobs: &GitJobs<'_>) -> Result<Vec<Entry>, GitError> {
    let args = [
        "for-each-ref",
        "--sort=-creatordate",
        FORMAT,
        REFS.trim_end_matches('/'),
    ];
    let out = jobs.output(&args, MAX_OUTPUT_BYTES_PER_STREAM).await?;
    Ok(parse(&String::from_utf8_lossy(&out.stdout)))
}

fn parse(out: &str) -> Vec<Entry> {
    let fields: Vec<&str> = out.split('\0').collect();
    let mut entries: Vec<Entry> = fields
        .chunks_exact(5)
        .filter_map(|f| {
            let id = f[0].trim_start_matches('\n');
            let message = f[4];
            let (label, trailers) = message.split_once('\n').unwrap_or((message, ""));
            let trailer = |key: &str| {
                trailers
                    .lines()
                    .find_map(|l| l.strip_prefix(key))
                    .map(str::to_owned)
            };
            let kind = CheckpointKind::parse(&trailer(KIND)?)?;
            let checkpoint = Checkpoint {
                id: id.to_owned(),
                label: label.to_owned(),
                kind,
                state: trailer(STATE)?,
                head: Some(f[2].to_owned()).filter(|p| !p.is_empty()),
                created_at: f[3].to_owned(),
                session_id: trailer(SESSION),
            };
            Some(Entry {
                checkpoint,
                commit: f[1].to_owned(),
                prefix: trailer(PREFIX)?,
                taken_ms: trailer(TAKEN).and_then(|t| t.parse().ok()).unwrap_or(0),
            })
        })
        .collect();
    // Git listed them newest second first; the milliseconds order each second's.
    entries.sort_by_key(|e| std::cmp::Reverse(e.taken_ms));
    entries
}

/// The checkpoint `id` of the project at `at`, or a refusal naming it.
fn named<'e>(all: &'e [Entry], at: &Place, id: &str) -> Result<&'e Entry, Refusal> {
    all.iter()
        .find(|e| e.checkpoint.id == id && e.prefix == at.prefix)
        .ok_or_else(|| {
            Refusal::new(
                OpErrorKind::CheckpointNotFound,
                format!(
                    "no checkpoint `{id}` in this project's work tree (list_checkpoints lists them)"
                ),
            )
        })
}

/// The working tree's state written as trees: the whole index's and the project's part.
struct Snapshot {
    tree: String,
    state: String,
}

/// A temporary index file in the project root, removed when dropped.
struct TempIndex<'a> {
    root: &'a Root,
    name: String,
    path: String,
}

impl<'a> TempIndex<'a> {
    fn new(ctx: &'a Ctx<'_>) -> Self {
        let name = format!("{TEMP_PREFIX}{}.tmp", ctx.item.work_id.simple());
        let path = Path::new(ctx.root.path()).join(&name);
        TempIndex {
            root: &ctx.root,
            name,
            path: path.to_string_lossy().into_owned(),
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![("GIT_INDEX_FILE", self.path.clone())]
    }

    /// `git <args>` on this index.
    fn command<'c>(&self, args: &[&'c str]) -> Command<'c> {
        Command {
            env: self.env(),
            ..Command::new(args, SMALL)
        }
    }
}

impl Drop for TempIndex<'_> {
    fn drop(&mut self) {
        if let Ok(dir) = self.root.open_dir("") {
            for name in [self.name.clone(), format!("{}.lock", self.name)] {
                if let Err(e) = dir.remove(&name)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    tracing::warn!(file = %name, error = %e, "a checkpoint's temporary index is left behind");
                }
            }
        }
    }
}

/// The working tree's state now, written into `index`.
async fn snapshot(
    jobs: &GitJobs<'_>,
    index: &TempIndex<'_>,
    at: &Place,
) -> Result<Snapshot, Ended> {
    // The project's index where it agrees with HEAD keeps its file stat data, so files that
    // did not change are not read again; an index with conflicts (or no HEAD) starts empty.
    let copied = match &at.head {
        Some(head) => {
            let output = format!("--index-output={}", index.path);
            jobs.run(Command::new(&["read-tree", &output, "-m", head], SMALL))
                .await?
                .succeeded()
        }
        None => false,
    };
    if !copied {
        let start = match &at.head {
            Some(head) => vec!["read-tree", head.as_str()],
            None => vec!["read-tree", "--empty"],
        };
        ok(jobs.run(index.command(&start)).await?)?;
    }
    let mut add = vec!["add", "--all"];
    let scope = jobs.stageable(&[""]);
    add.extend(scope.iter().map(String::as_str));
    let added = jobs.run(index.command(&add)).await?;
    if !added.succeeded() {
        let said = added.said();
        if said.contains("Read-only file system") {
            return Err(super::read_only(&said).into());
        }
        return Err(GitError::Unavailable(format!(
            "the working tree could not be read into a checkpoint: {}",
            added.said()
        ))
        .into());
    }
    let tree = line(ok(jobs.run(index.command(&["write-tree"])).await?)?);
    let state = if at.prefix.is_empty() {
        tree.clone()
    } else {
        let part = format!("{tree}:{}", at.prefix.trim_end_matches('/'));
        let found = jobs
            .run(Command::new(&["rev-parse", "-q", "--verify", &part], SMALL))
            .await?;
        if found.succeeded() {
            line(found)
        } else {
            // The project holds no file Git would keep: the empty tree.
            let empty = Command {
                stdin: Some(String::new()),
                ..Command::new(&["hash-object", "-t", "tree", "--stdin"], SMALL)
            };
            line(ok(jobs.run(empty).await?)?)
        }
    };
    Ok(Snapshot { tree, state })
}

/// `snapshot` kept as a checkpoint of `kind`: a commit of its tree on HEAD, under a new ref.
async fn keep(
    ctx: &Ctx<'_>,
    jobs: &GitJobs<'_>,
    at: &Place,
    snapshot: &Snapshot,
    kind: CheckpointKind,
    label: &str,
    session: &Option<String>,
) -> Result<Checkpoint, Ended> {
    // Git reads a message's first non-empty line as its subject.
    let label = if label.trim().is_empty() {
        "checkpoint"
    } else {
        label
    };
    // Its dates are set here, so the answer says them without asking Git again.
    let now = chrono::Utc::now();
    let taken_ms = now.timestamp_millis();
    let date = format!("@{} +0000", now.timestamp());
    let mut message = format!(
        "{label}\n\n{KIND}{}\n{STATE}{}\n{PREFIX}{}\n{TAKEN}{taken_ms}\n",
        kind.as_str(),
        snapshot.state,
        at.prefix
    );
    if let Some(session) = session {
        message.push_str(&format!("{SESSION}{session}\n"));
    }
    let mut args = vec!["commit-tree", snapshot.tree.as_str()];
    if let Some(head) = &at.head {
        args.extend(["-p", head.as_str()]);
    }
    let identity = ctx.identity;
    let commit = Command {
        stdin: Some(message),
        env: vec![
            ("GIT_AUTHOR_NAME", identity.name().to_owned()),
            ("GIT_AUTHOR_EMAIL", identity.email().to_owned()),
            ("GIT_AUTHOR_DATE", date.clone()),
            ("GIT_COMMITTER_NAME", identity.name().to_owned()),
            ("GIT_COMMITTER_EMAIL", identity.email().to_owned()),
            ("GIT_COMMITTER_DATE", date),
        ],
        ..Command::new(&args, SMALL)
    };
    let commit = line(ok(jobs.run(commit).await?)?);
    let hex = ctx.item.work_id.simple().to_string();
    let id = format!("ck-{}", &hex[hex.len() - 12..]);
    let update = Command {
        stdin: Some(format!("create {REFS}{id} {commit}\n")),
        ..Command::new(&["update-ref", "--stdin"], SMALL)
    };
    ok(jobs.run(update).await?)?;
    Ok(Checkpoint {
        id,
        label: label.to_owned(),
        kind,
        state: snapshot.state.clone(),
        head: at.head.clone(),
        created_at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        session_id: session.clone(),
    })
}

/// Removes the oldest checkpoints the runner may prune until one more fits the bound;
/// refuses when only named ones are left to remove.
async fn make_room(jobs: &GitJobs<'_>, all: &[Entry]) -> Result<Vec<String>, Ended> {
    if all.len() < MAX_CHECKPOINTS {
        return Ok(Vec::new());
    }
    let excess = all.len() + 1 - MAX_CHECKPOINTS;
    let oldest: Vec<&Entry> = all
        .iter()
        .rev()
        .filter(|e| e.checkpoint.kind.prunable())
        .take(excess)
        .collect();
    if oldest.len() < excess {
        return Err(Refusal::new(
            OpErrorKind::LimitReached,
            format!(
                "this work tree keeps {MAX_CHECKPOINTS} checkpoints, all named ones: delete_checkpoint some first"
            ),
        )
        .into());
    }
    remove(jobs, &oldest).await?;
    Ok(oldest.iter().map(|e| e.checkpoint.id.clone()).collect())
}

/// Deletes the refs of `entries` in one transaction, each only while it still names its commit.
async fn remove(jobs: &GitJobs<'_>, entries: &[&Entry]) -> Result<(), Ended> {
    let mut script = String::from("start\n");
    for e in entries {
        script.push_str(&format!("delete {REFS}{} {}\n", e.checkpoint.id, e.commit));
    }
    script.push_str("commit\n");
    let update = Command {
        stdin: Some(script),
        ..Command::new(&["update-ref", "--stdin"], SMALL)
    };
    ok(jobs.run(update).await?)?;
    Ok(())
}

/// The files that differ between the states `from` and `to` (project trees), with what going
/// from one to the other does to each.
async fn changes(
    jobs: &GitJobs<'_>,
    from: &str,
    to: &str,
) -> Result<(Vec<RestoredFile>, bool), GitError> {
    let args = [
        "diff-tree",
        "-r",
        "--no-renames",
        "--name-status",
        "-z",
        from,
        to,
    ];
    let out = jobs.output(&args, MAX_OUTPUT_BYTES_PER_STREAM).await?;
    let tokens: Vec<&[u8]> = out.stdout.split(|&b| b == 0).collect();
    let mut files = Vec::new();
    let mut truncated = out.stdout_truncated;
    for pair in tokens.chunks_exact(2) {
        let change = match pair[0] {
            b"A" => ChangeKind::Added,
            b"D" => ChangeKind::Deleted,
            b"T" => ChangeKind::TypeChanged,
            _ => ChangeKind::Modified,
        };
        let Some(path) = super::status::project_path("", pair[1]) else {
            continue;
        };
        if files.len() == MAX_DIFF_FILES {
            truncated = true;
            break;
        }
        files.push(RestoredFile { path, change });
    }
    Ok((files, truncated))
}

/// The refusal of a restore over a state other than the expected one, naming what differs.
async fn changed_since(
    jobs: &GitJobs<'_>,
    expected: &str,
    current: &str,
) -> Result<Refusal, GitError> {
    let known = jobs
        .run(Command::new(
            &["cat-file", "-e", &format!("{expected}^{{tree}}")],
            SMALL,
        ))
        .await?
        .succeeded();
    let (changed, more) = if known {
        changes(jobs, expected, current).await?
    } else {
        (Vec::new(), false)
    };
    let count = changed.len();
    let paths: Vec<RelativePath> = changed
        .into_iter()
        .take(MAX_CONFLICT_PATHS)
        .map(|f| f.path)
        .collect();
    let what = if known {
        let listed: Vec<String> = paths.iter().take(5).map(|p| format!("`{p}`")).collect();
        let rest = if more || count > listed.len() {
            ", …"
        } else {
            ""
        };
        format!(
            "{count} file(s) changed since it: {}{rest}",
            listed.join(", ")
        )
    } else {
        "that state is unknown to this repository".to_owned()
    };
    let mut refusal = Refusal::new(
        OpErrorKind::StateChanged,
        format!(
            "the working tree is not in the expected state {expected} but in {current}; \
             {what}. Nothing was restored: look (list_checkpoints, diff_checkpoint), then pass \
             the current state"
        ),
    );
    refusal.conflict = Some(Box::new(wc_runner_protocol::EditConflict {
        current_state: Some(current.to_owned()),
        changed_paths: known.then_some(paths),
        ..Default::default()
    }));
    Ok(refusal)
}

/// A finished command that must have succeeded.
fn ok(finished: super::job::Finished) -> Result<super::job::Finished, GitError> {
    if finished.succeeded() {
        Ok(finished)
    } else {
        Err(finished.error())
    }
}

/// The first line of a command's output.
fn line(finished: super::job::Finished) -> String {
    String::from_utf8_lossy(&finished.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_refs_are_read_with_their_trailers_and_others_are_left_out() {
        let state = "a".repeat(40);
        let out = format!(
            "ck-1\0c1\0p1\02026-12-07T10:00:00+00:00\0before the refactor\n\n{KIND}manual\n{STATE}{state}\n{PREFIX}sub/\n{SESSION}ses_1\n{TAKEN}1765101600500\n\0\n\
             ck-2\0c2\0\02026-12-07T10:00:00+00:00\0x\n\n{KIND}automatic\n{STATE}{state}\n{PREFIX}\n{TAKEN}1765101600100\n\0\n\
             stray\0c3\0\02026-12-07T08:00:00+00:00\0someone else's ref\n\0\n"
        );
        let entries = parse(&out);
        assert_eq!(entries.len(), 2);
        // Git lists one second's checkpoints in any order; the milliseconds decide.
        let (one, two) = out.split_at(out.find("ck-2").unwrap());
        let swapped: Vec<String> = parse(&format!("{two}{one}"))
            .into_iter()
            .map(|e| e.checkpoint.id)
            .collect();
        assert_eq!(swapped, ["ck-1", "ck-2"]);
        let first = &entries[0];
        assert_eq!(first.checkpoint.id, "ck-1");
        assert_eq!(first.checkpoint.label, "before the refactor");
        assert_eq!(first.checkpoint.kind, CheckpointKind::Manual);
        assert_eq!(first.checkpoint.head.as_deref(), Some("p1"));
        assert_eq!(first.checkpoint.session_id.as_deref(), Some("ses_1"));
        assert_eq!(
            (first.commit.as_str(), first.prefix.as_str()),
            ("c1", "sub/")
        );
        let second = &entries[1];
        assert_eq!(second.checkpoint.kind, CheckpointKind::Automatic);
        assert_eq!(
            (second.checkpoint.head.clone(), second.prefix.as_str()),
            (None, "")
        );
        assert_eq!(second.checkpoint.session_id, None);
        let at = Place {
            prefix: String::new(),
            head: None,
        };
        assert!(named(&entries, &at, "ck-2").is_ok());
        // The checkpoint of the project at another prefix is not this project's.
        let refused = named(&entries, &at, "ck-1").unwrap_err();
        assert_eq!(refused.kind, OpErrorKind::CheckpointNotFound);
    }
}
