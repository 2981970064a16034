//! A private PostgreSQL cluster run from the installed server binaries.
//!
//! `wc-local` keeps one under `.wc/postgres/` in its working directory; the test helper keeps a
//! throwaway one when no server answers. The cluster is created with `initdb` on first use
//! (as the `postgres` user when running as root, since `initdb` refuses root), started on a free
//! loopback port with a private socket directory, reused on later starts, and stopped with a
//! fast shutdown. `root/lock` is held while a process owns the cluster.
//!
//! Every connection needs a password (SCRAM-SHA-256), on the loopback port and on the socket
//! alike: jobs share the machine's network, so a cluster open to any local process would hand
//! every tenant's data to any of them. The password is generated at creation and kept in
//! `root/password` (mode 0600, readable by the owner of the process that runs the cluster);
//! a cluster made by an earlier version with trust authentication gets a password and the
//! password-only `pg_hba.conf` on its next start.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, User};
use tokio_postgres::NoTls;

use crate::StoreError;
use crate::config::DatabaseUrl;

/// Why a local cluster could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No `initdb`/`postgres` binaries were found.
    #[error(
        "PostgreSQL server binaries (initdb, postgres) were not found on PATH or under \
         /usr/lib/postgresql/*/bin: install them (Debian/Ubuntu: `apt-get install postgresql`), \
         point WC_PG_BIN at their directory, or set DATABASE_URL (or wc-local --database-url-file) to an existing server"
    )]
    BinariesNotFound,
    /// Running as root without a `postgres` account to own the cluster.
    #[error(
        "running as root, but there is no `postgres` user to own the cluster (initdb refuses \
         root): create one (`useradd --system postgres`) or set DATABASE_URL (or wc-local --database-url-file)"
    )]
    NoPostgresUser,
    /// Another process owns this cluster.
    #[error("another process is already using the cluster at {0}")]
    Busy(PathBuf),
    /// A filesystem or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `initdb` failed.
    #[error("initdb failed for {dir}:\n{output}")]
    InitDb {
        /// Data directory.
        dir: PathBuf,
        /// What initdb printed.
        output: String,
    },
    /// The superuser's password could not be set on an existing cluster.
    #[error("cannot set the cluster's password for {dir}:\n{output}")]
    SetPassword {
        /// Data directory.
        dir: PathBuf,
        /// What the server printed (the password itself removed).
        output: String,
    },
    /// The server did not come up.
    #[error("postgres did not start (log {log}):\n{tail}")]
    Start {
        /// Log file.
        log: PathBuf,
        /// Its last lines.
        tail: String,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClusterError {
    let what = what.into();
    move |source| ClusterError::Io { what, source }
}

/// A command running one of the server binaries with a clean environment: the server's
/// processes are readable through `/proc` by whoever runs them (the `postgres` account, or
/// our own user), so they must not inherit this process's secrets (`WC_LOCAL_TOKEN`,
/// `DATABASE_URL`, cloud credentials). Only the search path, locale and time zone pass.
fn server_command(program: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.env_clear()
        .envs(std::env::vars_os().filter(|(name, _)| {
            let name = name.to_string_lossy();
            matches!(name.as_ref(), "PATH" | "LANG" | "TZ") || name.starts_with("LC_")
        }));
    cmd
}

/// Paths of the server binaries.
#[derive(Debug, Clone)]
pub struct PgBinaries {
    /// `initdb`.
    pub initdb: PathBuf,
    /// `postgres`.
    pub postgres: PathBuf,
}

/// Finds `initdb` and `postgres`: in `WC_PG_BIN` alone when it is set, else on `PATH`, else in
/// the newest `/usr/lib/postgresql/<version>/bin`.
pub fn find_binaries() -> Result<PgBinaries, ClusterError> {
    // An explicit WC_PG_BIN is authoritative: look nowhere else.
    if let Some(dir) = std::env::var_os("WC_PG_BIN") {
        let dir = PathBuf::from(dir);
        return if dir.join("initdb").is_file() && dir.join("postgres").is_file() {
            Ok(PgBinaries {
                initdb: dir.join("initdb"),
                postgres: dir.join("postgres"),
            })
        } else {
            Err(ClusterError::BinariesNotFound)
        };
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    if let Ok(entries) = fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<(u32, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let v = e.file_name().to_str()?.parse::<u32>().ok()?;
                Some((v, e.path().join("bin")))
            })
            .collect();
        versions.sort_by_key(|v| std::cmp::Reverse(v.0));
        dirs.extend(versions.into_iter().map(|(_, p)| p));
    }
    dirs.into_iter()
        .find(|d| d.join("initdb").is_file() && d.join("postgres").is_file())
        .map(|d| PgBinaries {
            initdb: d.join("initdb"),
            postgres: d.join("postgres"),
        })
        .ok_or(ClusterError::BinariesNotFound)
}

