//! Projects callers open on this host ([`WorkspaceOp`]): a source checkout as itself, or an
//! isolated detached worktree of it that the runner makes in its worktree store.
//!
//! Invariants:
//!
//! - the runner alone decides what a path means: nothing opens unless its canonical path lies
//!   beneath a directory the operator listed (`[workspaces] open`, empty by default), and a
//!   worktree goes only where the runner chooses, `<store>/<project id>`;
//! - a revision is resolved to its exact commit by Git in the source, run as a job in the
//!   source's boundary (hooks off: making a worktree runs no program a repository names);
//! - an opened project is served like a configured one (the same [`Project`] registration,
//!   the same boundary) and recorded in the store's manifest, written by rename and hidden
//!   from every job, so a restarted runner serves it again while the policy still allows it;
//! - a worktree is removed only when it holds no uncommitted file and no commit that a
//!   branch, tag or remote ref keeps, unless the caller says `force`; what a removal threw
//!   away is answered.
//!
//! What may be opened, and the manifest of what was, is [`crate::opened`].

use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use wc_runner_protocol::{
    MAX_OUTPUT_BYTES_PER_STREAM, MAX_UNSAVED_LISTED, ObserveProjectOp, OpErrorKind, OpenAs,
    OpenProjectOp, OpenedProject, RemoveWorktreeOp, RemovedWorktree, Termination, UnsavedWork,
    WorkAnswer, WorkItem, WorkOutcome, WorkSpec, WorkspaceOp,
};

use crate::answer::{self, Ended, Refusal};
use crate::boundary::Project;
use crate::exec::{self, Host, StopPolicy};
use crate::git::job::{GitError, GitJobs};
use crate::git::status;
use crate::opened::{Entry, Workspaces};

/// Answers one workspace work item. Never fails: a refusal is [`Termination::Rejected`] with
/// an [`OpErrorKind`].
pub async fn execute(
    item: &WorkItem,
    host: &Host,
    cancel: watch::Receiver<bool>,
    policy: &StopPolicy,
) -> WorkOutcome {
    answer::traced("workspace", item, run(item, host, cancel, policy)).await
}

/// Where the Git commands of one workspace operation run.
struct Ctx<'a> {
    item: &'a WorkItem,
    policy: &'a StopPolicy,
    cancel: watch::Receiver<bool>,
    deadline: Instant,
}

