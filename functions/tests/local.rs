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
    assert!(dir.join(".wc/.gitignore").is_file());
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

#[test]
fn without_server_binaries_or_url_it_says_what_to_do() {
    let dir = scratch();
    let out = Command::new(bin())
        .current_dir(&dir)
        .env_remove("DATABASE_URL")
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
        !server.banner.contains("a-caller-chosen-token-0123456789\n"),
        "given token is not re-announced"
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

#[test]
fn bad_arguments_fail_before_anything_starts() {
    let dir = scratch();
    for (args, expect) in [
        (
            vec!["--project", "/no/such/dir"],
            "cannot resolve directory",
        ),
        (vec!["--token", "short"], "visible ASCII"),
    ] {
        let out = Command::new(bin())
            .current_dir(&dir)
            .env("DATABASE_URL", "postgres://postgres@127.0.0.1:1/x")
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
