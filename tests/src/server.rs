//! A `wc-local` process under test.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How to start `wc-local`.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Working directory.
    pub cwd: PathBuf,
    /// `--state-dir` (where the embedded cluster lives); `None` leaves wc-local its default.
    pub state_dir: Option<PathBuf>,
    /// `DATABASE_URL` (secrets go in the environment, never argv); `None` means the embedded
    /// cluster (and an inherited `DATABASE_URL` is removed).
    pub database_url: Option<String>,
    /// `WC_LOCAL_TOKEN`; `None` lets wc-local generate one.
    pub token: Option<String>,
    /// Give the database URL and the token as files (`--database-url-file`, `--token-file`,
    /// mode 0600 in `cwd`) instead of the environment.
    pub secrets_in_files: bool,
    /// Extra arguments.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
}

impl LocalOptions {
    /// Defaults: embedded cluster in `cwd/.wc`, generated token.
    pub fn in_dir(cwd: impl Into<PathBuf>) -> Self {
        let cwd = cwd.into();
        Self {
            state_dir: Some(cwd.join(".wc")),
            cwd,
            database_url: None,
            token: None,
            secrets_in_files: false,
            args: Vec::new(),
            env: Vec::new(),
        }
    }
}

/// A running `wc-local`; killed if dropped while running.
pub struct LocalServer {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
    /// The bearer token it accepts.
    pub token: String,
    /// Everything it printed on stdout until ready.
    pub banner: String,
    /// File receiving its stderr (the JSON logs).
    pub log_path: PathBuf,
}

impl LocalServer {
    /// Starts `bin` and waits (up to 120 s) for its ready banner.
    pub fn spawn(bin: &Path, opts: &LocalOptions) -> anyhow::Result<LocalServer> {
        std::fs::create_dir_all(&opts.cwd)?;
        let log_path = opts
            .cwd
            .join(format!("wc-local-{}.log", uuid::Uuid::new_v4().simple()));
        let log = std::fs::File::create(&log_path)?;
        // The child runs elsewhere: a relative binary path must not be resolved from there.
        let bin = std::fs::canonicalize(bin)?;
        let mut cmd = Command::new(&bin);
        cmd.current_dir(&opts.cwd)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .args(&opts.args)
            .args(
                opts.state_dir
                    .iter()
                    .flat_map(|d| [std::ffi::OsStr::new("--state-dir"), d.as_os_str()]),
            )
            .env_remove("DATABASE_URL")
            .env_remove("WC_LOCAL_TOKEN")
            .envs(opts.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        for (secret, var, flag) in [
            (&opts.database_url, "DATABASE_URL", "--database-url-file"),
            (&opts.token, "WC_LOCAL_TOKEN", "--token-file"),
        ] {
            let Some(value) = secret else { continue };
            if opts.secrets_in_files {
                let path = opts.cwd.join(format!(
                    "{}-{}",
                    var.to_lowercase(),
                    uuid::Uuid::new_v4().simple()
                ));
                private_file(&path, value)?;
                cmd.arg(flag).arg(path);
            } else {
                cmd.env(var, value);
            }
        }
        let mut child = cmd.spawn()?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut banner = String::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    banner.push_str(&line);
                    banner.push('\n');
                    if line.starts_with("Press Ctrl-C") {
                        break;
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let status = child.wait()?;
                    let logs = std::fs::read_to_string(&log_path).unwrap_or_default();
                    anyhow::bail!(
                        "wc-local did not become ready ({status}); stdout:\n{banner}\nstderr:\n{logs}"
                    );
                }
            }
        }
        let base_url = field(&banner, "Health:")
            .and_then(|h| h.strip_suffix("/healthz").map(str::to_owned))
            .ok_or_else(|| anyhow::anyhow!("no health URL in banner:\n{banner}"))?;
        let token = match &opts.token {
            Some(t) => t.clone(),
            None => field(&banner, "Token:")
                .and_then(|t| t.split_whitespace().next().map(str::to_owned))
                .ok_or_else(|| anyhow::anyhow!("no token in banner:\n{banner}"))?,
        };
        Ok(LocalServer {
            child,
            base_url,
            token,
            banner,
            log_path,
        })
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The JSON logs written so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Sends SIGINT (Ctrl-C) and waits up to 60 s for a clean exit.
    pub fn interrupt(mut self) -> anyhow::Result<ExitStatus> {
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGINT)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                anyhow::bail!("wc-local did not exit within 60 s of SIGINT");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGINT);
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Writes `text` to a new file at `path` readable by its owner alone.
fn private_file(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?
        .write_all(format!("{text}\n").as_bytes())
}

fn field<'a>(banner: &'a str, label: &str) -> Option<&'a str> {
    banner
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .map(str::trim)
}

/// Whether a process with this pid exists.
pub fn process_alive(pid: i32) -> bool {
    kill(Pid::from_raw(pid), None).is_ok()
}

/// The workspace binary `name` (`wc-local`, `wc-runner`), from the target directory of the
/// test executable calling this. Cargo builds only a package's own binaries for its tests, so
/// the tests of `wc-functions` find the binaries of `wc-local` and `wc-runner-agent` here:
/// build the workspace first (`cargo build --workspace`; `cargo nextest run --workspace` does),
/// or they run whatever binary an earlier build left.
///
/// # Panics
///
/// When the binary is not there, naming the build that makes it.
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    // Test executables live in `target/<profile>/deps/`, binaries one level up.
    let dir = exe.parent().expect("the test executable's directory");
    let dir = if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent().expect("the profile directory")
    } else {
        dir
    };
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "{} is missing; build the workspace first: cargo build --workspace",
        bin.display()
    );
    bin
}