impl<'a> Ctx<'a> {
    /// Git commands run as jobs of the project `item.project` of `host`.
    fn jobs(&'a self, host: &'a Host, hidden: &'a [PathBuf]) -> GitJobs<'a> {
        GitJobs {
            item: self.item,
            host,
            policy: self.policy,
            cancel: self.cancel.clone(),
            deadline: self.deadline,
            hidden,
        }
    }
}

async fn run(
    item: &WorkItem,
    host: &Host,
    cancel: watch::Receiver<bool>,
    policy: &StopPolicy,
) -> WorkOutcome {
    let started = Instant::now();
    let picked = answer::op_of(item, "workspace", |spec| match spec {
        WorkSpec::Workspace(op) => Some(op),
        _ => None,
    });
    let op = match picked {
        Ok(op) => op,
        Err(refusal) => return answer::rejected(started, refusal),
    };
    let Some(workspaces) = host.workspaces() else {
        let refusal = Refusal::new(
            OpErrorKind::PathNotAllowed,
            "this runner lets no caller open a path: its operator lists the directories callers may open in `[workspaces] open`",
        );
        return answer::rejected(started, refusal);
    };
    if *cancel.borrow() {
        return exec::not_started(started, Termination::Cancelled, None);
    }
    let ctx = Ctx {
        item,
        policy,
        cancel,
        deadline: started + Duration::from_millis(item.limits.timeout_ms),
    };
    let ended = match op {
        WorkspaceOp::OpenProject(op) => open(&ctx, host, workspaces, op).await,
        WorkspaceOp::ObserveProject(op) => observe(&ctx, host, workspaces, op).await,
        WorkspaceOp::RemoveWorktree(op) => remove(&ctx, host, workspaces, op).await,
    };
    answer::outcome(started, ended)
}

/// The commit `rev` names in the repository the jobs run in.
async fn commit_of(jobs: &GitJobs<'_>, rev: &str) -> Result<String, Ended> {
    let spec = format!("{rev}^{{commit}}");
    let out = jobs
        .run(crate::git::job::Command::new(
            &["rev-parse", "--verify", "--quiet", &spec],
            4096,
        ))
        .await?;
    if !out.succeeded() {
        return Err(Refusal::new(
            OpErrorKind::RevisionNotFound,
            format!("`{rev}` names no commit in the repository"),
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The commit HEAD is at, if any.
async fn head(jobs: &GitJobs<'_>) -> Result<Option<String>, Ended> {
    match commit_of(jobs, "HEAD").await {
        Ok(commit) => Ok(Some(commit)),
        Err(Ended::Refused(_)) => Ok(None),
        Err(other) => Err(other),
    }
}

fn not_a_repository(path: &Path) -> Ended {
    Refusal::new(
        OpErrorKind::NotARepository,
        format!(
            "{} is not inside a Git work tree: a worktree is made from a Git checkout (open it without mode=worktree to work on it as it is)",
            path.display()
        ),
    )
    .into()
}

async fn open(
    ctx: &Ctx<'_>,
    host: &Host,
    workspaces: &Workspaces,
    op: &OpenProjectOp,
) -> Result<WorkAnswer, Ended> {
    let given = Path::new(&op.path);
    let source = match std::fs::canonicalize(given) {
        Ok(path) if path.is_dir() => path,
        Ok(_) => {
            return Err(Refusal::new(
                OpErrorKind::NotADirectory,
                format!("{} is not a directory", given.display()),
            )
            .into());
        }
        Err(_) => {
            return Err(Refusal::new(
                OpErrorKind::NotFound,
                format!("{} does not exist on the runner's host", given.display()),
            )
            .into());
        }
    };
    if !workspaces.allows(&source) {
        let listed: Vec<String> = workspaces
            .open()
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        return Err(Refusal::new(
            OpErrorKind::PathNotAllowed,
            format!(
                "{} is outside the directories this runner lets callers open ({})",
                source.display(),
                if listed.is_empty() {
                    "none: its operator lists them in `[workspaces] open`".to_owned()
                } else {
                    listed.join(", ")
                }
            ),
        )
        .into());
    }
    let id = ctx.item.project.as_str();
    if host.project(id).is_some() {
        return Err(Refusal::new(
            OpErrorKind::AlreadyExists,
            format!("a project is already served as {id}"),
        )
        .into());
    }
    let registered = |e: std::io::Error| {
        Ended::from(Refusal::new(
            OpErrorKind::ProjectUnavailable,
            format!("cannot register {}: {e}", source.display()),
        ))
    };
    match op.open_as {
        OpenAs::Checkout => {
            // The same checkout is one project, however often it is opened.
            let served = host.served_at(&source);
            let project = match served.as_deref().and_then(|s| host.project(s)) {
                Some(project) => project,
                None => allowed_metadata(
                    workspaces,
                    Project::register(&source, Vec::new()).map_err(registered)?,
                )?,
            };
            let scratch = host.with_project(id, project.clone());
            let head = head(&ctx.jobs(&scratch, &[])).await?;
            if served.is_none() {
                let entry = Entry {
                    project: id.to_owned(),
                    root: source.clone(),
                    source: source.clone(),
                    open_as: OpenAs::Checkout,
                    base_commit: None,
                    dir: None,
                    admin: None,
                    git_dirs: project.git_dirs().to_vec(),
                };
                save(workspaces, entry)?;
                host.add(id.to_owned(), project);
            }
            Ok(WorkAnswer::OpenProject(OpenedProject {
                created: served.is_none(),
                project: served.unwrap_or_else(|| id.to_owned()),
                root: source.display().to_string(),
                source: source.display().to_string(),
                open_as: OpenAs::Checkout,
                base_commit: None,
                head,
                base_ref_commit: None,
            }))
        }
        OpenAs::Worktree => worktree(ctx, host, workspaces, op, source).await,
    }
}

/// `project` when the Git metadata it registers outside its root lies where a caller may open
/// too: a `.git` file anyone could have written in the checkout never widens what its jobs may
/// write beyond the operator's policy.
fn allowed_metadata(workspaces: &Workspaces, project: Project) -> Result<Project, Ended> {
    match project.git_dirs().iter().find(|d| !workspaces.allows(d)) {
        None => Ok(project),
        Some(dir) => Err(Refusal::new(
            OpErrorKind::PathNotAllowed,
            format!(
                "{}'s .git leads to {}, outside the directories this runner lets callers open",
                project.root().display(),
                dir.display()
            ),
        )
        .into()),
    }
}

fn save(workspaces: &Workspaces, entry: Entry) -> Result<(), Ended> {
    workspaces
        .update(|entries| {
            entries.retain(|e| e.project != entry.project);
            entries.push(entry);
        })
        .map_err(|e| {
            Refusal::new(
                OpErrorKind::Unwritable,
                format!("cannot record the opened project in the runner's manifest: {e}"),
            )
            .into()
        })
}

async fn worktree(
    ctx: &Ctx<'_>,
    host: &Host,
    workspaces: &Workspaces,
    op: &OpenProjectOp,
    source: PathBuf,
) -> Result<WorkAnswer, Ended> {
    let id = ctx.item.project.as_str();
    let registered = |e: std::io::Error| {
        Ended::from(Refusal::new(
            OpErrorKind::ProjectUnavailable,
            format!("cannot register {}: {e}", source.display()),
        ))
    };
    let checkout = allowed_metadata(
        workspaces,
        Project::register(&source, Vec::new()).map_err(registered)?,
    )?;
    let reading = host.with_project(id, checkout.clone());
    let jobs = ctx.jobs(&reading, &[]);
    let prefix = match jobs.prefix().await {
        Ok(prefix) => prefix,
        Err(GitError::NotARepository) => return Err(not_a_repository(&source)),
        Err(e) => return Err(e.into()),
    };
    let base_commit = commit_of(&jobs, op.base_ref.as_deref().unwrap_or("HEAD"))
        .await
        .map_err(|e| match (e, &op.base_ref) {
            (Ended::Refused(_), None) => Refusal::new(
                OpErrorKind::RevisionNotFound,
                format!(
                    "{} has no commit yet to make a worktree at",
                    source.display()
                ),
            )
            .into(),
            (e, _) => e,
        })?;
    let dir = workspaces.store().join(id);
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&dir)
        .map_err(|e| {
            Refusal::new(
                OpErrorKind::Unwritable,
                format!("cannot make the worktree's directory in the store: {e}"),
            )
        })?;
    // Git writes the new worktree and its administrative files in the source repository.
    let _one_at_a_time = workspaces.making().await;
    let making = host.with_project(id, checkout.with_writable(vec![dir.clone()]));
    let jobs = ctx.jobs(&making, &[]);
    let dir_arg = dir.display().to_string();
    let added = jobs
        .output(
            &[
                "-c",
                "core.hooksPath=/dev/null",
                "worktree",
                "add",
                "--detach",
                &dir_arg,
                &base_commit,
            ],
            64 * 1024,
        )
        .await;
    let made = match added {
        Ok(_) => admin_dir(&dir).ok_or_else(|| {
            Ended::from(Refusal::new(
                OpErrorKind::GitUnavailable,
                format!(
                    "git made no worktree record that names {} back",
                    dir.display()
                ),
            ))
        }),
        Err(GitError::Unavailable(why)) => Err(Refusal::new(
            OpErrorKind::GitUnavailable,
            format!(
                "git could not make the worktree at {}: {why}",
                dir.display()
            ),
        )
        .into()),
        Err(e) => Err(e.into()),
    };
    let admin = match made {
        Ok(admin) => admin,
        Err(ended) => {
            // Nothing half-made stays behind: the directory, and Git's record of it.
            let _ = std::fs::remove_dir_all(&dir);
            let _ = jobs.output(&["worktree", "prune"], 4096).await;
            return Err(ended);
        }
    };
    let root = dir.join(&prefix);
    let project = Project::register(&root, Vec::new()).map_err(registered)?;
    save(
        workspaces,
        Entry {
            project: id.to_owned(),
            root: project.root().to_owned(),
            source: source.clone(),
            open_as: OpenAs::Worktree,
            base_commit: Some(base_commit.clone()),
            dir: Some(dir),
            admin: Some(admin),
            git_dirs: project.git_dirs().to_vec(),
        },
    )?;
    let root = project.root().display().to_string();
    host.add(id.to_owned(), project);
    Ok(WorkAnswer::OpenProject(OpenedProject {
        project: id.to_owned(),
        root,
        source: source.display().to_string(),
        open_as: OpenAs::Worktree,
        head: Some(base_commit.clone()),
        base_commit: Some(base_commit),
        base_ref_commit: None,
        created: true,
    }))
}

/// The administrative directory Git made for the worktree at `dir`, read from its `.git`
/// file, when it names one that names `dir` back.
fn admin_dir(dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dir.join(".git")).ok()?;
    let named = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let admin = std::fs::canonicalize(dir.join(named)).ok()?;
    let back = std::fs::read_to_string(admin.join("gitdir")).ok()?;
    let back = std::fs::canonicalize(back.trim()).ok()?;
    (back == dir.join(".git")).then_some(admin)
}

async fn observe(
    ctx: &Ctx<'_>,
    host: &Host,
    workspaces: &Workspaces,
    op: &ObserveProjectOp,
) -> Result<WorkAnswer, Ended> {
    let id = ctx.item.project.as_str();
    let Some(project) = host.project(id) else {
        return Err(Refusal::new(
            OpErrorKind::ProjectUnavailable,
            format!("this runner no longer serves {id}: its root is gone, or the workspace policy no longer allows it"),
        )
        .into());
    };
    crate::confine::check_root(project.root())
        .map_err(|e| Refusal::new(OpErrorKind::ProjectUnavailable, e.to_string()))?;
    let jobs = ctx.jobs(host, &[]);
    let head = head(&jobs).await?;
    let base_ref_commit = match &op.base_ref {
        Some(rev) => Some(commit_of(&jobs, rev).await?),
        None => None,
    };
    let entry = workspaces.entry(id);
    Ok(WorkAnswer::ObserveProject(OpenedProject {
        project: id.to_owned(),
        root: project.root().display().to_string(),
        source: entry
            .as_ref()
            .map_or(project.root(), |e| &e.source)
            .display()
            .to_string(),
        open_as: entry.as_ref().map_or(OpenAs::Checkout, |e| e.open_as),
        base_commit: entry.and_then(|e| e.base_commit),
        head,
        base_ref_commit,
        created: false,
    }))
}

/// What the worktree holds that no commit or ref keeps.
async fn unsaved(jobs: &GitJobs<'_>) -> Result<UnsavedWork, Ended> {
    let (prefix, state) = tokio::join!(
        jobs.prefix(),
        status::query(jobs, MAX_OUTPUT_BYTES_PER_STREAM)
    );
    let (prefix, state) = (prefix?, state?);
    let parsed = state.parse();
    let mut work = UnsavedWork {
        uncommitted_count: parsed.records.len() as u64,
        ..UnsavedWork::default()
    };
    work.uncommitted = parsed
        .records
        .iter()
        .filter_map(|r| status::project_path(&prefix, r.path))
        .take(MAX_UNSAVED_LISTED)
        .collect();
    let kept = ["--not", "--branches", "--tags", "--remotes"];
    let listed = format!("--max-count={MAX_UNSAVED_LISTED}");
    let mut list = vec!["rev-list", listed.as_str(), "HEAD"];
    list.extend(kept);
    let mut count = vec!["rev-list", "--count", "HEAD"];
    count.extend(kept);
    let (list, count) = tokio::join!(jobs.output(&list, 64 * 1024), jobs.output(&count, 64));
    let (list, count) = (list?, count?);
    work.unsaved_commits = String::from_utf8_lossy(&list.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    work.unsaved_commit_count = String::from_utf8_lossy(&count.stdout)
        .trim()
        .parse()
        .unwrap_or(work.unsaved_commits.len() as u64);
    Ok(work)
}

async fn remove(
    ctx: &Ctx<'_>,
    host: &Host,
    workspaces: &Workspaces,
    op: &RemoveWorktreeOp,
) -> Result<WorkAnswer, Ended> {
    let id = ctx.item.project.as_str();
    let entry = workspaces.entry(id);
    let (Some(entry), Some(project)) = (entry, host.project(id)) else {
        return Err(Refusal::new(
            OpErrorKind::ProjectUnavailable,
            format!("this runner serves no managed worktree {id}"),
        )
        .into());
    };
    let (OpenAs::Worktree, Some(dir), Some(admin)) = (entry.open_as, &entry.dir, &entry.admin)
    else {
        return Err(Refusal::new(
            OpErrorKind::InvalidRequest,
            format!(
                "{id} is a checkout opened as itself, not a managed worktree: it is never removed"
            ),
        )
        .into());
    };
    let boundary = host
        .boundary(id)
        .map_err(|e| Refusal::new(OpErrorKind::ProjectUnavailable, e.to_string()))?;
    let jobs = ctx.jobs(host, boundary.hidden_in_root());
    let unsaved = unsaved(&jobs).await?;
    let root = project.root().display().to_string();
    if !op.force && !unsaved.is_empty() {
        return Ok(WorkAnswer::RemoveWorktree(RemovedWorktree {
            project: id.to_owned(),
            root,
            removed: false,
            unsaved,
        }));
    }
    // Stop serving it first: no new work starts in a directory about to go.
    host.remove(id);
    if let Err(e) = workspaces.update(|entries| entries.retain(|e| e.project != id)) {
        host.add(id.to_owned(), project);
        return Err(Refusal::new(
            OpErrorKind::Unwritable,
            format!("cannot update the runner's manifest: {e}"),
        )
        .into());
    }
    let (dir, admin) = (dir.clone(), admin.clone());
    let removed = tokio::task::spawn_blocking(move || {
        // `remove_dir_all` never follows a symlink out of the tree it removes.
        std::fs::remove_dir_all(&dir)?;
        if admin.parent().and_then(Path::file_name) == Some("worktrees".as_ref()) {
            std::fs::remove_dir_all(&admin)?;
        }
        Ok::<_, std::io::Error>(())
    })
    .await
    .map_err(|e| Ended::Failed(e.to_string()))?;
    removed.map_err(|e| {
        Refusal::new(
            OpErrorKind::Unwritable,
            format!("the worktree is no longer served, but not all of it could be removed: {e}"),
        )
    })?;
    Ok(WorkAnswer::RemoveWorktree(RemovedWorktree {
        project: id.to_owned(),
        root,
        removed: true,
        unsaved,
    }))
}
