//! Jobs against the host: a job hunting for the control plane's secrets finds none, and a job's
//! detached daemons die with it on stop, on timeout and when its runner is killed. Real router,
//! real runner (in-process, and the `wc-runner` binary as a process), real bubblewrap.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use uuid::Uuid;
use wc_functions::AppState;
use wc_store::testing::TestDatabase;

use crate::common::*;

/// The project every test runs in.
const P: &str = "agent:local:alpha";

/// `POST /api/actions/{tool}` with `key`; the response body.
async fn call(st: &AppState, key: &str, tool: &str, args: Value) -> Value {
    action(st, key, tool, args).await.body
}

/// A `wc-runner` process serving project `alpha`; SIGKILLed when dropped.
struct RunnerProcess {
    child: std::process::Child,
    _dir: tempfile::TempDir,
    token_file: PathBuf,
    config: PathBuf,
}

impl RunnerProcess {
    /// Registers runner `local` and starts `wc-runner` against `base_url` with `env` set in its
    /// environment and `extra` appended to its configuration file.
    async fn start(
        db: &TestDatabase,
        base_url: &str,
        root: &Path,
        env: &[(&str, &str)],
        extra: &str,
    ) -> (RunnerProcess, String) {
        Self::start_in(db, base_url, root, env, extra, None).await
    }

