//! What callers may open on this host (`[workspaces] open`), where managed worktrees go, and
//! the manifest of the projects opened: written by rename under a lock, hidden from every job,
//! read at start so a restarted runner serves them again while the policy still allows them.
//! The operations themselves are [`crate::workspace`].

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use wc_runner_protocol::OpenAs;

use crate::boundary::Project;

/// The manifest's file name in the store.
const MANIFEST: &str = "projects.json";

/// What callers may open on this host, where managed worktrees go, and the manifest of what
/// was opened.
#[derive(Debug)]
pub struct Workspaces {
    /// Canonical directories beneath which a caller may open a checkout.
    open: Vec<PathBuf>,
    /// Canonical directory the runner makes worktrees in.
    store: PathBuf,
    /// The manifest as last written: read once at start, rewritten whole on each change.
    manifest: Mutex<Vec<Entry>>,
    /// Held while Git makes a worktree: two `git worktree add` at once in one repository can
    /// race to create its `worktrees/` directory, and making one is rare.
    making: tokio::sync::Mutex<()>,
}

/// One opened project, as the manifest keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    pub(crate) project: String,
    pub(crate) root: PathBuf,
    pub(crate) source: PathBuf,
    pub(crate) open_as: OpenAs,
    pub(crate) base_commit: Option<String>,
    /// The worktree's directory in the store (its root, or the directory holding it).
    pub(crate) dir: Option<PathBuf>,
    /// The worktree's administrative directory in the source repository.
    pub(crate) admin: Option<PathBuf>,
    /// The Git metadata outside the root registered when it was opened: a restart serves it
    /// only while its `.git` still leads exactly there (a job can rewrite `.git`).
    pub(crate) git_dirs: Vec<PathBuf>,
}

impl Workspaces {
    /// The policy that lets callers open checkouts beneath `open`, making worktrees in `store`
    /// (created, owner-only, when missing).
    pub fn new(open: &[PathBuf], store: &Path) -> anyhow::Result<Workspaces> {
        let open = open
            .iter()
            .map(|dir| {
                let canon = std::fs::canonicalize(dir).with_context(|| {
                    format!("workspaces.open: {} does not resolve", dir.display())
                })?;
                anyhow::ensure!(
                    canon.is_dir(),
                    "workspaces.open: {} is not a directory",
                    dir.display()
                );
                Ok(canon)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(store)
            .with_context(|| format!("workspaces.store: cannot create {}", store.display()))?;
        let store = std::fs::canonicalize(store)
            .with_context(|| format!("workspaces.store: {} does not resolve", store.display()))?;
        if let Some(dir) = open
            .iter()
            .find(|dir| store.starts_with(dir) || dir.starts_with(&store))
        {
            anyhow::bail!(
                "workspaces.store {} and the open directory {} must not contain one another",
                store.display(),
                dir.display()
            );
        }
        let path = store.join(MANIFEST);
        if !path.exists() {
            write_manifest(&store, &[])?;
        }
        let entries = read_manifest(&path);
        Ok(Workspaces {
            open,
            store,
            manifest: Mutex::new(entries),
            making: tokio::sync::Mutex::new(()),
        })
    }

    /// Held while Git makes a worktree (one at a time on this host).
    pub(crate) async fn making(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.making.lock().await
    }

    /// The manifest file: hidden from every job.
    pub fn manifest_path(&self) -> PathBuf {
        self.store.join(MANIFEST)
    }

    /// The worktree store.
    pub fn store(&self) -> &Path {
        &self.store
    }

    /// The directories beneath which a caller may open a checkout.
    pub fn open(&self) -> &[PathBuf] {
        &self.open
    }

    /// Whether a caller may open the canonical path `path`.
    pub(crate) fn allows(&self, path: &Path) -> bool {
        !path.starts_with(&self.store) && self.open.iter().any(|dir| path.starts_with(dir))
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        // Every change replaces the whole list: a panic cannot leave half of one.
        self.manifest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn entry(&self, project: &str) -> Option<Entry> {
        self.entries()
            .iter()
            .find(|e| e.project == project)
            .cloned()
    }

    /// Applies `change` to the manifest and writes it; nothing changes when the write fails.
    pub(crate) fn update(&self, change: impl FnOnce(&mut Vec<Entry>)) -> std::io::Result<()> {
        let mut entries = self.entries();
        let mut changed = entries.clone();
        change(&mut changed);
        write_manifest(&self.store, &changed).map_err(std::io::Error::other)?;
        *entries = changed;
        Ok(())
    }

    /// The projects opened earlier that the policy still allows, registered as they are now;
    /// the others are no longer served (and said so).
    pub(crate) fn reopen(&self) -> Vec<(String, Project)> {
        let mut served = Vec::new();
        let entries = self.entries().clone();
        for entry in entries {
            let allowed = match (&entry.open_as, &entry.dir) {
                (OpenAs::Worktree, Some(dir)) => dir.starts_with(&self.store),
                (OpenAs::Checkout, _) => self.allows(&entry.root),
                (OpenAs::Worktree, None) => false,
            } && self.allows(&entry.source)
                && entry.git_dirs.iter().all(|d| self.allows(d));
            if !allowed {
                tracing::warn!(project = entry.project, source = %entry.source.display(), "an opened project is outside the workspace policy now; not served");
                continue;
            }
            match Project::register(&entry.root, Vec::new()) {
                Ok(project) if project.root() != entry.root => {
                    tracing::warn!(project = entry.project, root = %entry.root.display(), "an opened project's root moved; not served")
                }
                Ok(project) if project.git_dirs() != entry.git_dirs => {
                    tracing::warn!(project = entry.project, root = %entry.root.display(), "an opened project's .git leads to other Git metadata than it was opened with; not served")
                }
                Ok(project) => served.push((entry.project, project)),
                Err(_) => {
                    tracing::warn!(project = entry.project, root = %entry.root.display(), "an opened project's root is gone; not served")
                }
            }
        }
        served
    }
}

/// The manifest at `path`; unreadable, none (and said so).
fn read_manifest(path: &Path) -> Vec<Entry> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(path = %path.display(), error = %e, "the opened projects' manifest does not read; serving none of them");
            Vec::new()
        }),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the opened projects' manifest");
            Vec::new()
        }
    }
}

fn write_manifest(store: &Path, entries: &[Entry]) -> anyhow::Result<()> {
    let tmp = store.join(format!(".{MANIFEST}.tmp"));
    let bytes = serde_json::to_vec_pretty(entries)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(&bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, store.join(MANIFEST))?;
    Ok(())
}
