//! The secrets wc-local is given — the shared key and the database URL — from the environment
//! or from files, never from argv; where each came from is printed, never its value.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::LocalCli;

/// Where a secret given to wc-local came from (it is never printed; its source is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SecretSource {
    /// An environment variable.
    Env(&'static str),
    /// A file named by a flag.
    File(&'static str, PathBuf),
}

impl std::fmt::Display for SecretSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretSource::Env(var) => write!(f, "{var}"),
            SecretSource::File(flag, path) => write!(f, "{flag} {}", path.display()),
        }
    }
}

/// The secret named by the file flag `flag` or the environment variable `var` (one of them at
/// most). `in_argv` is the refused value-taking flag `refused`, if it was used.
fn given_secret(
    in_argv: bool,
    refused: &str,
    flag: &'static str,
    file: Option<&Path>,
    var: &'static str,
) -> anyhow::Result<Option<(String, SecretSource)>> {
    if in_argv {
        bail!(
            "{refused} VALUE is not accepted: a value on the command line is readable by every \
             local user (/proc/PID/cmdline); put it in a file only you can read and pass \
             {flag} PATH, or set {var}"
        );
    }
    let from_env = match std::env::var(var) {
        Ok(v) if v.trim().is_empty() => None,
        Ok(v) => Some(v),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => bail!("{var} is not valid UTF-8"),
    };
    match (file, from_env) {
        (Some(path), Some(_)) => bail!(
            "both {var} and {flag} {} are given: give one",
            path.display()
        ),
        (Some(path), None) => Ok(Some((
            read_secret_file(flag, path)?,
            SecretSource::File(flag, path.to_owned()),
        ))),
        (None, Some(v)) => Ok(Some((v, SecretSource::Env(var)))),
        (None, None) => Ok(None),
    }
}

/// The first line of the secret file `path`, refused when every local user may read it.
fn read_secret_file(flag: &str, path: &Path) -> anyhow::Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)
        .with_context(|| format!("{flag} {}: cannot read", path.display()))?;
    if meta.permissions().mode() & 0o007 != 0 {
        bail!(
            "{flag} {}: the file is accessible to every local user; restrict it (chmod 600)",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{flag} {}: cannot read", path.display()))?;
    let secret = text.lines().next().unwrap_or_default().trim();
    if secret.is_empty() {
        bail!("{flag} {}: the file is empty", path.display());
    }
    Ok(secret.to_owned())
}

/// The token the operator gave, if any.
pub(crate) fn given_token(cli: &LocalCli) -> anyhow::Result<Option<(String, SecretSource)>> {
    given_secret(
        cli.token_in_argv.is_some(),
        "--token",
        "--token-file",
        cli.token_file.as_deref(),
        "WC_LOCAL_TOKEN",
    )
}

/// The database URL the operator gave, if any.
pub(crate) fn given_database_url(cli: &LocalCli) -> anyhow::Result<Option<(String, SecretSource)>> {
    given_secret(
        cli.database_url_in_argv.is_some(),
        "--database-url",
        "--database-url-file",
        cli.database_url_file.as_deref(),
        "DATABASE_URL",
    )
}