/// How to run the cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Ask the kernel to stop the server if this process dies without stopping it.
    pub die_with_parent: bool,
    /// `max_connections` of the server.
    pub max_connections: u32,
    /// Serve TLS with this certificate (`ssl=on`); plain connections stay allowed.
    pub server_tls: Option<ServerTls>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            die_with_parent: true,
            max_connections: 100,
            server_tls: None,
        }
    }
}

/// The certificate a cluster serves TLS with.
#[derive(Clone)]
pub struct ServerTls {
    /// The certificate chain, PEM.
    pub cert_pem: String,
    /// Its private key, PEM.
    pub key_pem: String,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerTls { key_pem: <redacted>, .. }")
    }
}

/// A running cluster owned by this process.
#[derive(Debug)]
pub struct LocalCluster {
    root: PathBuf,
    port: u16,
    password: ClusterPassword,
    child: Option<tokio::process::Child>,
    _lock: File,
}

impl LocalCluster {
    /// Creates the cluster under `root` if needed and starts it.
    pub async fn start(root: &Path, opts: &ClusterOptions) -> Result<LocalCluster, ClusterError> {
        let bins = find_binaries()?;
        let owner = cluster_owner()?;
        fs::create_dir_all(root).map_err(io(format!("cannot create {}", root.display())))?;
        fs::set_permissions(root, fs::Permissions::from_mode(0o700))
            .map_err(io(format!("cannot restrict {}", root.display())))?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(root.join("lock"))
            .map_err(io("cannot open the cluster lock file"))?;
        if lock.try_lock().is_err() {
            return Err(ClusterError::Busy(root.to_owned()));
        }
        let run = root.join("run");
        fs::create_dir_all(&run).map_err(io("cannot create the socket directory"))?;
        if let Some(user) = &owner {
            for p in [root, run.as_path()] {
                nix::unistd::chown(p, Some(user.uid), Some(user.gid)).map_err(|e| {
                    io(format!("cannot hand {} to postgres", p.display()))(e.into())
                })?;
            }
        }
        let data = root.join("data");
        stop_orphan(&data).await;
        let password = if data.join("PG_VERSION").is_file() {
            require_password(&bins, root, &data, owner.as_ref()).await?
        } else {
            init_data_dir(&bins, root, &data, owner.as_ref()).await?
        };
        let tls_settings = match &opts.server_tls {
            Some(tls) => write_server_tls(root, tls, owner.as_ref())?,
            None => Vec::new(),
        };

        let log_path = root.join("postgres.log");
        let mut last_error = None;
        for _ in 0..3 {
            let port = free_port()?;
            let log = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .map_err(io("cannot open the postgres log"))?;
            let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
            let mut cmd = server_command(&bins.postgres);
            cmd.arg("-D")
                .arg(&data)
                .arg("-p")
                .arg(port.to_string())
                .arg("-k")
                .arg(&run)
                .arg("-c")
                .arg("listen_addresses=127.0.0.1")
                .arg("-c")
                .arg(format!("max_connections={}", opts.max_connections))
                .arg("-c")
                .arg("logging_collector=off")
                .args(tls_settings.iter().flat_map(|s| ["-c", s.as_str()]))
                .stdin(Stdio::null())
                .stdout(log.try_clone().map_err(io("cannot share the log"))?)
                .stderr(log)
                // Own process group: a terminal's Ctrl-C reaches wc, which stops the server in order.
                .process_group(0)
                .kill_on_drop(false);
            if let Some(user) = &owner {
                cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
            }
            if opts.die_with_parent {
                // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
                unsafe {
                    cmd.pre_exec(|| {
                        nix::sys::prctl::set_pdeathsig(Signal::SIGINT).map_err(std::io::Error::from)
                    });
                }
            }
            let mut child = cmd.spawn().map_err(io("cannot spawn postgres"))?;
            match wait_ready(port, &password, &mut child).await {
                Ok(()) => {
                    fs::write(root.join("port"), port.to_string())
                        .map_err(io("cannot record the port"))?;
                    return Ok(LocalCluster {
                        root: root.to_owned(),
                        port,
                        password,
                        child: Some(child),
                        _lock: lock,
                    });
                }
                Err(()) => {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                    last_error = Some(ClusterError::Start {
                        log: log_path.clone(),
                        tail: log_tail(&log_path, log_start),
                    });
                }
            }
        }
        Err(last_error.expect("at least one attempt"))
    }

