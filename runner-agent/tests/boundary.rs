//! The boundary of a project's work, tried as a caller holding one project's credential would:
//! a `.git` that points out of the project, a name swapped for a symlink between check and
//! bind, other projects of the same runner, hidden paths through every file tool and through
//! Git, a project under `/tmp`. Every case runs under the real bubblewrap sandbox.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use uuid::Uuid;
use wc_runner_agent::boundary::Project;
use wc_runner_agent::config::GitIdentity;
use wc_runner_agent::exec::{Host, OutputPiece, StopPolicy};
use wc_runner_agent::sandbox::{Sandbox, SandboxSettings};
use wc_runner_protocol::{
    OpErrorKind, PROTOCOL_VERSION, Stream, Termination, WorkItem, WorkLimits, WorkOutcome, WorkSpec,
};

const HANG: Duration = Duration::from_secs(60);

/// Projects on one host, in a temporary base directory (not under `/tmp`, where jobs get a
/// private tmp, unless a test asks for it).
struct Site {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    host: Host,
}

impl Site {
    /// A host serving `projects` (id, directory under the base), with `hide` hidden.
    fn new(projects: &[(&str, &str)], hide: &[&str]) -> Site {
        Site::in_dir(
            tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(),
            projects,
            hide,
        )
    }

    fn in_dir(tmp: tempfile::TempDir, projects: &[(&str, &str)], hide: &[&str]) -> Site {
        let base = tmp.path().canonicalize().unwrap();
        for (_, dir) in projects {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        let mut site = Site {
            _tmp: tmp,
            base,
            host: Host::new([], sandbox(&[])),
        };
        site.register(projects, hide);
        site
    }

    /// Registers `projects` again, as a runner that starts now would.
    fn register(&mut self, projects: &[(&str, &str)], hide: &[&str]) {
        let hide: Vec<String> = hide
            .iter()
            .map(|h| self.base.join(h).display().to_string())
            .collect();
        let registered = projects.iter().map(|(id, dir)| {
            let project = Project::register(&self.base.join(dir), Vec::new()).unwrap();
            ((*id).to_owned(), project)
        });
        self.host = Host::new(
            registered.collect::<Vec<_>>(),
            sandbox(&hide.iter().map(String::as_str).collect::<Vec<_>>()),
        );
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }
}

fn sandbox(hide: &[&str]) -> Sandbox {
    let settings = SandboxSettings {
        hide: hide.iter().map(|h| (*h).to_owned()).collect(),
        ..Default::default()
    };
    Sandbox::from_settings(&settings, []).unwrap()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn item(project: &str, spec: WorkSpec) -> WorkItem {
    WorkItem {
        protocol_version: PROTOCOL_VERSION,
        work_id: Uuid::now_v7(),
        project: project.into(),
        cwd: None,
        spec,
        stdin: None,
        env: BTreeMap::new(),
        limits: WorkLimits {
            timeout_ms: 30_000,
            output_bytes_per_stream: 64 * 1024,
        },
    }
}

/// Runs `script` with `sh -c` as a job of `project`: its outcome and stdout.
async fn job(site: &Site, project: &str, script: &str) -> (WorkOutcome, String) {
    let (outcome, out, _) = job_said(site, project, script).await;
    (outcome, out)
}

/// [`job`], with what it wrote on stderr.
async fn job_said(site: &Site, project: &str, script: &str) -> (WorkOutcome, String, String) {
    let spec = WorkSpec::Process {
        argv: vec!["sh".into(), "-c".into(), script.into()],
    };
    let (_keep, cancel) = watch::channel(false);
    let (tx, mut rx) = mpsc::channel::<OutputPiece>(64);
    let collect = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        while let Some(piece) = rx.recv().await {
            match piece.stream {
                Stream::Stdout => out.extend_from_slice(&piece.data),
                Stream::Stderr => err.extend_from_slice(&piece.data),
            }
        }
        (
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        )
    };
    let work = item(project, spec);
    let policy = StopPolicy::default();
    let run = wc_runner_agent::exec::execute(&work, &site.host, cancel, tx, &policy);
    let (outcome, (out, err)) = tokio::time::timeout(HANG, async { tokio::join!(run, collect) })
        .await
        .expect("the job hung");
    (outcome, out, err)
}

/// Runs an explore, edit or Git operation (`spec` as its wire JSON) of `project`.
async fn op(site: &Site, project: &str, spec: Value) -> WorkOutcome {
    let spec: WorkSpec = serde_json::from_value(spec).unwrap();
    let work = item(project, spec.clone());
    let (_keep, cancel) = watch::channel(false);
    let policy = StopPolicy::default();
    let identity = GitIdentity::new("wc-runner", "wc-runner@test").unwrap();
    let done = async {
        match spec {
            WorkSpec::Explore(_) => {
                wc_runner_agent::explore::execute(&work, &site.host, cancel, &policy).await
            }
            WorkSpec::Edit(_) => wc_runner_agent::edit::execute(&work, &site.host, cancel).await,
            WorkSpec::Git(_) => {
                wc_runner_agent::git::execute(&work, &site.host, &identity, cancel, &policy).await
            }
            other => panic!("not an operation: {other:?}"),
        }
    };
    tokio::time::timeout(HANG, done)
        .await
        .expect("the operation hung")
}

/// The answer of an operation that must succeed, as JSON.
async fn answered(site: &Site, project: &str, spec: Value) -> Value {
    let outcome = op(site, project, spec.clone()).await;
    assert_eq!(
        (outcome.termination, outcome.error_kind),
        (Termination::Exited, None),
        "{spec}: {outcome:?}"
    );
    serde_json::to_value(outcome.answer.expect("an answer")).unwrap()
}

/// The kind of an operation that must be refused.
async fn refused(site: &Site, project: &str, spec: Value) -> OpErrorKind {
    let outcome = op(site, project, spec.clone()).await;
    assert_eq!(
        outcome.termination,
        Termination::Rejected,
        "{spec}: {outcome:?}"
    );
    outcome.error_kind.expect("a typed refusal")
}

fn notice_kinds(outcome: &WorkOutcome) -> Vec<OpErrorKind> {
    outcome.notices.iter().map(|n| n.kind).collect()
}

/// Every path an answer names (`path` fields at any depth, and lists of `files` by name).
fn paths_in(answer: &Value) -> Vec<String> {
    let mut found = Vec::new();
    fn walk(v: &Value, found: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("path", Value::String(p)) => found.push(p.clone()),
                        ("files", Value::Array(files)) => {
                            found.extend(files.iter().filter_map(|f| f.as_str()).map(str::to_owned))
                        }
                        _ => {}
                    }
                    walk(v, found);
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, found)),
            _ => {}
        }
    }
    walk(answer, &mut found);
    found
}

