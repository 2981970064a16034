//! Where wc-local keeps its state: one directory per working directory, outside every served
//! project, and the one-time move of a `.wc/` an earlier version left in the working directory.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::LocalProject;

/// The state directory wc-local keeps for the working directory `cwd` when none is given:
/// `$XDG_STATE_HOME/wc/<name>-<digest>` (`~/.local/state` when `XDG_STATE_HOME` is unset or
/// not absolute), named after the directory and a digest of its path, so each working
/// directory keeps its own cluster, as its `.wc/` did.
pub fn state_dir(cwd: &Path) -> anyhow::Result<PathBuf> {
    use sha2::{Digest as _, Sha256};
    let base = match std::env::var_os("XDG_STATE_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|h| h.is_absolute())
                .context(
                    "neither XDG_STATE_HOME nor HOME names a directory for wc-local's state; \
                     pass --state-dir DIR",
                )?;
            home.join(".local/state")
        }
    };
    let digest = hex::encode(Sha256::digest(cwd.as_os_str().as_encoded_bytes()));
    let name: String = cwd
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".to_owned())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(16)
        .collect();
    // Short: the embedded cluster's socket lives in it, and a socket's path has at most 107
    // bytes.
    Ok(base.join("wc").join(format!("{name}-{}", &digest[..8])))
}

/// Refuses a state directory inside a served project: that project's jobs and file tools
/// would reach the database's files (its password among them).
pub(crate) fn check_state_dir(state: &Path, projects: &[LocalProject]) -> anyhow::Result<()> {
    let real = canonical_prefix(state);
    for p in projects {
        if real.starts_with(&p.root) {
            bail!(
                "the state directory {} lies inside the served project {} ({}): its jobs and \
                 file tools would reach the embedded database's files; choose --state-dir \
                 outside every project",
                state.display(),
                p.name,
                p.root.display()
            );
        }
    }
    Ok(())
}

/// `path` with its longest existing prefix canonicalized (the rest may not exist yet).
fn canonical_prefix(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path.to_path_buf();
    loop {
        if let Ok(real) = at.canonicalize() {
            return rest.iter().rev().fold(real, |acc, part| acc.join(part));
        }
        match (at.file_name().map(|n| n.to_owned()), at.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                at = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Moves the `.wc/` an earlier version kept in the working directory `cwd` to `state`, once:
/// when it exists and `state` does not. Says so on `out`.
pub(crate) fn move_old_state(cwd: &Path, state: &Path, out: &mut impl Write) -> anyhow::Result<()> {
    let old = cwd.join(".wc");
    if !old.is_dir() || state.exists() {
        return Ok(());
    }
    if let Some(parent) = state.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::rename(&old, state).with_context(|| {
        format!(
            "cannot move wc-local's state from {} to {}; move it yourself (the embedded \
             cluster must be stopped), or pass --state-dir {}",
            old.display(),
            state.display(),
            old.display()
        )
    })?;
    // Its ignore file kept it out of the user's repository; outside it, it is not needed.
    let _ = std::fs::remove_file(state.join(".gitignore"));
    writeln!(
        out,
        "Moved wc-local's state from {} to {} (it no longer lives in the working directory).",
        old.display(),
        state.display()
    )?;
    Ok(())
}