    /// Loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Process id of the postmaster.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(|c| c.id())
    }

    /// Directory holding the cluster.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// URL of database `db` as the superuser `postgres`, with the cluster's password.
    pub fn url(&self, db: &str) -> DatabaseUrl {
        loopback_url(self.port, Some(&self.password), db)
    }

    /// Leaves the server running after this process is done with it.
    pub fn detach(mut self) {
        self.child.take();
    }

    /// Fast shutdown: active sessions are cut and the server exits cleanly.
    pub async fn stop(mut self) -> Result<(), ClusterError> {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id() {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGINT);
            }
            match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
                Ok(status) => {
                    status.map_err(io("cannot wait for postgres"))?;
                }
                Err(_) => {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
            }
        }
        Ok(())
    }
}

/// Writes the certificate and key of `tls` under `root` (the key readable by the server's
/// account alone, as postgres insists) and returns the server settings that use them.
fn write_server_tls(
    root: &Path,
    tls: &ServerTls,
    owner: Option<&User>,
) -> Result<Vec<String>, ClusterError> {
    let cert = root.join("server.crt");
    let key = root.join("server.key");
    for (path, text) in [(&cert, &tls.cert_pem), (&key, &tls.key_pem)] {
        let _ = fs::remove_file(path);
        fs::write(path, text).map_err(io(format!("cannot write {}", path.display())))?;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))
            .map_err(io(format!("cannot restrict {}", path.display())))?;
        if let Some(user) = owner {
            nix::unistd::chown(path.as_path(), Some(user.uid), Some(user.gid))
                .map_err(|e| io(format!("cannot hand {} to postgres", path.display()))(e.into()))?;
        }
    }
    Ok(vec![
        "ssl=on".to_owned(),
        format!("ssl_cert_file={}", cert.display()),
        format!("ssl_key_file={}", key.display()),
    ])
}

/// Where the cluster for `preferred` actually lives.
///
/// Normally `preferred` itself. When running as root in a directory the `postgres` account
/// cannot traverse (a private home, say), the server could not open its own files there, so
/// the cluster lives under `/var/lib/wc-local/<digest of preferred>` and `preferred` becomes a
/// symlink to it: later runs from the same directory reuse it all the same.
pub fn placement(preferred: &Path) -> Result<PathBuf, ClusterError> {
    let Some(owner) = cluster_owner()? else {
        return Ok(preferred.to_owned());
    };
    if let Ok(target) = fs::read_link(preferred) {
        return Ok(target);
    }
    let parent = preferred.parent().unwrap_or(Path::new("/"));
    if can_traverse(parent, &owner) {
        return Ok(preferred.to_owned());
    }
    if preferred.exists() {
        return Err(ClusterError::Io {
            what: format!(
                "{} exists but the postgres user cannot reach it; move it away or set DATABASE_URL",
                preferred.display()
            ),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        });
    }
    use sha2::{Digest, Sha256};
    let digest = hex::encode(Sha256::digest(preferred.as_os_str().as_encoded_bytes()));
    let base = Path::new("/var/lib/wc-local");
    fs::create_dir_all(base).map_err(io(format!("cannot create {}", base.display())))?;
    let target = base.join(&digest[..16]);
    std::os::unix::fs::symlink(&target, preferred).map_err(io(format!(
        "cannot link {} to {}",
        preferred.display(),
        target.display()
    )))?;
    tracing::warn!(
        cluster = %target.display(),
        link = %preferred.display(),
        "the postgres user cannot traverse this directory; keeping the cluster outside it"
    );
    Ok(target)
}