// ---------------------------------------------------------------------------------------------
// 1. A `.git` file never widens the sandbox.

#[tokio::test]
async fn a_git_file_naming_the_whole_host_opens_nothing() {
    let site = Site::new(&[("web", "web")], &[]);
    std::fs::create_dir_all(site.path("outside")).unwrap();
    let (first, _) = job(&site, "web", "printf 'gitdir: /\\n' > .git").await;
    assert_eq!(first.exit_code, Some(0), "{first:?}");
    let marker = site.path("outside/escaped");
    let script = format!("touch {} 2>/dev/null; true", marker.display());
    let (second, _) = job(&site, "web", &script).await;
    assert_eq!(second.exit_code, Some(0), "{second:?}");
    assert!(!marker.exists(), "the second job wrote outside its project");
    assert_eq!(
        notice_kinds(&second),
        [OpErrorKind::GitMetadataOutsideProject],
        "the reply says why"
    );
    assert!(
        second.notices[0].message.contains("leads to /,"),
        "{:?}",
        second.notices
    );
    assert_eq!(
        refused(&site, "web", json!({"kind": "git", "op": "git_status"})).await,
        OpErrorKind::GitMetadataOutsideProject
    );
}

#[tokio::test]
async fn git_metadata_of_another_project_or_a_sibling_is_neither_written_nor_used() {
    let mut site = Site::new(&[("web", "web"), ("other", "other")], &[]);
    git(&site.path("other"), &["init", "-q", "-b", "main"]);
    write(&site.path("other/a.txt"), "a\n");
    git(&site.path("other"), &["add", "-A"]);
    git(&site.path("other"), &["commit", "-q", "-m", "other's"]);
    std::fs::create_dir_all(site.path("sibling/.git")).unwrap();
    site.register(&[("web", "web"), ("other", "other")], &[]);
    let other_git = site.path("other/.git");
    let hook = other_git.join("hooks/post-commit");
    for (what, setup) in [
        (
            "gitdir",
            format!("printf 'gitdir: {}\\n' > .git", other_git.display()),
        ),
        (
            "commondir",
            format!(
                "rm -rf .git && mkdir -p .git && printf '{}\\n' > .git/commondir",
                other_git.display()
            ),
        ),
        (
            "symlink",
            format!(
                "rm -rf .git && ln -s {} .git",
                site.path("sibling/.git").display()
            ),
        ),
    ] {
        let (set, _) = job(&site, "web", &setup).await;
        assert_eq!(set.exit_code, Some(0), "{what}: {set:?}");
        let script = format!(
            "mkdir -p {hooks} 2>/dev/null; echo pwned > {hook} 2>/dev/null; \
             touch {sib}/planted 2>/dev/null; ls {other} 2>/dev/null | wc -l",
            hooks = hook.parent().unwrap().display(),
            hook = hook.display(),
            sib = site.path("sibling/.git").display(),
            other = other_git.display()
        );
        let (ran, seen) = job(&site, "web", &script).await;
        assert_eq!(ran.exit_code, Some(0), "{what}: {ran:?}");
        assert!(
            !hook.exists(),
            "{what}: a hook was planted in another project"
        );
        assert!(!site.path("sibling/.git/planted").exists(), "{what}");
        assert_eq!(
            seen.trim(),
            "0",
            "{what}: another project's metadata is visible"
        );
        assert_eq!(
            notice_kinds(&ran),
            [OpErrorKind::GitMetadataOutsideProject],
            "{what}"
        );
        for git_op in ["git_status", "git_log"] {
            let spec = json!({"kind": "git", "op": git_op, "limit": 5});
            let spec = if git_op == "git_status" {
                json!({"kind": "git", "op": "git_status"})
            } else {
                spec
            };
            assert_eq!(
                refused(&site, "web", spec).await,
                OpErrorKind::GitMetadataOutsideProject,
                "{what} {git_op}"
            );
        }
    }
}

