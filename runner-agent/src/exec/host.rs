//! The host: the projects it serves, each under its runner-local id, and the sandbox their
//! jobs run in. A project's boundary is built only while its root is still the directory
//! registered.
//!
//! The projects are those configured and those callers opened since ([`crate::workspace`]):
//! a project is added or removed whole, under a lock held only for that, so work sees the set
//! as it was when its boundary was built.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::boundary::{Boundary, Project};
use crate::config::RunnerConfig;
use crate::confine;
use crate::opened::Workspaces;
use crate::sandbox::Sandbox;

/// What every execution on this host shares: the projects it serves and the sandbox they run
/// in.
#[derive(Debug)]
pub struct Host {
    /// Runner-local project id → the project as registered.
    projects: RwLock<BTreeMap<String, Project>>,
    /// How jobs are confined.
    pub sandbox: Sandbox,
    /// What callers may open here, and where managed worktrees go (`None`: nothing opens).
    workspaces: Option<Arc<Workspaces>>,
}

impl Host {
    /// A host serving `projects` in `sandbox`.
    pub fn new(projects: impl IntoIterator<Item = (String, Project)>, sandbox: Sandbox) -> Self {
        Self {
            projects: RwLock::new(projects.into_iter().collect()),
            sandbox,
            workspaces: None,
        }
    }

    /// A host serving the directories `projects` (id, root), each registered as it is now and
    /// passing no environment, in `sandbox`.
    pub fn register(
        projects: impl IntoIterator<Item = (String, PathBuf)>,
        sandbox: Sandbox,
    ) -> io::Result<Self> {
        let projects = projects
            .into_iter()
            .map(|(id, root)| Ok((id, Project::register(&root, Vec::new())?)))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Self::new(projects, sandbox))
    }

    /// The host a runner configuration describes, serving also the projects callers opened
    /// earlier that its workspace policy still allows.
    pub fn from_config(cfg: &RunnerConfig) -> Self {
        let host = Self::new(cfg.projects.clone(), cfg.sandbox.clone());
        match &cfg.workspaces {
            Some(workspaces) => host.with_workspaces(workspaces.clone()),
            None => host,
        }
    }

    /// The same host letting callers open what `workspaces` allows, and serving the projects
    /// opened earlier that it still allows.
    pub fn with_workspaces(mut self, workspaces: Arc<Workspaces>) -> Self {
        for (id, project) in workspaces.reopen() {
            self.add(id, project);
        }
        self.workspaces = Some(workspaces);
        self
    }

    /// What callers may open here.
    pub fn workspaces(&self) -> Option<&Arc<Workspaces>> {
        self.workspaces.as_ref()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Project>> {
        // A panic while holding the lock leaves a whole map: every change is one insert or
        // one remove.
        self.projects
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Project>> {
        self.projects
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The ids of the projects served.
    pub fn project_ids(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// The project served as `id`.
    pub fn project(&self, id: &str) -> Option<Project> {
        self.read().get(id).cloned()
    }

    /// The id of the project served with the root `root`, if one is.
    pub fn served_at(&self, root: &Path) -> Option<String> {
        self.read()
            .iter()
            .find(|(_, p)| p.root() == root)
            .map(|(id, _)| id.clone())
    }

    /// Serves `project` as `id` from now on.
    pub fn add(&self, id: String, project: Project) {
        self.write().insert(id, project);
    }

    /// Stops serving `id`; the project it was, if any.
    pub fn remove(&self, id: &str) -> Option<Project> {
        self.write().remove(id)
    }

    /// A host for one operation: this one's projects and sandbox, with `project` served as
    /// `id` in place of any served at its root (a checkout a worktree is made from).
    pub fn with_project(&self, id: &str, project: Project) -> Host {
        let mut projects: BTreeMap<String, Project> = self
            .read()
            .iter()
            .filter(|(_, p)| p.root() != project.root())
            .map(|(id, p)| (id.clone(), p.clone()))
            .collect();
        projects.insert(id.to_owned(), project);
        Host::new(projects, self.sandbox.clone())
    }

    /// The boundary of work in project `id`: its registered root, checked to be that directory
    /// still, with what the sandbox hides from it and what it may write.
    pub fn boundary(&self, id: &str) -> Result<Boundary, confine::CwdError> {
        let projects = self.read();
        let project = projects
            .get(id)
            .ok_or_else(|| confine::CwdError::UnknownProject(id.to_owned()))?;
        confine::check_root(project.root())?;
        let others: Vec<&Project> = projects
            .iter()
            .filter(|(other, _)| *other != id)
            .map(|(_, p)| p)
            .collect();
        Ok(self.sandbox.boundary(project, &others))
    }
}