/// Whether `user` has search permission on `dir` and every directory above it.
fn can_traverse(dir: &Path, user: &User) -> bool {
    use std::os::unix::fs::MetadataExt;
    dir.ancestors().all(|d| match fs::metadata(d) {
        Ok(m) => {
            let bit = if m.uid() == user.uid.as_raw() {
                0o100
            } else if m.gid() == user.gid.as_raw() {
                0o010
            } else {
                0o001
            };
            m.mode() & bit != 0
        }
        Err(_) => false,
    })
}

/// The account that must own the cluster: `postgres` when we are root, else ourselves.
fn cluster_owner() -> Result<Option<User>, ClusterError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    match User::from_name("postgres") {
        Ok(Some(user)) => Ok(Some(user)),
        _ => Err(ClusterError::NoPostgresUser),
    }
}

/// Creates the data directory with password authentication, the superuser's password being a
/// fresh one (also kept in `root/password`), and returns that password.
async fn init_data_dir(
    bins: &PgBinaries,
    root: &Path,
    data: &Path,
    owner: Option<&User>,
) -> Result<ClusterPassword, ClusterError> {
    // initdb into a scratch directory and rename, so an interrupted run leaves nothing half-made.
    let scratch = root.join("data.init");
    if scratch.exists() {
        fs::remove_dir_all(&scratch).map_err(io("cannot clear a partial initdb"))?;
    }
    let password = ClusterPassword::load_or_create(root)?;
    // initdb reads the password from a file (never argv); it runs as the cluster's owner, so
    // the file is handed to that account for the moment initdb needs it.
    let pwfile = root.join("password.initdb");
    let _ = fs::remove_file(&pwfile);
    write_private(&pwfile, password.as_str(), owner)?;
    let mut cmd = server_command(&bins.initdb);
    cmd.arg("-D")
        .arg(&scratch)
        .args([
            "-U",
            "postgres",
            "-A",
            "scram-sha-256",
            "-E",
            "UTF8",
            "--no-locale",
        ])
        .arg(format!("--pwfile={}", pwfile.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(user) = owner {
        cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
    }
    let out = cmd.output().await;
    let _ = fs::remove_file(&pwfile);
    let out = out.map_err(io("cannot run initdb"))?;
    if !out.status.success() {
        let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
        output.push_str(&String::from_utf8_lossy(&out.stderr));
        if owner.is_some() && output.contains("ermission denied") {
            output.push_str(&format!(
                "\nhint: the postgres user must be able to reach {}; run from a directory it can \
                 traverse or set DATABASE_URL",
                root.display()
            ));
        }
        return Err(ClusterError::InitDb {
            dir: data.to_owned(),
            output,
        });
    }
    write_hba(&scratch, owner)?;
    fs::rename(&scratch, data).map_err(io("cannot move the new cluster into place"))?;
    Ok(password)
}

/// The client authentication of every cluster: the password, whatever the way in.
const HBA: &str = "\
# Written by wc: every connection needs the superuser's password (kept beside the data
# directory, in ../password). Local processes must not reach the data without it.
local   all   all                  scram-sha-256
host    all   all   127.0.0.1/32   scram-sha-256
host    all   all   ::1/128        scram-sha-256
";

/// Writes [`HBA`] into `data`, owned by the cluster's account.
fn write_hba(data: &Path, owner: Option<&User>) -> Result<(), ClusterError> {
    let path = data.join("pg_hba.conf");
    // Replaced, never rewritten in place: the new file is private from its first byte.
    match fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(format!("cannot replace {}", path.display()))(e)),
    }
    write_private(&path, HBA, owner)
}

