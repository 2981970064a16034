//! `wc-local` as a user runs it: a real process, a real embedded PostgreSQL cluster.

use std::path::{Path, PathBuf};
use std::process::Command;

use wc_e2e::client::Client;
use wc_e2e::server::{LocalOptions, LocalServer, process_alive};
use wc_store::testing::TestDatabase;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_wc-local"))
}

/// A scratch directory the `postgres` account can traverse (so not under a private home).
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wc-local-test-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(dir.join("proj")).unwrap();
    dir
}

fn postmaster_pid(dir: &Path) -> i32 {
    let text = std::fs::read_to_string(dir.join(".wc/postgres/data/postmaster.pid")).unwrap();
    text.lines().next().unwrap().trim().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_directory_serves_reuses_its_cluster_and_leaves_nothing_behind() {
    let dir = scratch();
    let http = Client::new();

    // First run: no DATABASE_URL, so the cluster is created under .wc/postgres.
    let mut opts = LocalOptions::in_dir(&dir);
    opts.args = vec!["--project".into(), "proj".into()];
    let first = LocalServer::spawn(bin(), &opts).unwrap();
    assert!(
        first.banner.contains("agent:local:proj"),
        "{}",
        first.banner
    );
    assert!(first.banner.contains("/mcp"), "{}", first.banner);
    assert!(first.banner.contains("\"mcpServers\""), "{}", first.banner);
    let health = http
        .get(&format!("{}/healthz", first.base_url), None)
        .await
        .unwrap();
    assert_eq!(health.status, 200, "{:?}", health.body);
    let me = http
        .get(
            &format!("{}/api/whoami", first.base_url),
            Some(&first.token),
        )
        .await
        .unwrap();
    assert_eq!(me.status, 200);
    assert_eq!(me.json()["principal_kind"], "shared_key");
    let bad = http
        .get(
            &format!("{}/api/whoami", first.base_url),
            Some("wcsk_not-the-right-token-at-all"),
        )
        .await
        .unwrap();
    assert_eq!(bad.status, 401);
    assert!(
        dir.join(".wc/postgres/password").is_file(),
        "in the given state dir"
    );
    assert!(first.logs().contains("applied migration"));

    let token = first.token.clone();
    let wc_pid = first.pid() as i32;
    let pg_pid = postmaster_pid(&dir);
    assert!(process_alive(pg_pid));
    let logs_path = first.log_path.clone();
    let status = first.interrupt().unwrap();
    assert!(status.success(), "{status}");
    assert!(!process_alive(wc_pid), "wc-local still running");
    assert!(
        !process_alive(pg_pid),
        "postgres still running after Ctrl-C"
    );
    assert!(
        !dir.join(".wc/postgres/data/postmaster.pid").exists(),
        "postgres did not shut down cleanly"
    );
    let logs = std::fs::read_to_string(&logs_path).unwrap();
    assert!(logs.contains("request finished"), "logs were captured");
    assert!(!logs.contains(&token), "the token leaked into the logs");

    // Second run: the same cluster (nothing to migrate, the first token still works).
    let mut opts = LocalOptions::in_dir(&dir);
    opts.token = Some(token.clone());
    let second = LocalServer::spawn(bin(), &opts).unwrap();
    assert!(
        !second.logs().contains("applied migration"),
        "the cluster was not reused"
    );
    let me = http
        .get(&format!("{}/api/whoami", second.base_url), Some(&token))
        .await
        .unwrap();
    assert_eq!(me.status, 200, "the first run's credential is gone");
    let pg_pid = postmaster_pid(&dir);
    let wc_pid = second.pid() as i32;
    assert!(second.interrupt().unwrap().success());
    assert!(!process_alive(wc_pid) && !process_alive(pg_pid));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Without `--state-dir` the state lives under `XDG_STATE_HOME`, one directory per working
/// directory; the `.wc/` an earlier version kept in the working directory moves there once,
/// cluster and all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_directory_defaults_outside_the_working_directory_and_an_old_one_moves() {
    let dir = scratch();
    let first = LocalServer::spawn(bin(), &LocalOptions::in_dir(&dir)).unwrap();
    let token = first.token.clone();
    assert!(first.interrupt().unwrap().success());
    assert!(dir.join(".wc/postgres/password").is_file());

    // Short: the cluster's socket lives inside it.
    let xdg_dir = tempfile::tempdir().unwrap();
    let xdg = xdg_dir.path().to_owned();
    let mut opts = LocalOptions::in_dir(&dir);
    opts.state_dir = None;
    opts.token = Some(token.clone());
    opts.env = vec![("XDG_STATE_HOME".into(), xdg.display().to_string())];
    let second = LocalServer::spawn(bin(), &opts).unwrap();
    assert!(
        second.banner.contains("Moved wc-local's state from"),
        "{}",
        second.banner
    );
    assert!(!dir.join(".wc").exists(), "the old state directory moved");
    let moved: Vec<_> = std::fs::read_dir(xdg.join("wc"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    let name = moved[0].file_name().unwrap().to_string_lossy().into_owned();
    let base: String = dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .chars()
        .take(16)
        .collect();
    assert!(name.starts_with(&format!("{base}-")), "{name}");
    assert!(moved[0].join("postgres/password").is_file());
    assert!(
        !second.logs().contains("applied migration"),
        "the moved cluster was reused"
    );
    let me = Client::new()
        .get(&format!("{}/api/whoami", second.base_url), Some(&token))
        .await
        .unwrap();
    assert_eq!(
        me.status, 200,
        "the first run's credential is in the moved cluster"
    );
    assert!(second.interrupt().unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn without_server_binaries_or_url_it_says_what_to_do() {
    let dir = scratch();
    let out = Command::new(bin())
        .current_dir(&dir)
        .env_remove("DATABASE_URL")
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("WC_PG_BIN", dir.join("no-such-dir"))
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("apt-get install postgresql"), "{err}");
    assert!(err.contains("DATABASE_URL"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_database_and_token_are_used_and_projects_registered() {
    let db = TestDatabase::empty().await;
    let dir = scratch();
    let mut opts = LocalOptions::in_dir(&dir);
    opts.database_url = Some(db.url().expose().to_owned());
    opts.token = Some("a-caller-chosen-token-0123456789".into());
    opts.args = vec![
        "--project".into(),
        format!("named={}", dir.join("proj").display()),
    ];
    let server = LocalServer::spawn(bin(), &opts).unwrap();
    assert!(
        !server.banner.contains("a-caller-chosen-token-0123456789"),
        "a given token is never printed:\n{}",
        server.banner
    );
    assert!(
        server
            .banner
            .contains("Token:         the one from WC_LOCAL_TOKEN (not shown)"),
        "{}",
        server.banner
    );
    assert!(
        server.banner.contains("\"Bearer <your token>\""),
        "the client configuration shows a placeholder:\n{}",
        server.banner
    );
    let http = Client::new();
    let me = http
        .get(
            &format!("{}/api/whoami", server.base_url),
            Some(&server.token),
        )
        .await
        .unwrap();
    assert_eq!(me.status, 200);
    assert!(
        !dir.join(".wc/postgres").exists(),
        "no embedded cluster when a URL is given"
    );
    let client = db.pool().get().await.unwrap();
    let projects = wc_store::projects::list(&client).await.unwrap();
    assert_eq!(projects.len(), 1);
    assert_eq!(projects[0].id, "agent:local:named");
    assert!(server.interrupt().unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_given_as_files_are_used_and_the_token_is_not_printed() {
    let db = TestDatabase::empty().await;
    let dir = scratch();
    let token = "a-token-kept-in-a-file-0123456789";
    let mut opts = LocalOptions::in_dir(&dir);
    opts.database_url = Some(db.url().expose().to_owned());
    opts.token = Some(token.into());
    opts.secrets_in_files = true;
    let server = LocalServer::spawn(bin(), &opts).unwrap();
    assert!(!server.banner.contains(token), "{}", server.banner);
    assert!(
        server
            .banner
            .contains("Token:         the one from --token-file "),
        "{}",
        server.banner
    );
    assert!(
        server
            .banner
            .contains("Database:      the one from --database-url-file "),
        "{}",
        server.banner
    );
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", server.pid())).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline);
    assert!(cmdline.contains("--token-file"), "{cmdline}");
    assert!(!cmdline.contains(token), "{cmdline}");
    assert!(!cmdline.contains(db.url().expose()), "{cmdline}");
    let me = Client::new()
        .get(&format!("{}/api/whoami", server.base_url), Some(token))
        .await
        .unwrap();
    assert_eq!(me.status, 200);
    assert!(server.interrupt().unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_arguments_fail_before_anything_starts() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch();
    let open_file = dir.join("open-token");
    std::fs::write(&open_file, "a-token-everyone-can-read-0123456789\n").unwrap();
    std::fs::set_permissions(&open_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let short_file = dir.join("short-token");
    std::fs::write(&short_file, "short\n").unwrap();
    std::fs::set_permissions(&short_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let open_file = open_file.to_str().unwrap();
    let short_file = short_file.to_str().unwrap();
    let url = "postgres://postgres@127.0.0.1:1/x";
    for (env, args, expect) in [
        (
            vec![("DATABASE_URL", url)],
            vec!["--project", "/no/such/dir"],
            "cannot resolve directory",
        ),
        (
            vec![("DATABASE_URL", url), ("WC_LOCAL_TOKEN", "short")],
            vec![],
            "the token from WC_LOCAL_TOKEN must be 20-",
        ),
        (
            vec![("DATABASE_URL", url)],
            vec!["--token-file", short_file],
            "visible ASCII",
        ),
        // Values on the command line are refused, naming what to use instead.
        (
            vec![("DATABASE_URL", url)],
            vec!["--token", "a-token-on-the-command-line-0123456789"],
            "--token VALUE is not accepted",
        ),
        (
            vec![("DATABASE_URL", url)],
            vec!["--token", "a-token-on-the-command-line-0123456789"],
            "pass --token-file PATH, or set WC_LOCAL_TOKEN",
        ),
        (
            vec![],
            vec!["--database-url", url],
            "pass --database-url-file PATH, or set DATABASE_URL",
        ),
        (
            vec![("DATABASE_URL", url)],
            vec!["--token-file", open_file],
            "accessible to every local user",
        ),
        (
            vec![
                ("DATABASE_URL", url),
                ("WC_LOCAL_TOKEN", "a-token-in-the-env-0123456789"),
            ],
            vec!["--token-file", short_file],
            "both WC_LOCAL_TOKEN and --token-file",
        ),
        (
            vec![],
            vec!["--database-url-file", "/no/such/file"],
            "--database-url-file /no/such/file: cannot read",
        ),
    ] {
        let out = Command::new(bin())
            .current_dir(&dir)
            .env_remove("DATABASE_URL")
            .env_remove("WC_LOCAL_TOKEN")
            .envs(env.iter().copied())
            .args(["--listen", "127.0.0.1:0"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
    assert!(!dir.join(".wc").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Connects to the embedded cluster at `port` (or its socket directory) as `postgres`.
async fn connect(
    host: &str,
    port: u16,
    password: Option<&str>,
) -> Result<(), tokio_postgres::Error> {
    let mut cfg = tokio_postgres::Config::new();
    cfg.host(host).port(port).user("postgres").dbname("wc");
    if let Some(p) = password {
        cfg.password(p);
    }
    let (client, conn) = cfg.connect(tokio_postgres::NoTls).await?;
    let task = tokio::spawn(conn);
    let result = client.simple_query("SELECT 1").await.map(drop);
    drop(client);
    let _ = task.await;
    result
}

/// The cluster's port and password as `dir/.wc/postgres` records them; the password file must
/// be its owner's alone.
fn cluster_secrets(dir: &Path) -> (u16, String) {
    use std::os::unix::fs::PermissionsExt;
    let root = dir.join(".wc/postgres");
    let port = std::fs::read_to_string(root.join("port"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let file = root.join("password");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the password file is {mode:o}");
    (
        port,
        std::fs::read_to_string(file).unwrap().trim().to_owned(),
    )
}

/// What a local process gets from the cluster: nothing without the password, on the port or
/// the socket; everything with it.
async fn assert_password_required(dir: &Path) {
    let (port, password) = cluster_secrets(dir);
    for (host, password) in [("127.0.0.1", None), ("127.0.0.1", Some("not-the-password"))] {
        let err = connect(host, port, password)
            .await
            .expect_err("the cluster let a connection in without its password");
        if password.is_some() {
            assert_eq!(
                err.code(),
                Some(&tokio_postgres::error::SqlState::INVALID_PASSWORD),
                "{err}"
            );
        }
    }
    let socket = dir.join(".wc/postgres/run");
    connect(socket.to_str().unwrap(), port, None)
        .await
        .expect_err("the cluster's socket let a connection in without the password");
    connect("127.0.0.1", port, Some(&password))
        .await
        .expect("the password opens the cluster");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_cluster_refuses_local_connections_without_its_password() {
    let dir = scratch();
    let server = LocalServer::spawn(bin(), &LocalOptions::in_dir(&dir)).unwrap();
    assert_password_required(&dir).await;
    let hba = std::fs::read_to_string(dir.join(".wc/postgres/data/pg_hba.conf")).unwrap();
    assert!(!hba.contains("trust"), "{hba}");
    let logs_path = server.log_path.clone();
    let (_, password) = cluster_secrets(&dir);
    assert!(server.interrupt().unwrap().success());
    let logs = std::fs::read_to_string(logs_path).unwrap();
    assert!(
        !logs.contains(&password),
        "the cluster password reached the logs"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_trusted_local_connections_gets_a_password_on_its_next_start() {
    let dir = scratch();
    // A cluster as earlier versions made it: initdb with trust authentication, no password.
    let root = dir.join(".wc/postgres");
    std::fs::create_dir_all(&root).unwrap();
    let owner = nix::unistd::geteuid()
        .is_root()
        .then(|| nix::unistd::User::from_name("postgres").unwrap().unwrap());
    if let Some(user) = &owner {
        nix::unistd::chown(&root, Some(user.uid), Some(user.gid)).unwrap();
    }
    let bins = wc_store::cluster::find_binaries().unwrap();
    let mut initdb = Command::new(&bins.initdb);
    initdb.arg("-D").arg(root.join("data")).args([
        "-U",
        "postgres",
        "-A",
        "trust",
        "-E",
        "UTF8",
        "--no-locale",
    ]);
    if let Some(user) = &owner {
        use std::os::unix::process::CommandExt;
        initdb.uid(user.uid.as_raw()).gid(user.gid.as_raw());
    }
    let out = initdb.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hba = std::fs::read_to_string(root.join("data/pg_hba.conf")).unwrap();
    assert!(hba.contains("trust"), "the old cluster trusts: {hba}");
    assert!(!root.join("password").exists());

    let server = LocalServer::spawn(bin(), &LocalOptions::in_dir(&dir)).unwrap();
    assert_password_required(&dir).await;
    let hba = std::fs::read_to_string(root.join("data/pg_hba.conf")).unwrap();
    assert!(!hba.contains("trust"), "{hba}");
    assert!(
        server.logs().contains("setting one and requiring it"),
        "the upgrade is logged"
    );
    let me = Client::new()
        .get(
            &format!("{}/api/whoami", server.base_url),
            Some(&server.token),
        )
        .await
        .unwrap();
    assert_eq!(me.status, 200);
    assert!(server.interrupt().unwrap().success());

    // The next start finds the cluster as it left it: nothing to upgrade, same password.
    let (_, password) = cluster_secrets(&dir);
    let server = LocalServer::spawn(bin(), &LocalOptions::in_dir(&dir)).unwrap();
    assert!(!server.logs().contains("setting one and requiring it"));
    assert_eq!(cluster_secrets(&dir).1, password);
    assert_password_required(&dir).await;
    assert!(server.interrupt().unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_postgres_cannot_reach_still_works_as_root() {
    use std::os::unix::fs::PermissionsExt;
    let outer = scratch();
    // A private parent, like a home directory: mode 0700, owned by whoever runs the tests.
    std::fs::set_permissions(&outer, std::fs::Permissions::from_mode(0o700)).unwrap();
    let dir = outer.join("work");
    std::fs::create_dir_all(&dir).unwrap();
    let server = LocalServer::spawn(bin(), &LocalOptions::in_dir(&dir)).unwrap();
    let health = Client::new()
        .get(&format!("{}/healthz", server.base_url), None)
        .await
        .unwrap();
    assert_eq!(health.status, 200);
    let link = dir.join(".wc/postgres");
    let is_root = nix::unistd::geteuid().is_root();
    let target = std::fs::read_link(&link).ok();
    if is_root {
        // initdb refuses root, and the postgres account cannot enter a 0700 directory of root's:
        // the cluster lives outside, linked from .wc/postgres.
        let target = target.expect(".wc/postgres should be a symlink when running as root");
        assert!(
            target.starts_with("/var/lib/wc-local"),
            "{}",
            target.display()
        );
        assert!(target.join("data/PG_VERSION").is_file());
        assert!(server.interrupt().unwrap().success());
        std::fs::remove_dir_all(&target).unwrap();
    } else {
        // As an ordinary user the cluster is ours and lives right there.
        assert!(target.is_none());
        assert!(link.join("data/PG_VERSION").is_file());
        assert!(server.interrupt().unwrap().success());
    }
    std::fs::remove_dir_all(&outer).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_usable_sandbox_the_runner_is_not_started_and_the_banner_says_why() {
    let db = TestDatabase::empty().await;
    let dir = scratch();
    // A PATH with no bwrap on it: the sandbox cannot run, and jobs must not run unsandboxed.
    let empty_path = dir.join("empty-path");
    std::fs::create_dir_all(&empty_path).unwrap();
    let mut opts = LocalOptions::in_dir(&dir);
    opts.database_url = Some(db.url().expose().to_owned());
    opts.token = Some("a-caller-chosen-token-0123456789".into());
    opts.env = vec![("PATH".into(), empty_path.display().to_string())];
    opts.args = vec![
        "--project".into(),
        format!("site={}", dir.join("proj").display()),
    ];
    let server = LocalServer::spawn(bin(), &opts).unwrap();
    assert!(
        server.banner.contains("Runner:        NOT STARTED")
            && server.banner.contains("apt-get install bubblewrap")
            && server.banner.contains("--no-sandbox"),
        "the banner names the missing sandbox and both ways out:\n{}",
        server.banner
    );
    let reply = Client::new()
        .post_json(
            &format!("{}/api/actions/run_shell", server.base_url),
            Some(&server.token),
            &serde_json::json!({ "project": "agent:local:site", "command": "echo hi" }),
        )
        .await
        .unwrap();
    let body = reply.json();
    assert_eq!(body["success"], false, "{body}");
    assert_eq!(body["error"]["kind"], "runner_unavailable", "{body}");
    let client = db.pool().get().await.unwrap();
    let runner = wc_store::runners::get(&client, "local").await.unwrap();
    assert!(
        runner.is_none_or(|r| r.instance_id.is_none()),
        "no instance registered"
    );
    assert!(server.interrupt().unwrap().success());

    // Turned off explicitly (the variable takes 1 as the docs say), the runner starts without
    // bubblewrap and executes.
    opts.env.push(("WC_LOCAL_NO_SANDBOX".into(), "1".into()));
    let server = LocalServer::spawn(bin(), &opts).unwrap();
    assert!(
        server
            .banner
            .contains("Runner:        embedded (local), executing work"),
        "{}",
        server.banner
    );
    let reply = Client::new()
        .post_json(
            &format!("{}/api/actions/run_process", server.base_url),
            Some(&server.token),
            &serde_json::json!({ "project": "agent:local:site", "argv": ["/bin/echo", "hi"] }),
        )
        .await
        .unwrap();
    let body = reply.json();
    assert_eq!(body["success"], true, "{body}");
    assert_eq!(body["output"]["stdout"], "hi\n", "{body}");
    assert!(server.interrupt().unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
}