    /// Like [`RunnerProcess::start`], the runner joining the cgroup v2 directory `cgroup`
    /// before it runs (so the job cgroups it makes, and sweeps, are its own).
    async fn start_in(
        db: &TestDatabase,
        base_url: &str,
        root: &Path,
        env: &[(&str, &str)],
        extra: &str,
        cgroup: Option<&TestCgroup>,
    ) -> (RunnerProcess, String) {
        let secret = runner_token(db, "local").await;
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("runner.token");
        std::fs::write(&token_file, &secret).unwrap();
        let config = dir.path().join("runner.toml");
        std::fs::write(
            &config,
            format!(
                "server_url = {base_url:?}\nclient_id = \"local\"\ntoken_file = {:?}\n\
                 [projects]\nalpha = {:?}\n{extra}",
                token_file.display().to_string(),
                root.display().to_string(),
            ),
        )
        .unwrap();
        let bin = wc_e2e::server::workspace_binary("wc-runner");
        let before = registered_instance(db, "local").await;
        let mut command = std::process::Command::new(bin);
        command
            .arg("--config")
            .arg(&config)
            .env_remove("WC_RUNNER_TOKEN")
            .env("WC_RUNNER_LOG", "warn")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null());
        if let Some(cgroup) = cgroup {
            use std::os::unix::process::CommandExt as _;
            let procs = std::os::fd::AsRawFd::as_raw_fd(&cgroup.procs);
            // SAFETY: between fork and exec the child only writes to an open descriptor.
            unsafe {
                command.pre_exec(move || {
                    let fd = std::os::fd::BorrowedFd::borrow_raw(procs);
                    nix::unistd::write(fd, b"0")?;
                    Ok(())
                });
            }
        }
        let child = command.spawn().expect("start wc-runner");
        let process = RunnerProcess {
            child,
            _dir: dir,
            token_file,
            config,
        };
        await_registration(db, "local", before).await;
        (process, secret)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RunnerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A database with project P, served over TCP, and a key.
async fn server() -> (TestDatabase, AppState, String, String) {
    let app = TestApp::with_projects(&[P]).await;
    let base_url = app.serve().await;
    let TestApp { db, st, key } = app;
    (db, st, key, base_url)
}

/// A shell command that looks for secrets everywhere a job could: its environment, every
/// readable `/proc/*/environ` and `/proc/*/cmdline` (keeping the lines that look like secrets),
/// and the runner's own files. It starts a child carrying `HUNT_SELF` first, so a working hunt
/// always finds that one.
fn hunt(files: &[&Path]) -> String {
    let files: Vec<String> = files.iter().map(|f| format!("'{}'", f.display())).collect();
    let wanted = "-e DATABASE_URL -e TOKEN -e WEBHOOK -e DB_CONN -e NPM_AUTH -e HUNT_SELF \
                  -e postgres: -e wcrk_ -e secret";
    format!(
        "HUNT_SELF=seen-by-the-hunt sleep 3 & sleep 0.2; \
         echo hunt-start; env | grep {wanted}; \
         for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do \
           tr '\\0' '\\n' < \"$f\" 2>/dev/null | grep -a {wanted}; done; \
         echo procs=$(ls -d /proc/[0-9]* | wc -l); \
         for f in {}; do echo \"file $f:\"; cat \"$f\" 2>&1; echo; done; \
         echo hunt-end",
        files.join(" ")
    )
}

#[tokio::test]
async fn a_job_hunting_for_the_runners_and_servers_secrets_finds_none() {
    let (db, st, key, base_url) = server().await;
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let tag = Uuid::new_v4().simple().to_string();
    let database_url = format!("postgres://wc:db-secret-{tag}@127.0.0.1:5432/wc");
    let local_token = format!("wclocal-secret-{tag}");
    let webhook = format!("https://hooks.slack.com/services/T0/B0/slack-secret-{tag}");
    let secrets_env = [
        ("DATABASE_URL", database_url.as_str()),
        ("WC_LOCAL_TOKEN", local_token.as_str()),
        ("SLACK_WEBHOOK_URL", webhook.as_str()),
        ("DB_CONN", database_url.as_str()),
        ("NPM_AUTH", local_token.as_str()),
    ];

    for sandboxed in [true, false] {
        let extra = if sandboxed {
            ""
        } else {
            "[sandbox]\nmode = \"off\"\n"
        };
        let (runner, runner_token) =
            RunnerProcess::start(&db, &base_url, &root_path, &secrets_env, extra).await;
        let command = hunt(&[&runner.token_file, &runner.config]);
        let r = call(
            &st,
            &key,
            "run_shell",
            json!({ "project": P, "command": command, "timeout_ms": 20_000 }),
        )
        .await;
        let out = output(&r)["stdout"].as_str().unwrap_or_default().to_owned();
        // The hunt ran to its end and could read process environments: it found its own child.
        assert!(
            out.contains("hunt-start") && out.contains("hunt-end"),
            "sandboxed={sandboxed}: the hunt did not run: {r}"
        );
        assert!(
            out.contains("HUNT_SELF=seen-by-the-hunt"),
            "sandboxed={sandboxed}: the hunt cannot read /proc/*/environ: {out}"
        );
        let found: Vec<&str> = [
            database_url.as_str(),
            local_token.as_str(),
            webhook.as_str(),
            runner_token.as_str(),
        ]
        .into_iter()
        .filter(|s| out.contains(*s))
        .collect();
        if sandboxed {
            assert!(found.is_empty(), "the sandboxed job found {found:?}: {out}");
            let procs: usize = out
                .lines()
                .find_map(|l| l.strip_prefix("procs="))
                .and_then(|n| n.parse().ok())
                .unwrap();
            assert!(procs <= 8, "the sandboxed job sees {procs} processes");
        } else {
            // The control: unsandboxed, the same hunt reads the runner's environment through
            // /proc and its token file, so the assertions above can fail.
            assert!(
                found.contains(&database_url.as_str()) && found.contains(&runner_token.as_str()),
                "the unsandboxed control found only {found:?}: {out}"
            );
        }
        drop(runner);
    }
}

/// Host pids of live processes whose command line contains `marker`.
fn marked(marker: &str) -> Vec<i32> {
    live_processes(|cmdline| {
        cmdline
            .windows(marker.len())
            .any(|w| w == marker.as_bytes())
    })
}

/// Live processes that have `name` as one whole argument (a daemon's `$0`). Unlike [`marked`],
/// this does not find the job's shell or its sandbox, whose command text merely contains it.
fn running_as(name: &str) -> Vec<i32> {
    live_processes(|cmdline| cmdline.split(|b| *b == 0).any(|arg| arg == name.as_bytes()))
}

/// Live (not zombie) processes whose NUL-separated command line satisfies `matches`.
fn live_processes(matches: impl Fn(&[u8]) -> bool) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let live = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .is_some_and(|state| state != "Z" && state != "X")
            });
            live && matches(&cmdline)
        })
        .collect()
}

/// A command that leaves two daemons ignoring SIGINT and SIGTERM, both marked with `marker` in
/// their command lines: one that called `setsid`, one double-forked away from the job. Each
/// ignores the signals before it execs the shell that carries the marker (ignored signals stay
/// ignored across exec), so a daemon found by its marker can only end by SIGKILL.
fn daemons(marker: &str) -> String {
    format!(
        "setsid sh -c 'trap \"\" INT TERM; exec sh -c \"while :; do sleep 0.1; done\" {marker}-setsid' & \
         sh -c \"(trap '' INT TERM; exec sh -c 'while :; do sleep 0.1; done' {marker}-forked) &\"; \
         sleep 30"
    )
}

