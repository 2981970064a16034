//! Path confinement: turning a work item's project-relative `cwd` into a directory on this host
//! that lies inside the project's root.
//!
//! The check is made against the real filesystem: the joined path is canonicalized, so a
//! symlink inside the project that points elsewhere resolves to where it points and is refused.
//! Confinement decides only where a command *starts*; what a started command can reach is the
//! sandbox's business ([`crate::sandbox`]).

use std::io;
use std::path::{Path, PathBuf};

use wc_runner_protocol::RelativePath;

/// Why a working directory was refused. The display text is what the work's outcome reports.
#[derive(Debug, thiserror::Error)]
pub enum CwdError {
    /// The project id is not one this runner serves.
    #[error("project {0:?} is not served by this runner")]
    UnknownProject(String),
    /// The project's registered root cannot be resolved any more.
    #[error("the project root {} is unavailable: {source}", root.display())]
    RootUnavailable {
        /// The registered root.
        root: PathBuf,
        /// What resolving it reported.
        source: io::Error,
    },
    /// The project's registered root now resolves to another directory (a component was
    /// replaced by a symlink): nothing runs there until the runner registers it again.
    #[error(
        "the project root {} now leads to {}; it is served only as registered (restart the runner to register it again)",
        root.display(),
        now.display()
    )]
    RootMoved {
        /// The registered root.
        root: PathBuf,
        /// Where its name leads now.
        now: PathBuf,
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

/// Checks that the registered, canonical project `root` is still that directory (its name
/// may have been swapped for a symlink since it was registered).
pub fn check_root(root: &Path) -> Result<(), CwdError> {
    let now = root
        .canonicalize()
        .map_err(|source| CwdError::RootUnavailable {
            root: root.to_owned(),
            source,
        })?;
    if now != root {
        return Err(CwdError::RootMoved {
            root: root.to_owned(),
            now,
        });
    }
    Ok(())
}

/// Resolves the working directory of work in the canonical project `root`: the canonical
/// directory that `cwd` names under it, or the root itself when `cwd` is `None`.
pub fn resolve_cwd(root: &Path, cwd: Option<&RelativePath>) -> Result<PathBuf, CwdError> {
    let Some(cwd) = cwd.map(RelativePath::as_str).filter(|c| !c.is_empty()) else {
        return Ok(root.to_owned());
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
    if !resolved.starts_with(root) {
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
        Fixture { _tmp: tmp, root }
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
                resolve_cwd(&f.root, cwd.as_ref()).unwrap(),
                expect,
                "{cwd:?}"
            );
        }
    }

    #[test]
    fn each_refusal_names_its_reason() {
        let f = fixture();
        let cases: [(&str, &str); 5] = [
            ("missing", "\"missing\" does not exist"),
            ("README", "\"README\" is not a directory"),
            ("out", "cwd escapes the project root"),
            ("src/up", "cwd escapes the project root"),
            ("README/x", "\"README/x\" is not a directory"),
        ];
        for (cwd, expect) in cases {
            let cwd = RelativePath::parse(cwd).unwrap();
            let err = resolve_cwd(&f.root, Some(&cwd)).unwrap_err().to_string();
            assert!(err.contains(expect), "{cwd:?}: {err}");
        }
    }

    #[test]
    fn a_root_that_disappeared_or_now_leads_elsewhere_is_refused() {
        let f = fixture();
        check_root(&f.root).unwrap();
        let moved = f.root.with_file_name("moved");
        std::fs::rename(&f.root, &moved).unwrap();
        let err = check_root(&f.root).unwrap_err();
        assert!(matches!(err, CwdError::RootUnavailable { .. }), "{err}");
        symlink(&moved, &f.root).unwrap();
        let err = check_root(&f.root).unwrap_err();
        assert!(matches!(err, CwdError::RootMoved { .. }), "{err}");
        assert!(err.to_string().contains("now leads to"), "{err}");
    }
}
