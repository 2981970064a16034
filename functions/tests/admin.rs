//! `wc-admin` as an operator runs it.

use std::path::Path;
use std::process::{Command, Output};

use axum::body::Body;
use axum::http::{Request, header};
use tower::ServiceExt;
use wc_functions::config::ServerConfig;
use wc_functions::{AppState, app};
use wc_store::testing::TestDatabase;

fn admin(db: &TestDatabase, args: &[&str]) -> Output {
    Command::new(Path::new(env!("CARGO_BIN_EXE_wc-admin")))
        .env("DATABASE_URL", db.url().expose())
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

async fn whoami_status(db: &TestDatabase, token: &str) -> u16 {
    let st = AppState::new(db.pool().clone(), ServerConfig::default());
    let req = Request::get("/api/whoami")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap();
    app(st).oneshot(req).await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_migrations_both_succeed_and_apply_once() {
    let db = TestDatabase::empty().await;
    let spawn = || {
        Command::new(Path::new(env!("CARGO_BIN_EXE_wc-admin")))
            .env("DATABASE_URL", db.url().expose())
            .arg("migrate")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let both = stdout(&a) + &stdout(&b);
    assert_eq!(both.matches("applied V1__foundation").count(), 1, "{both}");
    let client = db.pool().get().await.unwrap();
    let rows: Vec<i32> = client
        .query(
            "SELECT version FROM refinery_schema_history ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let expected: Vec<i32> = (1..=wc_store::migrate::expected_level()).collect();
    assert_eq!(rows, expected);
}

#[tokio::test]
async fn credential_lifecycle_prints_the_token_once_and_never_lists_it() {
    let db = TestDatabase::new().await;
    let created = admin(
        &db,
        &[
            "credential",
            "create",
            "--kind",
            "shared-key",
            "--scope",
            "project:read",
            "--label",
            "ops",
        ],
    );
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let out = stdout(&created);
    let token = out.lines().last().unwrap().to_owned();
    assert!(
        token.starts_with("wcsk_") && !token.contains(' '),
        "last line must be the token alone: {out}"
    );
    assert_eq!(out.matches(&token).count(), 1);
    let id = out
        .lines()
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_owned();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{out}");
    assert!(
        String::from_utf8_lossy(&created.stderr)
            .find(&token)
            .is_none()
    );
    assert_eq!(whoami_status(&db, &token).await, 200);

    for args in [
        &["credential", "list"][..],
        &["credential", "list", "--json"][..],
    ] {
        let listed = admin(&db, args);
        assert!(listed.status.success());
        let text = stdout(&listed);
        assert!(text.contains(&id), "{text}");
        assert!(
            !text.contains(&token) && !text.contains(&token[5..]),
            "list printed a secret"
        );
    }

    let revoked = admin(&db, &["credential", "revoke", &id]);
    assert!(revoked.status.success());
    assert!(stdout(&revoked).contains("revoked"));
    assert_eq!(whoami_status(&db, &token).await, 401);
    let again = admin(&db, &["credential", "revoke", &id]);
    assert!(again.status.success());
    assert!(stdout(&again).contains("already revoked"));
    let json = stdout(&admin(&db, &["credential", "list", "--json"]));
    let row: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(row["state"], "revoked");
    assert_eq!(row["scopes"], serde_json::json!(["project:read"]));
}

#[tokio::test]
async fn project_credentials_need_projects_and_known_scopes() {
    let db = TestDatabase::new().await;
    for (args, expect) in [
        (
            vec!["credential", "create", "--kind", "project"],
            "at least one --project",
        ),
        (
            vec![
                "credential",
                "create",
                "--kind",
                "shared-key",
                "--scope",
                "root:all",
            ],
            "unknown scope",
        ),
        (
            vec![
                "credential",
                "create",
                "--kind",
                "shared-key",
                "--project",
                "p",
            ],
            "every project",
        ),
        (
            vec![
                "credential",
                "revoke",
                "00000000-0000-0000-0000-000000000000",
            ],
            "no credential",
        ),
    ] {
        let out = admin(&db, &args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
    let out = admin(
        &db,
        &[
            "credential",
            "create",
            "--kind",
            "project",
            "--project",
            "agent:local:a",
        ],
    );
    assert!(out.status.success());
    let token = stdout(&out).lines().last().unwrap().to_owned();
    assert!(token.starts_with("wcpk_"));
    let client = db.pool().get().await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM credentials", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "failed creates wrote nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_functions_cloud_variables_reach_the_database_too() {
    let db = TestDatabase::empty().await;
    // postgres://user[:password]@host:port/name, as the test fixtures write it.
    let url = db.url().expose().to_owned();
    let rest = url.strip_prefix("postgres://").expect("a postgres:// URL");
    let (userinfo, rest) = rest.split_once('@').expect("user@host");
    let user = userinfo.split(':').next().unwrap().to_owned();
    let (hostport, name) = rest.split_once('/').expect("host/name");
    let (host, port) = hostport.rsplit_once(':').expect("host:port");
    let (host, port, name) = (host.to_owned(), port.to_owned(), name.to_owned());
    let run = |vars: &[(&str, String)]| {
        let mut cmd = Command::new(Path::new(env!("CARGO_BIN_EXE_wc-admin")));
        cmd.env_remove("DATABASE_URL").arg("migrate");
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let out = run(&[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("WC_DB_HOST"), "{err}");

    let out = run(&[
        ("WC_DB_HOST", host),
        ("WC_DB_PORT", port),
        ("WC_DB_NAME", name),
        ("WC_DB_USER", user),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout(&out).contains("schema is now at level"),
        "{}",
        stdout(&out)
    );
}