async fn await_daemons(marker: &str) {
    // The daemons run as their own markers: the sandbox and the job's shell carry both in their
    // command text too, and are there before any daemon is.
    let (setsid, forked) = (format!("{marker}-setsid"), format!("{marker}-forked"));
    eventually(&format!("the daemons {marker} start"), async || {
        (!running_as(&setsid).is_empty() && !running_as(&forked).is_empty()).then_some(())
    })
    .await;
}

/// Starts a job leaving [`daemons`] marked `marker` and waits until both run; the job's id.
async fn start_daemons(st: &AppState, key: &str, marker: &str) -> String {
    let r = call(
        st,
        key,
        "run_job",
        json!({ "project": P, "command": daemons(marker) }),
    )
    .await;
    let job_id = output(&r)["job_id"].as_str().expect("a job id").to_owned();
    await_daemons(marker).await;
    job_id
}

/// Waits until no process marked `marker` runs; the daemons loop forever, so only a kill ends
/// them.
async fn assert_daemons_die(marker: &str, when: &str) {
    eventually(&format!("{when}: the daemons {marker} die"), async || {
        marked(marker).is_empty().then_some(())
    })
    .await;
}

#[tokio::test]
async fn detached_daemons_die_when_their_job_is_stopped_or_times_out() {
    let (db, st, key, base_url) = server().await;
    let root = tempfile::tempdir().unwrap();
    let _runner = TestRunner::start_at(&db, &base_url, "local", &[("alpha", root.path())]).await;

    let marker = format!("wc-stop-{}", Uuid::new_v4().simple());
    let job_id = start_daemons(&st, &key, &marker).await;
    let r = call(&st, &key, "stop_job", json!({ "job_id": job_id })).await;
    assert_eq!(output(&r)["stop_requested"], true, "{r}");
    assert_daemons_die(&marker, "stop_job").await;

    let marker = format!("wc-timeout-{}", Uuid::new_v4().simple());
    let r = call(
        &st,
        &key,
        "run_shell",
        json!({ "project": P, "command": daemons(&marker), "timeout_ms": 2000 }),
    )
    .await;
    assert_eq!(kind(&r), "timed_out", "{r}");
    // A timeout is a failure whose output still says how the run ended.
    assert_eq!(r["output"]["execution_state"], "timed_out", "{r}");
    assert_daemons_die(&marker, "timeout").await;
}

#[tokio::test]
async fn detached_daemons_die_when_their_runner_is_killed() {
    let (db, st, key, base_url) = server().await;
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let (mut runner, _) = RunnerProcess::start(&db, &base_url, &root_path, &[], "").await;
    let marker = format!("wc-kill9-{}", Uuid::new_v4().simple());
    start_daemons(&st, &key, &marker).await;
    runner.kill();
    assert_daemons_die(&marker, "runner SIGKILL").await;
}

/// A cgroup v2 directory of this test's own, below this process's cgroup: runners started in it
/// keep their job cgroups there, out of reach of the sweeps of runners other tests start.
struct TestCgroup {
    dir: PathBuf,
    procs: std::fs::File,
}

impl TestCgroup {
    fn create() -> TestCgroup {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mount = mountinfo
            .lines()
            .find_map(|line| {
                let (left, right) = line.split_once(" - ")?;
                (right.split_whitespace().next()? == "cgroup2")
                    .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
            })
            .expect("a cgroup2 mount");
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let own = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap()
            .trim_start_matches('/');
        let dir = mount
            .join(own)
            .join(format!("wc-test-{}", Uuid::new_v4().simple()));
        std::fs::create_dir(&dir).unwrap();
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .unwrap();
        TestCgroup { dir, procs }
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
        for _ in 0..100 {
            let children: Vec<PathBuf> = std::fs::read_dir(&self.dir)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.path())
                        .filter(|p| p.is_dir())
                        .collect()
                })
                .unwrap_or_default();
            for child in children {
                let _ = std::fs::remove_dir(child);
            }
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[tokio::test]
async fn unsandboxed_daemons_outlive_a_killed_runner_until_the_next_one_starts() {
    let (db, st, key, base_url) = server().await;
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let off = "[sandbox]\nmode = \"off\"\n";
    let cgroup = TestCgroup::create();
    let (mut runner, _) =
        RunnerProcess::start_in(&db, &base_url, &root_path, &[], off, Some(&cgroup)).await;
    let marker = format!("wc-kill9-off-{}", Uuid::new_v4().simple());
    start_daemons(&st, &key, &marker).await;
    runner.kill();
    // Without the sandbox only the job's leader has a death signal: the detached daemons run on
    // (this is what the sandboxed test above would see without its PID namespace)… Once the
    // leader's death signal has taken it, only the two daemons carry the marker.
    eventually("the job's leader dies with the runner", async || {
        (marked(&marker).len() <= 2).then_some(())
    })
    .await;
    assert_eq!(marked(&marker).len(), 2, "the daemons died with the runner");
    // …until the next runner starts and kills the cgroup the dead runner left behind.
    let (mut next, _) =
        RunnerProcess::start_in(&db, &base_url, &root_path, &[], off, Some(&cgroup)).await;
    assert_daemons_die(&marker, "the next runner's sweep").await;
    next.kill();
}

