//! The host: the projects it serves, each under its runner-local id, and the sandbox their
//! jobs run in. A project's boundary is built only while its root is still the directory
//! registered.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use crate::boundary::{Boundary, Project};
use crate::config::RunnerConfig;
use crate::confine;
use crate::sandbox::Sandbox;

/// What every execution on this host shares: the projects it serves and the sandbox they run
/// in.
#[derive(Debug, Clone)]
pub struct Host {
    /// Runner-local project id → the project as registered.
    projects: BTreeMap<String, Project>,
    /// How jobs are confined.
    pub sandbox: Sandbox,
}

impl Host {
    /// A host serving `projects` in `sandbox`.
    pub fn new(projects: impl IntoIterator<Item = (String, Project)>, sandbox: Sandbox) -> Self {
        Self {
            projects: projects.into_iter().collect(),
            sandbox,
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

    /// The host a runner configuration describes.
    pub fn from_config(cfg: &RunnerConfig) -> Self {
        Self::new(cfg.projects.clone(), cfg.sandbox.clone())
    }

    /// The ids of the projects served.
    pub fn project_ids(&self) -> impl Iterator<Item = &str> {
        self.projects.keys().map(String::as_str)
    }

    /// The project served as `id`.
    pub fn project(&self, id: &str) -> Option<&Project> {
        self.projects.get(id)
    }

    /// The boundary of work in project `id`: its registered root, checked to be that directory
    /// still, with what the sandbox hides from it and what it may write.
    pub fn boundary(&self, id: &str) -> Result<Boundary, confine::CwdError> {
        let project = self
            .projects
            .get(id)
            .ok_or_else(|| confine::CwdError::UnknownProject(id.to_owned()))?;
        confine::check_root(project.root())?;
        let others: Vec<&Project> = self
            .projects
            .iter()
            .filter(|(other, _)| *other != id)
            .map(|(_, p)| p)
            .collect();
        Ok(self.sandbox.boundary(project, &others))
    }
}
