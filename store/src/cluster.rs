//! A private PostgreSQL cluster run from the installed server binaries.
//!
//! `wc-local` keeps one under `.wc/postgres/` in its working directory; the test helper keeps a
//! throwaway one when no server answers. The cluster is created with `initdb` on first use
//! (as the `postgres` user when running as root, since `initdb` refuses root), started on a free
//! loopback port with a private socket directory, reused on later starts, and stopped with a
//! fast shutdown. `root/lock` is held while a process owns the cluster.

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
         point WC_PG_BIN at their directory, or set DATABASE_URL / --database-url to an existing server"
    )]
    BinariesNotFound,
    /// Running as root without a `postgres` account to own the cluster.
    #[error(
        "running as root, but there is no `postgres` user to own the cluster (initdb refuses \
         root): create one (`useradd --system postgres`) or set DATABASE_URL / --database-url"
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
        if !data.join("PG_VERSION").is_file() {
            init_data_dir(&bins, root, &data, owner.as_ref()).await?;
        }
        stop_orphan(&data).await;
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
            let mut cmd = tokio::process::Command::new(&bins.postgres);
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
            match wait_ready(port, &mut child).await {
                Ok(()) => {
                    fs::write(root.join("port"), port.to_string())
                        .map_err(io("cannot record the port"))?;
                    return Ok(LocalCluster {
                        root: root.to_owned(),
                        port,
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

    /// URL of database `db` as the superuser `postgres`.
    pub fn url(&self, db: &str) -> DatabaseUrl {
        DatabaseUrl::parse(&format!("postgres://postgres@127.0.0.1:{}/{db}", self.port))
            .expect("well-formed loopback url")
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

async fn init_data_dir(
    bins: &PgBinaries,
    root: &Path,
    data: &Path,
    owner: Option<&User>,
) -> Result<(), ClusterError> {
    // initdb into a scratch directory and rename, so an interrupted run leaves nothing half-made.
    let scratch = root.join("data.init");
    if scratch.exists() {
        fs::remove_dir_all(&scratch).map_err(io("cannot clear a partial initdb"))?;
    }
    let mut cmd = tokio::process::Command::new(&bins.initdb);
    cmd.arg("-D")
        .arg(&scratch)
        .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(user) = owner {
        cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
    }
    let out = cmd.output().await.map_err(io("cannot run initdb"))?;
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
    fs::rename(&scratch, data).map_err(io("cannot move the new cluster into place"))
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

async fn wait_ready(port: u16, child: &mut tokio::process::Child) -> Result<(), ()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut cfg = tokio_postgres::Config::new();
    cfg.host("127.0.0.1")
        .port(port)
        .user("postgres")
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