/// `wc-local` serving its own working directory as a project, its token in a file inside that
/// project, its state directory beside it, a webhook in its environment, and an operator whose
/// home holds an SSH key and cloud credentials: a job of its embedded runner finds none of
/// them, and the file tools refuse the token file with `path_hidden` and never list or search
/// it. With `--no-sandbox` the same job reads them all (the control, so the check can fail);
/// the file tools refuse all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wc_local_job_sees_neither_its_secrets_nor_the_operators() {
    use wc_e2e::client::Client;
    use wc_e2e::server::{LocalOptions, LocalServer, workspace_binary};

    let tag = Uuid::new_v4().simple().to_string();
    let token = format!("wclocal-secret-token-{tag}");
    let cluster_secret = format!("cluster-secret-{tag}");
    let webhook = format!("https://hooks.slack.com/services/T0/B0/webhook-{tag}");
    let ssh_key = format!("ssh-secret-key-{tag}");
    let aws_key = format!("aws-secret-key-{tag}");
    for sandboxed in [true, false] {
        let db = TestDatabase::empty().await;
        let base = std::env::temp_dir().join(format!("wc-adversarial-{}", Uuid::new_v4().simple()));
        let (site, state, home) = (base.join("site"), base.join("state"), base.join("home"));
        std::fs::create_dir_all(state.join("postgres")).unwrap();
        std::fs::write(state.join("postgres/pg_hba.conf"), &cluster_secret).unwrap();
        for (file, secret) in [
            (".ssh/id_ed25519", &ssh_key),
            (".aws/credentials", &aws_key),
        ] {
            std::fs::create_dir_all(home.join(file).parent().unwrap()).unwrap();
            std::fs::write(home.join(file), secret).unwrap();
        }
        let mut opts = LocalOptions::in_dir(&site);
        opts.state_dir = Some(state.clone());
        opts.database_url = Some(db.url().expose().to_owned());
        opts.token = Some(token.clone());
        // The token file lands in the working directory: inside the served project.
        opts.secrets_in_files = true;
        opts.args = vec!["--project".into(), format!("site={}", site.display())];
        if !sandboxed {
            opts.args.push("--no-sandbox".into());
        }
        opts.env = vec![
            ("SLACK_WEBHOOK_URL".into(), webhook.clone()),
            ("HOME".into(), home.display().to_string()),
        ];
        let server = LocalServer::spawn(&workspace_binary("wc-local"), &opts).unwrap();
        let token_file = std::fs::read_dir(&site)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .find(|n| n.starts_with("wc_local_token"))
            .expect("the token file");
        let command = format!(
            "{}; cat wc_local_token* {state}/postgres/pg_hba.conf ~/.ssh/id_ed25519 \
             ~/.aws/credentials 2>/dev/null; echo state=[$(ls -A {state})]",
            hunt(&[]),
            state = state.display()
        );
        let call = async |tool: &str, args: Value| -> Value {
            let reply = Client::new()
                .post_json(
                    &format!("{}/api/actions/{tool}", server.base_url),
                    Some(&token),
                    &args,
                )
                .await
                .unwrap();
            serde_json::from_slice(&reply.body).unwrap()
        };
        let project = "agent:local:site";
        let body = call(
            "run_shell",
            json!({ "project": project, "command": command }),
        )
        .await;
        let out = output(&body)["stdout"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            out.contains("hunt-end") && out.contains("HUNT_SELF=seen-by-the-hunt"),
            "sandboxed={sandboxed}: the hunt did not run: {body}"
        );
        let secrets = [&token, &cluster_secret, &webhook, &ssh_key, &aws_key];
        let found: Vec<&str> = secrets
            .iter()
            .map(|s| s.as_str())
            .filter(|s| out.contains(*s))
            .collect();
        if sandboxed {
            assert!(found.is_empty(), "the sandboxed job found {found:?}: {out}");
            assert!(out.lines().any(|l| l == "state=[]"), "{out}");
        } else {
            for s in [&token, &cluster_secret, &ssh_key, &aws_key] {
                assert!(
                    found.contains(&s.as_str()),
                    "the unsandboxed control found only {found:?}: {out}"
                );
            }
        }
        // The file tools keep the same boundary, sandbox or not.
        let read = call(
            "read_files",
            json!({ "project": project, "files": [{ "path": token_file }] }),
        )
        .await;
        assert_eq!(read["error"]["kind"], "path_hidden", "{read}");
        let listed = call("list_project_files", json!({ "project": project })).await;
        assert_eq!(listed["success"], true, "{listed}");
        assert!(!listed.to_string().contains("wc_local_token"), "{listed}");
        let searched = call(
            "search_project_texts",
            json!({ "project": project, "pattern": "wclocal-secret" }),
        )
        .await;
        assert_eq!(searched["success"], true, "{searched}");
        assert!(!searched.to_string().contains(&token), "{searched}");
        assert!(server.interrupt().unwrap().success());
        std::fs::remove_dir_all(&base).unwrap();
    }
}