/// A linked worktree `wt` of the repository `main`, both served, registered as the operator
/// would register them.
fn worktrees() -> Site {
    let mut site = Site::new(&[("main", "main")], &[]);
    let main = site.path("main");
    git(&main, &["init", "-q", "-b", "main"]);
    write(&main.join("a.txt"), "a\n");
    git(&main, &["add", "-A"]);
    git(&main, &["commit", "-q", "-m", "initial"]);
    git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            site.path("wt").to_str().unwrap(),
        ],
    );
    site.register(&[("main", "main"), ("wt", "wt")], &[]);
    site
}

#[tokio::test]
async fn a_registered_worktree_commits_through_its_registered_metadata() {
    let site = worktrees();
    write(&site.path("wt/b.txt"), "b\n");
    let commit = json!({"kind": "git", "op": "git_commit", "message": "from the worktree"});
    let answer = answered(&site, "wt", commit).await;
    assert_eq!(answer["files_changed"], 1, "{answer}");
    let log = git(&site.path("main"), &["log", "--all", "--format=%s"]);
    assert!(log.contains("from the worktree"), "{log}");
    let (ran, _) = job(&site, "wt", "git status --short").await;
    assert_eq!(ran.exit_code, Some(0), "{ran:?}");
    assert!(ran.notices.is_empty(), "{:?}", ran.notices);
    // The main checkout's files are not the worktree's to see; its metadata is.
    let (ran, seen) = job(
        &site,
        "wt",
        &format!("ls -A {}", site.path("main").display()),
    )
    .await;
    assert_eq!(ran.exit_code, Some(0), "{ran:?}");
    assert_eq!(
        seen.split_whitespace().collect::<Vec<_>>(),
        [".git"],
        "{seen}"
    );
}

#[tokio::test]
async fn a_registered_gitdir_swapped_for_a_symlink_is_not_bound() {
    let site = worktrees();
    let gitdir = site.path("main/.git/worktrees/wt");
    std::fs::create_dir_all(site.path("outside")).unwrap();
    let marker = site.path("outside/escaped");
    // The worktree's job writes its common directory, but its gitdir there is a mount point
    // of its own that it cannot move; the main checkout's job shares the repository's
    // metadata, and has the worktree's gitdir pinned as well.
    for project in ["wt", "main"] {
        let swap = format!("mv {g} {g}.real", g = gitdir.display());
        let (moved, _) = job(&site, project, &swap).await;
        assert_ne!(moved.exit_code, Some(0), "{project}: {moved:?}");
        assert!(gitdir.is_dir(), "{project}");
    }
    // Something outside every sandbox swaps it for a symlink out of every project.
    std::fs::rename(&gitdir, gitdir.with_extension("real")).unwrap();
    std::os::unix::fs::symlink(site.path("outside"), &gitdir).unwrap();
    let (ran, _) = job(
        &site,
        "wt",
        &format!("touch {} 2>/dev/null; true", marker.display()),
    )
    .await;
    assert_eq!(ran.exit_code, Some(0), "{ran:?}");
    assert!(!marker.exists(), "a swapped name was bound");
    assert!(
        notice_kinds(&ran).contains(&OpErrorKind::GitMetadataOutsideProject),
        "{:?}",
        ran.notices
    );
}