/// Makes an existing data directory require the password: when its `pg_hba.conf` is not the
/// password-only one (a cluster made with trust authentication by an earlier version), the
/// superuser's password is set (in single-user mode: no server listens meanwhile) and the file
/// is rewritten. The server is not running: the caller holds the lock and stopped any orphan.
async fn require_password(
    bins: &PgBinaries,
    root: &Path,
    data: &Path,
    owner: Option<&User>,
) -> Result<ClusterPassword, ClusterError> {
    let has_password_file = root.join(PASSWORD_FILE).is_file();
    let password = ClusterPassword::load_or_create(root)?;
    let hba = fs::read_to_string(data.join("pg_hba.conf")).unwrap_or_default();
    if has_password_file && hba == HBA {
        return Ok(password);
    }
    tracing::warn!(
        cluster = %root.display(),
        "this cluster accepted connections without a password; setting one and requiring it"
    );
    let mut cmd = server_command(&bins.postgres);
    cmd.arg("--single")
        .arg("-D")
        .arg(data)
        .args(["-c", "log_statement=none", "postgres"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(user) = owner {
        cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
    }
    let mut child = cmd.spawn().map_err(io("cannot run postgres --single"))?;
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().expect("piped stdin");
        // The password is hex, so it needs no quoting; it travels on stdin, never argv.
        let statement = format!(
            "SET password_encryption = 'scram-sha-256'; ALTER ROLE postgres PASSWORD '{}'\n",
            password.as_str()
        );
        stdin
            .write_all(statement.as_bytes())
            .await
            .map_err(io("cannot talk to postgres --single"))?;
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(io("cannot wait for postgres --single"))?;
    let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
    output.push_str(&String::from_utf8_lossy(&out.stderr));
    if !out.status.success() || output.contains("ERROR:") {
        return Err(ClusterError::SetPassword {
            dir: data.to_owned(),
            output: output.replace(password.as_str(), "<redacted>"),
        });
    }
    write_hba(data, owner)?;
    Ok(password)
}

/// File under the cluster's root holding the superuser's password.
const PASSWORD_FILE: &str = "password";

/// The superuser's password of a local cluster: 256 random bits, hex. Never printed.
#[derive(Clone)]
struct ClusterPassword(String);

impl std::fmt::Debug for ClusterPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterPassword(<redacted>)")
    }
}

impl ClusterPassword {
    /// The password kept in `root/password`, made (mode 0600, our own) when there is none.
    fn load_or_create(root: &Path) -> Result<ClusterPassword, ClusterError> {
        let path = root.join(PASSWORD_FILE);
        match fs::read_to_string(&path) {
            Ok(text) if is_password(text.trim()) => return Ok(ClusterPassword(text.trim().into())),
            Ok(_) => {
                return Err(ClusterError::Io {
                    what: format!(
                        "{} does not hold a cluster password (64 hex digits)",
                        path.display()
                    ),
                    source: std::io::Error::from(std::io::ErrorKind::InvalidData),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(format!("cannot read {}", path.display()))(e)),
        }
        let mut bytes = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut bytes);
        let password = ClusterPassword(hex::encode(bytes));
        // Written under a temporary name and renamed: a crash never leaves half a password.
        let tmp = root.join(format!("{PASSWORD_FILE}.new"));
        let _ = fs::remove_file(&tmp);
        write_private(&tmp, password.as_str(), None)?;
        fs::rename(&tmp, &path).map_err(io(format!("cannot create {}", path.display())))?;
        Ok(password)
    }

    fn as_str(&self) -> &str {
        &self.0
    }
}

fn is_password(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Creates `path` holding `text`, readable by its owner alone (`owner`, else ourselves).
fn write_private(path: &Path, text: &str, owner: Option<&User>) -> Result<(), ClusterError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io(format!("cannot create {}", path.display())))?;
    file.write_all(text.as_bytes())
        .map_err(io(format!("cannot write {}", path.display())))?;
    if let Some(user) = owner {
        nix::unistd::chown(path, Some(user.uid), Some(user.gid))
            .map_err(|e| io(format!("cannot hand {} to postgres", path.display()))(e.into()))?;
    }
    Ok(())
}