/// A state directory inside a served project is refused at start, naming both.
#[test]
fn wc_local_refuses_a_state_directory_inside_a_served_project() {
    use wc_e2e::server::workspace_binary;
    let site = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(workspace_binary("wc-local"))
        .current_dir(site.path())
        .args(["--listen", "127.0.0.1:0", "--project", "site=."])
        .args(["--state-dir", "state"])
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("lies inside the served project") && said.contains("--state-dir"),
        "{said}"
    );
    assert!(!site.path().join("state").exists(), "nothing was made");
}

/// `wc-runner` makes itself non-dumpable: started as an unprivileged user, its `/proc` entries
/// (environment, memory) belong to root, so other processes of that user cannot read them. A
/// plain process of the same user, the control, owns its entries.
#[tokio::test]
async fn the_runner_process_is_not_readable_by_other_processes_of_its_user() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    use std::os::unix::process::CommandExt as _;

    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("a nobody account");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.path().join("runner.toml");
    // Nothing answers there: the runner keeps retrying its registration, alive.
    std::fs::write(
        &config,
        "server_url = \"http://127.0.0.1:1\"\nclient_id = \"local\"\ntoken = \"wcrk_unused\"\n\
         [sandbox]\nmode = \"off\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    // The build directory may not be open to other users (a checkout in root's home): run a
    // copy the user can execute.
    let bin = dir.path().join("wc-runner");
    std::fs::copy(wc_e2e::server::workspace_binary("wc-runner"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let spawn_as_nobody = |cmd: &mut std::process::Command| {
        cmd.uid(nobody.uid.as_raw())
            .gid(nobody.gid.as_raw())
            .env_clear()
            .env("HOME", "/nonexistent")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut runner = spawn_as_nobody(std::process::Command::new(bin).arg("--config").arg(&config));
    let mut control = spawn_as_nobody(std::process::Command::new("sleep").arg("30"));
    let owner = |pid: u32| {
        std::fs::metadata(format!("/proc/{pid}/environ"))
            .unwrap()
            .uid()
    };
    // Once the runner is past its first instruction its /proc entries change owner; it keeps
    // running after.
    eventually("wc-runner makes itself non-dumpable", async || {
        assert!(runner.try_wait().unwrap().is_none(), "wc-runner exited");
        (owner(runner.id()) == 0).then_some(())
    })
    .await;
    assert!(runner.try_wait().unwrap().is_none(), "wc-runner exited");
    assert_eq!(owner(control.id()), nobody.uid.as_raw(), "the control");
    assert_eq!(
        owner(runner.id()),
        0,
        "wc-runner is non-dumpable: its /proc entries belong to root"
    );
    for child in [&mut runner, &mut control] {
        let _ = child.kill();
        let _ = child.wait();
    }
}