#[tokio::test]
async fn a_symlink_swapped_back_and_forth_while_jobs_start_never_opens_its_target() {
    let site = worktrees();
    let gitdir = site.path("main/.git/worktrees/wt");
    let flip = site.path("main/.git/worktrees/wt.flip");
    std::fs::create_dir_all(site.path("outside")).unwrap();
    let (outside, stop) = (site.path("outside"), Arc::new(AtomicBool::new(false)));
    std::os::unix::fs::symlink(&outside, &flip).unwrap();
    // The registered name is the real directory and a symlink to the outside by turns, as
    // fast as an exchange of the two names goes.
    let flipper = {
        let (gitdir, flip, stop) = (gitdir.clone(), flip.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &gitdir,
                    rustix::fs::CWD,
                    &flip,
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
                flips += 1;
            }
            // Left as registered.
            if std::fs::symlink_metadata(&gitdir).unwrap().is_symlink() {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &gitdir,
                    rustix::fs::CWD,
                    &flip,
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
            }
            flips
        })
    };
    let mut ran_ok = 0;
    for n in 0..40 {
        let marker = outside.join(format!("escaped-{n}"));
        let script = format!("touch {} 2>/dev/null; true", marker.display());
        let (ran, _, said) = job_said(&site, "wt", &script).await;
        assert!(!marker.exists(), "job {n} wrote through the swapped name");
        // The job runs without the gitdir, or bubblewrap catches the swap after resolving the
        // descriptor and refuses to run it at all.
        if ran.exit_code == Some(0) {
            ran_ok += 1;
        } else {
            assert!(said.starts_with("bwrap: "), "job {n}: {ran:?} {said}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    assert!(ran_ok > 0, "no job ran while the name was swapped");
    assert!(
        flipper.join().unwrap() > 20,
        "the name was swapped meanwhile"
    );
}

#[tokio::test]
async fn a_project_root_swapped_for_a_symlink_runs_nothing() {
    // `inner` lies inside `outer`, so outer's jobs can replace it.
    let site = Site::new(&[("outer", "outer"), ("inner", "outer/inner")], &[]);
    std::fs::create_dir_all(site.path("victim")).unwrap();
    // Hidden from outer's jobs, the inner root is a mount point there: it cannot be moved.
    let (moved, _) = job(&site, "outer", "mv inner inner.old").await;
    assert_ne!(moved.exit_code, Some(0), "{moved:?}");
    // Swapped on the host all the same, the inner project is refused, not run elsewhere.
    std::fs::rename(site.path("outer/inner"), site.path("outer/inner.old")).unwrap();
    std::os::unix::fs::symlink(site.path("victim"), site.path("outer/inner")).unwrap();
    let (ran, _) = job(&site, "inner", "touch planted").await;
    assert_eq!(ran.termination, Termination::Rejected, "{ran:?}");
    assert!(
        ran.error
            .as_deref()
            .unwrap_or_default()
            .contains("now leads to"),
        "{ran:?}"
    );
    assert!(!site.path("victim/planted").exists());
    let read = json!({"kind": "explore", "op": "list_files"});
    assert_eq!(
        refused(&site, "inner", read).await,
        OpErrorKind::ProjectUnavailable
    );
}

// ---------------------------------------------------------------------------------------------
// 2 and 3. Hidden paths and other projects, for jobs and for every file tool alike.

/// A repository `web` with a hidden secret file, a hidden directory and another project nested
/// in it, all committed before they were hidden; and a project `other` beside it.
fn hiding() -> Site {
    let projects = [
        ("web", "web"),
        ("nested", "web/vendor/nested"),
        ("other", "other"),
    ];
    let mut site = Site::new(&projects, &[]);
    let web = site.path("web");
    git(&web, &["init", "-q", "-b", "main"]);
    write(&web.join("src/main.rs"), "fn main() { let token = 1; }\n");
    write(&web.join("config/secret.env"), "token = hidden-value\n");
    write(&web.join("keys/id_key"), "token = key-material\n");
    write(&web.join("vendor/nested/lib.rs"), "// token in nested\n");
    write(&site.path("other/data.txt"), "token = other tenant\n");
    git(&web, &["add", "-A"]);
    git(&web, &["commit", "-q", "-m", "initial"]);
    site.register(&projects, &["web/config/secret.env", "web/keys"]);
    site
}

const HIDDEN: [&str; 3] = ["config/secret.env", "keys/id_key", "vendor/nested/lib.rs"];

#[tokio::test]
async fn hidden_paths_are_refused_by_every_file_tool_with_one_error() {
    let site = hiding();
    for path in HIDDEN {
        for spec in [
            json!({"kind": "explore", "op": "read_files", "files": [{"path": path}]}),
            json!({"kind": "explore", "op": "list_files", "path": path}),
            json!({"kind": "explore", "op": "search", "pattern": "token", "path": path}),
            json!({"kind": "explore", "op": "tracked_files", "path": path}),
            json!({"kind": "edit", "op": "text_edits", "path": path,
                   "edits": [{"old_text": "token", "new_text": "x"}]}),
            json!({"kind": "edit", "op": "patch", "patch": format!(
                "--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-token = x\n+token = y\n")}),
            json!({"kind": "edit", "op": "write_file", "path": path, "content": "x"}),
            json!({"kind": "edit", "op": "delete_files", "paths": [path]}),
            json!({"kind": "edit", "op": "move_file", "from": path, "to": "src/moved"}),
            json!({"kind": "git", "op": "git_diff", "paths": [path]}),
            json!({"kind": "git", "op": "git_commit", "message": "m", "paths": [path]}),
            json!({"kind": "git", "op": "git_restore_paths", "paths": [path], "source": "head"}),
            json!({"kind": "git", "op": "git_discard_untracked", "paths": [path], "dry_run": false}),
        ] {
            assert_eq!(
                refused(&site, "web", spec.clone()).await,
                OpErrorKind::PathHidden,
                "{spec}"
            );
        }
    }
    // Nothing is made inside a hidden directory either.
    for path in ["keys/new_key", "vendor/nested/new.rs"] {
        for spec in [
            json!({"kind": "edit", "op": "text_edits", "path": path, "create": true,
                   "edits": [{"old_text": "", "new_text": "x"}]}),
            json!({"kind": "edit", "op": "write_file", "path": path, "content": "x"}),
            json!({"kind": "edit", "op": "move_file", "from": "src/main.rs", "to": path}),
        ] {
            assert_eq!(
                refused(&site, "web", spec.clone()).await,
                OpErrorKind::PathHidden,
                "{spec}"
            );
        }
        assert!(!site.path("web").join(path).exists(), "{path}");
        assert!(site.path("web/src/main.rs").exists());
    }
    // A symlink inside the root is judged by where it leads.
    std::os::unix::fs::symlink("config/secret.env", site.path("web/alias")).unwrap();
    let read = json!({"kind": "explore", "op": "read_files", "files": [{"path": "alias"}]});
    assert_eq!(refused(&site, "web", read).await, OpErrorKind::PathHidden);
    // Nothing was changed.
    let content = std::fs::read_to_string(site.path("web/config/secret.env")).unwrap();
    assert_eq!(content, "token = hidden-value\n");
}

#[tokio::test]
async fn hidden_paths_never_appear_in_listings_searches_overviews_diffs_or_commits() {
    let site = hiding();
    // Changes on both sides of the boundary, made on the host.
    for path in [
        "src/main.rs",
        "config/secret.env",
        "keys/id_key",
        "vendor/nested/lib.rs",
    ] {
        write(&site.path("web").join(path), "token = changed\n");
    }
    write(&site.path("web/keys/new_key"), "token = new\n");
    for spec in [
        json!({"kind": "explore", "op": "list_files", "hidden": true}),
        json!({"kind": "explore", "op": "search", "pattern": "token", "hidden": true}),
        json!({"kind": "explore", "op": "overview"}),
        json!({"kind": "explore", "op": "tracked_files"}),
        json!({"kind": "git", "op": "git_status"}),
        json!({"kind": "git", "op": "git_diff"}),
    ] {
        let answer = answered(&site, "web", spec.clone()).await;
        let paths = paths_in(&answer);
        assert!(
            paths.iter().any(|p| p.starts_with("src")),
            "{spec}: the visible files are there: {answer}"
        );
        for p in &paths {
            assert!(
                !(p.starts_with("config/secret")
                    || p.starts_with("keys")
                    || p.starts_with("vendor/nested")),
                "{spec}: {p} listed: {answer}"
            );
        }
        let text = answer.to_string();
        assert!(
            !text.contains("hidden-value") && !text.contains("key-material"),
            "{spec}"
        );
    }
    // A job staged what it saw of the hidden paths (their masks: empty, so deleted); a commit
    // takes none of it.
    let (staged, _) = job(
        &site,
        "web",
        "git add -A keys vendor && git rm -q --cached config/secret.env && git status --short",
    )
    .await;
    assert_eq!(staged.exit_code, Some(0), "{staged:?}");
    let commit = json!({"kind": "git", "op": "git_commit", "message": "visible only"});
    let answer = answered(&site, "web", commit).await;
    assert_eq!(answer["files_changed"], 1, "{answer}");
    let shown = git(&site.path("web"), &["show", "--stat", "--format=", "HEAD"]);
    assert!(shown.contains("src/main.rs"), "{shown}");
    for p in ["config", "keys", "vendor"] {
        assert!(!shown.contains(p), "{p} committed: {shown}");
    }
    // The hidden files are as they were on the host, unstaged.
    let content = std::fs::read_to_string(site.path("web/keys/id_key")).unwrap();
    assert_eq!(content, "token = changed\n");
}

#[tokio::test]
async fn a_job_sees_its_own_project_only_and_cannot_move_a_hidden_path_out() {
    let site = hiding();
    let (ran, out) = job(
        &site,
        "web",
        "cat config/secret.env keys/id_key vendor/nested/lib.rs 2>&1; \
         mv config config2 2>&1 >/dev/null && echo moved-config; \
         mv keys keys2 2>&1 >/dev/null && echo moved-keys; \
         mv vendor vendor2 2>&1 >/dev/null && echo moved-vendor; true",
    )
    .await;
    assert_eq!(ran.exit_code, Some(0), "{ran:?}");
    for secret in ["hidden-value", "key-material", "token in nested"] {
        assert!(!out.contains(secret), "{secret}: {out}");
    }
    assert!(
        !out.contains("moved-"),
        "a hidden path's directory moved: {out}"
    );
    assert!(site.path("web/config/secret.env").exists());

    // Another project beside it: its files are hidden, not just read-only.
    let other = site.path("other");
    let (ran, out) = job(
        &site,
        "web",
        &format!(
            "ls -A {0} | wc -l; cat {0}/data.txt 2>/dev/null; true",
            other.display()
        ),
    )
    .await;
    assert_eq!(ran.exit_code, Some(0), "{ran:?}");
    assert!(!out.contains("other tenant"), "{out}");
    assert_eq!(out.trim(), "0", "{out}");
    // The nested project sees its own files, and its enclosing project's read-only.
    let (ran, out) = job(
        &site,
        "nested",
        "cat lib.rs; cat ../../src/main.rs; touch ../../src/planted 2>/dev/null; true",
    )
    .await;
    assert_eq!(ran.exit_code, Some(0), "{ran:?}");
    assert!(
        out.contains("token in nested") && out.contains("fn main"),
        "{out}"
    );
    assert!(!site.path("web/src/planted").exists());
}

// ---------------------------------------------------------------------------------------------
// A project under /tmp (issue: location) keeps its surroundings.

#[tokio::test]
async fn a_project_under_tmp_sees_its_enclosing_repository_and_tools_read_only() {
    let tmp = tempfile::tempdir_in("/tmp").unwrap();
    let site = Site::in_dir(tmp, &[("api", "repo/svc/api")], &[]);
    let repo = site.path("repo");
    git(&repo, &["init", "-q", "-b", "main"]);
    write(&repo.join("top.txt"), "top\n");
    write(&repo.join("svc/api/main.rs"), "fn main() {}\n");
    write(&repo.join("tools/hello.sh"), "echo hello from the tools\n");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    write(&repo.join("svc/api/main.rs"), "fn main() { run() }\n");
    let status = answered(&site, "api", json!({"kind": "git", "op": "git_status"})).await;
    assert_eq!(paths_in(&status), ["main.rs"], "{status}");
    let (ran, out) = job(
        &site,
        "api",
        "sh ../../tools/hello.sh; echo changed > ../../top.txt 2>/dev/null; ls -A /tmp | wc -l",
    )
    .await;
    assert_eq!(ran.exit_code, Some(0), "{ran:?}");
    assert!(out.contains("hello from the tools"), "{out}");
    assert_eq!(
        std::fs::read_to_string(repo.join("top.txt")).unwrap(),
        "top\n"
    );
    // Only the project's own top directory is shown in the private /tmp.
    assert_eq!(out.lines().last(), Some("1"), "{out}");
}

// ---------------------------------------------------------------------------------------------
// Shared caches, and a project that keeps out of them.

#[tokio::test]
async fn a_project_with_caches_of_its_own_cannot_write_the_shared_ones() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let base = tmp.path().canonicalize().unwrap();
    for dir in ["shared", "own", "cache", "own-cache"] {
        std::fs::create_dir_all(base.join(dir)).unwrap();
    }
    let settings = SandboxSettings {
        writable: Some(vec![base.join("cache").display().to_string()]),
        ..Default::default()
    };
    let own = Project::register(&base.join("own"), Vec::new())
        .unwrap()
        .with_writable(vec![base.join("own-cache")]);
    let site = Site {
        host: Host::new(
            [
                (
                    "shared".to_owned(),
                    Project::register(&base.join("shared"), Vec::new()).unwrap(),
                ),
                ("own".to_owned(), own),
            ],
            Sandbox::from_settings(&settings, []).unwrap(),
        ),
        base: base.clone(),
        _tmp: tmp,
    };
    let write = |dir: &str, name: &str| {
        format!(
            "touch {}/{name} 2>/dev/null; true",
            base.join(dir).display()
        )
    };
    job(&site, "shared", &write("cache", "from-shared")).await;
    job(&site, "own", &write("cache", "from-own")).await;
    job(&site, "own", &write("own-cache", "from-own")).await;
    assert!(
        base.join("cache/from-shared").exists(),
        "the shared cache is writable"
    );
    assert!(
        !base.join("cache/from-own").exists(),
        "a private project wrote the shared cache"
    );
    assert!(
        base.join("own-cache/from-own").exists(),
        "its own cache is writable"
    );
}

// ---------------------------------------------------------------------------------------------
// An edit killed mid-write leaves its temporary file: swept at start, never committed.

#[tokio::test]
async fn edit_leftovers_are_swept_at_start_and_never_committed() {
    let site = Site::new(&[("web", "web")], &[]);
    let web = site.path("web");
    git(&web, &["init", "-q", "-b", "main"]);
    write(&web.join("src/lib.rs"), "fn a() {}\n");
    git(&web, &["add", "-A"]);
    git(&web, &["commit", "-q", "-m", "initial"]);
    let leftovers = ["src/.wc-edit-0123abcd.tmp", ".wc-edit-ffff.tmp"];
    for path in leftovers {
        write(&web.join(path), "half-written\n");
    }
    write(&web.join("src/lib.rs"), "fn a() { b() }\n");
    // A job staged one of them itself; a commit takes none.
    let (staged, _) = job(&site, "web", "git add -A && git status --short").await;
    assert_eq!(staged.exit_code, Some(0), "{staged:?}");
    let commit = json!({"kind": "git", "op": "git_commit", "message": "lib"});
    let answer = answered(&site, "web", commit).await;
    assert_eq!(answer["files_changed"], 1, "{answer}");
    let shown = git(&web, &["show", "--stat", "--format=", "HEAD"]);
    assert!(!shown.contains("wc-edit"), "{shown}");
    // A name that only looks alike stays; the leftovers go.
    write(&web.join("src/.wc-edit-notes.txt"), "mine\n");
    let removed = wc_runner_agent::edit::sweep_leftovers(&site.host, "web").unwrap();
    assert_eq!(removed, leftovers.len());
    for path in leftovers {
        assert!(!web.join(path).exists(), "{path}");
    }
    assert!(web.join("src/.wc-edit-notes.txt").exists());
}

// ---------------------------------------------------------------------------------------------
// What a job may use: a fork bomb and a memory hog are held in their bounds.

/// Whether this host bounds jobs; a host that cannot fails the test where the bounds are
/// required (`scripts/test` requires them), and skips it elsewhere.
fn bounded_here() -> bool {
    if wc_runner_agent::cgroup::bounds_every_job() {
        return true;
    }
    assert!(
        std::env::var("WC_TEST_REQUIRE_TOOLCHAINS").as_deref() != Ok("1"),
        "jobs cannot be bounded here: {}",
        wc_runner_agent::cgroup::describe()
    );
    eprintln!("skipped: {}", wc_runner_agent::cgroup::describe());
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_and_a_memory_hog_stay_in_their_bounds_while_other_projects_run() {
    if !bounded_here() {
        return;
    }
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let base = tmp.path().canonicalize().unwrap();
    for dir in ["greedy", "quiet"] {
        std::fs::create_dir_all(base.join(dir)).unwrap();
    }
    let greedy = Project::register(&base.join("greedy"), Vec::new())
        .unwrap()
        .with_limits(wc_runner_agent::cgroup::JobLimitSettings {
            max_processes: Some(64),
            max_memory_mib: Some(64),
            cpu_weight: Some(50),
        })
        .unwrap();
    let quiet = Project::register(&base.join("quiet"), Vec::new()).unwrap();
    let site = Arc::new(Site {
        host: Host::new(
            [("greedy".to_owned(), greedy), ("quiet".to_owned(), quiet)],
            sandbox(&[]),
        ),
        base,
        _tmp: tmp,
    });
    // Forks until the bound refuses them, for as long as it is let run.
    let bomb = {
        let site = site.clone();
        tokio::spawn(async move {
            let mut item = item(
                "greedy",
                WorkSpec::Process {
                    argv: ["sh", "-c", "while :; do sleep 60 & done"]
                        .map(String::from)
                        .to_vec(),
                },
            );
            item.limits.timeout_ms = 4000;
            let (_keep, cancel) = watch::channel(false);
            let (tx, mut rx) = mpsc::channel::<OutputPiece>(64);
            tokio::spawn(async move { while rx.recv().await.is_some() {} });
            let policy = StopPolicy::default();
            wc_runner_agent::exec::execute(&item, &site.host, cancel, tx, &policy).await
        })
    };
    // Another project's job runs meanwhile.
    for _ in 0..3 {
        let (ran, out) = job(&site, "quiet", "echo still-fine").await;
        assert_eq!(
            (ran.exit_code, out.as_str()),
            (Some(0), "still-fine\n"),
            "{ran:?}"
        );
    }
    // It ends one way or another (`sh` gives up when a fork is refused, or its time runs out).
    let bombed = bomb.await.unwrap();
    assert_ne!(bombed.exit_code, Some(0), "{bombed:?}");
    let said: Vec<&str> = bombed.notices.iter().map(|n| n.message.as_str()).collect();
    assert!(
        bombed
            .notices
            .iter()
            .any(|n| n.kind == OpErrorKind::ResourceLimit
                && n.message.contains("limit of 64 processes")),
        "the bomb is reported as held: {said:?}"
    );
    // A job that wants more memory than its bound is killed by the kernel, and told so.
    let (hog, _) = job(
        &site,
        "greedy",
        "python3 -c 'b = bytearray(512 * 1024 * 1024); print(len(b))'",
    )
    .await;
    assert_ne!(hog.exit_code, Some(0), "{hog:?}");
    assert!(
        hog.notices
            .iter()
            .any(|n| n.kind == OpErrorKind::ResourceLimit
                && n.message.contains("memory limit of 64 MiB")),
        "{hog:?}"
    );
    let (ran, _) = job(&site, "quiet", "true").await;
    assert_eq!(ran.exit_code, Some(0));
}

#[tokio::test]
async fn checkpoints_neither_keep_nor_restore_nor_show_hidden_paths() {
    let site = hiding();
    let web = site.path("web");
    write(&web.join("src/main.rs"), "fn main() { checkpointed() }\n");
    let created = answered(
        &site,
        "web",
        json!({"kind": "git", "op": "git_create_checkpoint", "label": "l",
               "checkpoint_kind": "manual"}),
    )
    .await;
    let id = created["checkpoint"]["id"].as_str().unwrap().to_owned();
    // The hidden files change on the host after the checkpoint, beside a visible one.
    for path in HIDDEN {
        write(&web.join(path), "token = changed after\n");
    }
    write(&web.join("keys/new_key"), "token = new\n");
    write(&web.join("src/main.rs"), "fn main() { broken() }\n");
    let refname = format!("refs/worktree/wc/checkpoints/{id}");
    let kept = git(&web, &["ls-tree", "-r", "--name-only", &refname]);
    assert!(!kept.contains("keys/new_key"), "{kept}");
    let diff = answered(
        &site,
        "web",
        json!({"kind": "git", "op": "git_diff_checkpoint", "checkpoint": id,
               "context_lines": 3, "limit_bytes": 65536}),
    )
    .await;
    assert_eq!(paths_in(&diff["files"]), ["src/main.rs"], "{diff}");
    assert!(!diff.to_string().contains("token"), "{diff}");
    for path in HIDDEN {
        let named = json!({"kind": "git", "op": "git_diff_checkpoint", "checkpoint": id,
                           "paths": [path], "context_lines": 3, "limit_bytes": 100});
        assert_eq!(refused(&site, "web", named).await, OpErrorKind::PathHidden);
    }
    let listed = answered(
        &site,
        "web",
        json!({"kind": "git", "op": "git_list_checkpoints", "limit": 10}),
    )
    .await;
    let restored = answered(
        &site,
        "web",
        json!({"kind": "git", "op": "git_restore_checkpoint", "checkpoint": id,
               "expected_state": listed["current_state"]}),
    )
    .await;
    assert_eq!(paths_in(&restored["files"]), ["src/main.rs"], "{restored}");
    let main = std::fs::read_to_string(web.join("src/main.rs")).unwrap();
    assert_eq!(main, "fn main() { checkpointed() }\n");
    // Every hidden file is as the host left it: neither put back nor removed.
    for path in HIDDEN {
        let content = std::fs::read_to_string(web.join(path)).unwrap();
        assert_eq!(content, "token = changed after\n", "{path}");
    }
    assert!(web.join("keys/new_key").exists());
}

#[tokio::test]
async fn discarding_untracked_files_never_lists_or_removes_a_hidden_one() {
    let site = hiding();
    let web = site.path("web");
    write(&web.join("keys/new_key"), "token = new\n");
    write(&web.join("vendor/nested/untracked.rs"), "// nested\n");
    write(&web.join("src/scratch.rs"), "// scratch\n");
    let removed = answered(
        &site,
        "web",
        json!({"kind": "git", "op": "git_discard_untracked", "dry_run": false}),
    )
    .await;
    assert_eq!(removed["files"], json!(["src/scratch.rs"]), "{removed}");
    assert!(!web.join("src/scratch.rs").exists());
    assert!(web.join("keys/new_key").exists());
    assert!(web.join("vendor/nested/untracked.rs").exists());
}
