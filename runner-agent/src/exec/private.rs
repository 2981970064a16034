//! Private directories for the files the runner hands a job (its script, its input): owner
//! only, and removed with everything in them when dropped.

use std::fs::{DirBuilder, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use uuid::Uuid;

/// A fresh private directory (0700, under the system temporary directory) for the files the
/// runner hands a job, removed with everything in it when dropped. A sandboxed job gets a
/// private `/tmp`, into which its own directory alone is bound read-only
/// ([`Launch::private`](super::Launch::private)).
pub(crate) struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    /// A new directory named `{prefix}-{random}`.
    pub(crate) fn create(prefix: &str) -> io::Result<Self> {
        let path = std::env::temp_dir().join(format!("{prefix}-{}", Uuid::new_v4()));
        // `create`, not `create_all`: a directory that already exists is someone else's.
        DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Self { path })
    }

    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `body` to the new private file (0600) `name` in it; answers its path.
    pub(crate) fn write(&self, name: &str, body: &[u8]) -> io::Result<PathBuf> {
        let path = self.path.join(name);
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?
            .write_all(body)?;
        Ok(path)
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.path.display(), error = %e, "cannot remove a private directory");
        }
    }
}

/// A script body in a private file, removed with its directory when dropped.
pub(super) struct ScriptFile {
    pub(super) dir: PrivateDir,
    pub(super) path: PathBuf,
}

impl ScriptFile {
    pub(super) fn write(body: &str) -> io::Result<Self> {
        let dir = PrivateDir::create("wc-script")?;
        let path = dir.write("script", body.as_bytes())?;
        Ok(Self { dir, path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_files_are_private_and_removed_on_drop() {
        use std::os::unix::fs::PermissionsExt as _;
        let file = ScriptFile::write("echo hi\n").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(file.dir.path()), 0o700);
        assert_eq!(mode(&file.path), 0o600);
        assert_eq!(std::fs::read_to_string(&file.path).unwrap(), "echo hi\n");
        let dir = file.dir.path().to_owned();
        drop(file);
        assert!(!dir.exists());
    }
}