/// The loopback URL of database `db` on `port` as the superuser.
fn loopback_url(port: u16, password: Option<&ClusterPassword>, db: &str) -> DatabaseUrl {
    let auth = match password {
        Some(p) => format!("postgres:{}", p.as_str()),
        None => "postgres".to_owned(),
    };
    DatabaseUrl::parse(&format!("postgres://{auth}@127.0.0.1:{port}/{db}"))
        .expect("well-formed loopback url")
}

/// The URL of database `db` of a cluster another process started under `root` (its port and
/// password as recorded there), if it recorded a port.
pub fn recorded_url(root: &Path, db: &str) -> Option<DatabaseUrl> {
    let port = fs::read_to_string(root.join("port"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let password = fs::read_to_string(root.join(PASSWORD_FILE))
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| is_password(t))
        .map(ClusterPassword);
    Some(loopback_url(port, password.as_ref(), db))
}

/// Stops a server left running on `data` by a process that died without stopping it. The
/// caller holds the cluster lock, so no live owner can be using it.
async fn stop_orphan(data: &Path) {
    let Ok(pidfile) = fs::read_to_string(data.join("postmaster.pid")) else {
        return;
    };
    let Some(pid) = pidfile
        .lines()
        .next()
        .and_then(|l| l.trim().parse::<i32>().ok())
    else {
        return;
    };
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if !String::from_utf8_lossy(&cmdline).contains("postgres") {
        return;
    }
    let pid = Pid::from_raw(pid);
    tracing::warn!(
        pid = pid.as_raw(),
        "stopping a postgres left running by an earlier run"
    );
    let _ = kill(pid, Signal::SIGINT);
    let deadline = Instant::now() + Duration::from_secs(30);
    while kill(pid, None).is_ok() {
        if Instant::now() > deadline {
            let _ = kill(pid, Signal::SIGKILL);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn free_port() -> Result<u16, ClusterError> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(io("cannot find a free port"))?;
    Ok(listener
        .local_addr()
        .map_err(io("cannot read the free port"))?
        .port())
}

async fn wait_ready(
    port: u16,
    password: &ClusterPassword,
    child: &mut tokio::process::Child,
) -> Result<(), ()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut cfg = tokio_postgres::Config::new();
    cfg.host("127.0.0.1")
        .port(port)
        .user("postgres")
        .password(password.as_str())
        .dbname("postgres")
        .connect_timeout(Duration::from_secs(2));
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return Err(());
        }
        if let Ok((client, conn)) = cfg.connect(NoTls).await {
            let task = tokio::spawn(conn);
            let ok = client.simple_query("SELECT 1").await.is_ok();
            drop(client);
            let _ = task.await;
            if ok {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(())
}

fn log_tail(path: &Path, from: u64) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.seek(SeekFrom::Start(from));
        let _ = f.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Creates database `name` on the server behind `admin` unless it exists.
pub async fn ensure_database(admin: &DatabaseUrl, name: &str) -> Result<(), StoreError> {
    let (client, conn) = admin.pg_config().connect(NoTls).await?;
    let task = tokio::spawn(conn);
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await?
        .is_some();
    if !exists {
        let ident = name.replace('"', "\"\"");
        match client
            .batch_execute(&format!("CREATE DATABASE \"{ident}\""))
            .await
        {
            Ok(()) => {}
            // Someone else created it between our check and our create: fine.
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_DATABASE) => {}
            Err(e) => return Err(e.into()),
        }
    }
    drop(client);
    let _ = task.await;
    Ok(())
}
