//! Path confinement: turning a work item's project-relative `cwd` into a directory on this host
//! that lies inside the project's root.
//!
//! The check is made against the real filesystem: the joined path is canonicalized, so a
//! symlink inside the project that points elsewhere resolves to where it points and is refused.
//! Confinement decides only where a command *starts*; what a started command can reach is the
//! sandbox's business ([`crate::sandbox`]).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use wc_runner_protocol::RelativePath;

/// Why a working directory was refused. The display text is what the work's outcome reports.
#[derive(Debug, thiserror::Error)]
pub enum CwdError {
    /// The project id is not one this runner serves.
    #[error("project {0:?} is not served by this runner")]
    UnknownProject(String),
    /// The project's configured root cannot be resolved any more.
    #[error("the project root {} is unavailable: {source}", root.display())]
    RootUnavailable {
        /// The configured root.
        root: PathBuf,
        /// What resolving it reported.
        source: io::Error,
    },
    /// Nothing exists at the path.
    #[error("cwd {0:?} does not exist in the project")]
    Missing(String),
    /// The path exists but is not a directory.
    #[error("cwd {0:?} is not a directory")]
    NotADirectory(String),
    /// The path resolves (through a symlink) to somewhere outside the root.
    #[error("cwd escapes the project root")]
    Escapes,
    /// The path could not be resolved for another reason (permissions, a loop of symlinks, …).
    #[error("cwd {cwd:?} cannot be resolved: {source}")]
    Unresolvable {
        /// The requested cwd.
        cwd: String,
        /// What resolving it reported.
        source: io::Error,
    },
}

/// The canonical project root of `project` and the working directory `cwd` names under it
/// ([`resolve_cwd`] of each): what a job is confined to and where it starts.
pub fn resolve_root_and_cwd(
    projects: &BTreeMap<String, PathBuf>,
    project: &str,
    cwd: Option<&RelativePath>,
) -> Result<(PathBuf, PathBuf), CwdError> {
    Ok((
        resolve_cwd(projects, project, None)?,
        resolve_cwd(projects, project, cwd)?,
    ))
}

/// Resolves the working directory of work in `project`: the canonical directory that `cwd`
/// names under the project root, or the root itself when `cwd` is `None`.
///
/// `projects` maps runner-local project ids to their roots. The root is canonicalized again
/// here so that a root replaced since the configuration was loaded is still judged by what it
/// is now.
pub fn resolve_cwd(
    projects: &BTreeMap<String, PathBuf>,
    project: &str,
    cwd: Option<&RelativePath>,
) -> Result<PathBuf, CwdError> {
    let configured = projects
        .get(project)
        .ok_or_else(|| CwdError::UnknownProject(project.to_owned()))?;
    let root = configured
        .canonicalize()
        .map_err(|source| CwdError::RootUnavailable {
            root: configured.clone(),
            source,
        })?;
    let Some(cwd) = cwd.map(RelativePath::as_str).filter(|c| !c.is_empty()) else {
        return Ok(root);
    };
    // A `RelativePath` is never absolute and has no `..` segment, so joining it cannot leave
    // the root lexically; symlinks are caught below, on the canonical path.
    let relative = Path::new(cwd);
    let resolved = match root.join(relative).canonicalize() {
        Ok(resolved) => resolved,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(CwdError::Missing(cwd.to_owned()));
        }
        Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
            return Err(CwdError::NotADirectory(cwd.to_owned()));
        }
        Err(source) => {
            return Err(CwdError::Unresolvable {
                cwd: cwd.to_owned(),
                source,
            });
        }
    };
    // Containment is judged first, so a path outside the root is reported as an escape whatever
    // kind of file it is.
    if !resolved.starts_with(&root) {
        return Err(CwdError::Escapes);
    }
    if !resolved.is_dir() {
        return Err(CwdError::NotADirectory(cwd.to_owned()));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _tmp: tempfile::TempDir,
        root: PathBuf,
        projects: BTreeMap<String, PathBuf>,
    }

    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("README"), "x").unwrap();
        symlink(&outside, root.join("out")).unwrap();
        symlink(root.join("src"), root.join("src-link")).unwrap();
        symlink("../../outside", root.join("src/up")).unwrap();
        let projects = BTreeMap::from([("web".to_owned(), root.clone())]);
        Fixture {
            _tmp: tmp,
            root,
            projects,
        }
    }

    #[test]
    fn directories_inside_the_root_resolve_to_their_canonical_path() {
        let f = fixture();
        let cases = [
            (None, f.root.clone()),
            (Some("."), f.root.clone()),
            (Some("src"), f.root.join("src")),
            (Some("./src/deep/"), f.root.join("src/deep")),
            (Some("src-link/deep"), f.root.join("src/deep")),
        ];
        for (cwd, expect) in cases {
            let cwd = cwd.map(|c| RelativePath::parse(c).unwrap());
            assert_eq!(
                resolve_cwd(&f.projects, "web", cwd.as_ref()).unwrap(),
                expect,
                "{cwd:?}"
            );
        }
    }

    #[test]
    fn each_refusal_names_its_reason() {
        let f = fixture();
        let cases: [(&str, Option<&str>, &str); 6] = [
            ("api", None, "project \"api\" is not served"),
            ("web", Some("missing"), "\"missing\" does not exist"),
            ("web", Some("README"), "\"README\" is not a directory"),
            ("web", Some("out"), "cwd escapes the project root"),
            ("web", Some("src/up"), "cwd escapes the project root"),
            ("web", Some("README/x"), "\"README/x\" is not a directory"),
        ];
        for (project, cwd, expect) in cases {
            let cwd = cwd.map(|c| RelativePath::parse(c).unwrap());
            let err = resolve_cwd(&f.projects, project, cwd.as_ref())
                .unwrap_err()
                .to_string();
            assert!(err.contains(expect), "{project} {cwd:?}: {err}");
        }
    }

    #[test]
    fn a_root_that_disappeared_is_refused() {
        let f = fixture();
        std::fs::remove_dir_all(&f.root).unwrap();
        let err = resolve_cwd(&f.projects, "web", None).unwrap_err();
        assert!(matches!(err, CwdError::RootUnavailable { .. }), "{err}");
    }
}
