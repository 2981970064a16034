//! Who a caller is cannot be borrowed: runner instances are ordered by the server (a forged
//! instance id locks no runner out, and rotating the runner's token recovers it whatever was
//! registered), audit sessions belong to the caller that opened them (reads are scoped,
//! closing takes `audit:write`, naming another caller's session attaches nothing to it), and a
//! long-polling observer whose credential is revoked while it waits gets no messages.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use axum::http::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;
use wc_functions::AppState;
use wc_functions::auth::token;
use wc_runner_agent::agent::{AgentError, Stop};
use wc_runner_protocol::MAX_INSTANCE_CLOCK_AHEAD_MS;
use wc_store::credentials::CredentialKind;
use wc_store::testing::TestDatabase;

use crate::common::*;

/// The runner every runner test uses, and its project.
const HOST: &str = "host";
const P: &str = "agent:host:alpha";

// ---------------------------------------------------------------------------------------------
// Runner identity

/// A UUIDv7 minted at `unix_ms`.
fn v7_at(unix_ms: u64) -> Uuid {
    Uuid::new_v7(uuid::Timestamp::from_unix(
        uuid::NoContext,
        unix_ms / 1000,
        (unix_ms % 1000) as u32 * 1_000_000,
    ))
}

fn now_ms() -> u64 {
    chrono::Utc::now().timestamp_millis() as u64
}

/// `POST /runner/v1/register` for `instance` with the runner token `token`.
async fn register(base: &str, token: &str, instance: Uuid) -> wc_e2e::client::Reply {
    RunnerApi::new(base, token)
        .post(
            "register",
            &register_request(instance, &["alpha"], "forger"),
        )
        .await
}

/// The real runner agent (in this process, over HTTP) with `token`, serving `alpha` at `root`.
struct Agent {
    stop: tokio::sync::watch::Sender<Stop>,
    joined: tokio::task::JoinHandle<Result<(), AgentError>>,
    instance: Uuid,
}

impl Agent {
    /// Starts it and waits (bounded) until it is the runner's registered instance.
    async fn start(db: &TestDatabase, base: &str, token: &str, root: &Path) -> Agent {
        let cfg = wc_runner_agent::config::RunnerConfig::embedded(
            base,
            HOST,
            wc_runner_agent::config::Secret::new(token.to_owned()),
            [("alpha".to_owned(), root.to_path_buf())].into(),
            wc_runner_agent::config::Limits::default(),
            Default::default(),
        )
        .unwrap();
        let before = registered_instance(db, HOST).await;
        let (stop, rx) = tokio::sync::watch::channel(Stop::Run);
        let joined = tokio::spawn(wc_runner_agent::agent::run(cfg, Default::default(), rx));
        let instance = eventually("the runner registers", async || {
            assert!(
                !joined.is_finished(),
                "the runner stopped instead of registering"
            );
            registered_instance(db, HOST)
                .await
                .filter(|&now| Some(now) != before)
        })
        .await;
        Agent {
            stop,
            joined,
            instance,
        }
    }

    async fn stop(self) {
        let _ = self.stop.send(Stop::Now);
        self.joined.await.unwrap().unwrap();
    }
}

/// Runs `echo hi` on the runner through the REST surface; its stdout.
async fn echo(st: &AppState, key: &str) -> Value {
    let r = rest(
        st,
        "/api/actions/run_process",
        Some(key),
        json!({ "project": P, "argv": ["echo", "hi"] }),
    )
    .await;
    assert_eq!(r.body["success"], true, "{}", r.text());
    r.body["output"]["stdout"].clone()
}

#[tokio::test]
async fn a_forged_instance_id_is_refused_or_replaced_and_never_locks_the_runner_out() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P]).await;
    let base = serve(st.clone()).await;
    let root = tempfile::tempdir().unwrap();
    let token = runner_token(&db, HOST).await;

    // Ids from the far future, and ids that carry no time, are refused with a typed error and
    // register nothing.
    let year_ms = 365 * 24 * 3_600_000;
    for forged in [
        v7_at(now_ms() + 100 * year_ms),
        v7_at(now_ms() + MAX_INSTANCE_CLOCK_AHEAD_MS + 60_000),
        Uuid::max(),
        Uuid::new_v4(),
    ] {
        let r = register(&base, &token, forged).await;
        assert_eq!(r.status, 400, "{forged}: {}", r.json());
        assert_eq!(
            r.json()["error"]["kind"],
            "invalid_instance_id",
            "{}",
            r.json()
        );
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("instance_id"),
            "{}",
            r.json()
        );
    }
    assert_eq!(registered_instance(&db, HOST).await, None);

    // An id just inside the allowed clock skew registers (its holder has the runner's token),
    // and is the largest id the runner has seen; the real agent started afterwards still
    // becomes the current instance, because the server orders instances, not their ids.
    let ahead = v7_at(now_ms() + MAX_INSTANCE_CLOCK_AHEAD_MS - 30_000);
    let r = register(&base, &token, ahead).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(registered_instance(&db, HOST).await, Some(ahead));
    let agent = Agent::start(&db, &base, &token, root.path()).await;
    assert!(
        agent.instance < ahead,
        "the agent's id sorts below the forged one"
    );
    assert_eq!(echo(&st, &key).await, "hi\n");

    // The replaced forged instance cannot come back, and the agent stays current.
    let r = register(&base, &token, ahead).await;
    assert_eq!(r.status, 409, "{}", r.json());
    assert_eq!(r.json()["error"]["kind"], "instance_replaced");
    assert_eq!(registered_instance(&db, HOST).await, Some(agent.instance));
    assert_eq!(echo(&st, &key).await, "hi\n");
    agent.stop().await;
}

fn admin(db: &TestDatabase, args: &[&str]) -> Output {
    let out = Command::new(Path::new(env!("CARGO_BIN_EXE_wc-admin")))
        .env("DATABASE_URL", db.url().expose())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "wc-admin {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn last_line(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap()
        .trim()
        .to_owned()
}

#[tokio::test]
async fn runner_create_rotate_recovers_the_runner_whatever_instance_rows_exist() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P]).await;
    let base = serve(st.clone()).await;
    let root = tempfile::tempdir().unwrap();
    let old_token = last_line(&admin(&db, &["runner", "create", HOST]));

    // Rows as forged ids leave them: the largest possible id current (what a far-future id
    // left under the old ordering), and a history full of ids that never ran.
    sql(
        &db,
        &format!(
            "UPDATE runners SET instance_id = '{}', instance_started_at = now() WHERE client_id = '{HOST}'; \
             INSERT INTO runner_instances (client_id, instance_id) \
               SELECT '{HOST}', gen_random_uuid() FROM generate_series(1, 40); \
             INSERT INTO runner_instances (client_id, instance_id) VALUES ('{HOST}', '{}')",
            Uuid::max(),
            Uuid::max()
        ),
    )
    .await;

    let rotated = admin(&db, &["runner", "create", HOST, "--rotate"]);
    assert!(
        String::from_utf8_lossy(&rotated.stdout).contains("rotated runner host"),
        "{}",
        String::from_utf8_lossy(&rotated.stdout)
    );
    let new_token = last_line(&rotated);
    assert_ne!(new_token, old_token);
    assert_eq!(
        registered_instance(&db, HOST).await,
        None,
        "rotation keeps no instance"
    );

    // The old token speaks for nobody; the new one's agent becomes current and runs work.
    let r = register(&base, &old_token, Uuid::now_v7()).await;
    assert_eq!(r.status, 401, "{}", r.json());
    let agent = Agent::start(&db, &base, &new_token, root.path()).await;
    assert_eq!(echo(&st, &key).await, "hi\n");
    let client = db.pool().get().await.unwrap();
    let remembered: Vec<Uuid> = client
        .query(
            "SELECT instance_id FROM runner_instances WHERE client_id = $1",
            &[&HOST],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        remembered,
        [agent.instance],
        "the forged lineage was forgotten"
    );
    agent.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Audit sessions

/// The audit session of one audited call by `key`, naming `named` in `header` when given.
async fn audited(
    st: &AppState,
    db: &TestDatabase,
    key: &str,
    named: Option<(&str, &str)>,
) -> EventRow {
    let mut req = rest_request("/api/actions/runtime_status", Some(key), &json!({}));
    if let Some((header, id)) = named {
        if header == "query" {
            *req.uri_mut() = format!("/api/actions/runtime_status?action_session_id={id}")
                .parse()
                .unwrap();
        } else {
            set_header(&mut req, header, id);
        }
    }
    let r = send(st, req).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    event_of(db, &r).await
}

fn session_ids(listing: &Reply) -> BTreeSet<String> {
    listing.body["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("no sessions: {}", listing.text()))
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_owned())
        .collect()
}

async fn status_of(db: &TestDatabase, session: &str) -> String {
    let client = db.pool().get().await.unwrap();
    client
        .query_one(
            "SELECT status FROM action_sessions WHERE session_id = $1",
            &[&session],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_project_credential_reads_only_its_own_audit_sessions_and_closes_only_with_audit_write() {
    let db = TestDatabase::new().await;
    register_project(&db, P).await;
    let st = state(&db);
    let operator = full_key(&db).await;
    let reader = credential(
        &db,
        CredentialKind::Project,
        &["project:read", "audit:read"],
        &[P],
    )
    .await;
    let writer = credential(
        &db,
        CredentialKind::Project,
        &["project:read", "audit:read", "audit:write"],
        &[P],
    )
    .await;
    let bystander = credential(&db, CredentialKind::Project, &["project:read"], &[P]).await;

    let ops = audited(&st, &db, &operator, Some(("x-action-session-id", "ops-1"))).await;
    let theirs = audited(&st, &db, &bystander, None).await;
    let own = audited(&st, &db, &reader, None).await;
    audited(&st, &db, &reader, None).await;
    let writers = audited(&st, &db, &writer, None).await;
    assert_eq!(ops.session_id, "ops-1");

    // Listing: the reader sees its own session, nothing else; the operator sees every one.
    let listing = rest(&st, "/api/audit/sessions", Some(&reader), json!({})).await;
    assert_eq!(listing.status, StatusCode::OK, "{}", listing.text());
    assert_eq!(
        session_ids(&listing),
        BTreeSet::from([own.session_id.clone()])
    );
    let all = rest(&st, "/api/audit/sessions", Some(&operator), json!({})).await;
    assert_eq!(
        session_ids(&all),
        BTreeSet::from([
            ops.session_id.clone(),
            theirs.session_id.clone(),
            own.session_id.clone(),
            writers.session_id.clone()
        ])
    );

    // One session: another caller's looks unknown, its own is served with its events.
    for foreign in [&ops.session_id, &theirs.session_id] {
        let r = rest(
            &st,
            "/api/audit/session",
            Some(&reader),
            json!({ "session_id": foreign }),
        )
        .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text());
        assert_eq!(r.body["error"]["kind"], "not_found");
    }
    let r = rest(
        &st,
        "/api/audit/session",
        Some(&reader),
        json!({ "session_id": own.session_id }),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.body["events"].as_array().unwrap().len(), 2);

    // Stats count only the reader's own events.
    let r = rest(&st, "/api/audit/stats", Some(&reader), json!({})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.body["events"]["total"], 2, "{}", r.text());
    assert_eq!(r.body["sessions_touched"], 1);
    let r = rest(&st, "/api/audit/stats", Some(&operator), json!({})).await;
    assert_eq!(r.body["events"]["total"], 5, "{}", r.text());

    // Closing is a write: audit:read alone closes nothing, not even its own session.
    for target in [&own.session_id, &ops.session_id] {
        let r = rest(
            &st,
            "/api/audit/session/close",
            Some(&reader),
            json!({ "session_id": target }),
        )
        .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text());
        assert_eq!(r.body["error"]["kind"], "insufficient_scope");
        assert!(
            r.headers[axum::http::header::WWW_AUTHENTICATE]
                .to_str()
                .unwrap()
                .contains("audit:write")
        );
        assert_eq!(status_of(&db, target).await, "open");
    }
    // With audit:write, a caller closes its own sessions and no one else's.
    let r = rest(
        &st,
        "/api/audit/session/close",
        Some(&writer),
        json!({ "session_id": ops.session_id }),
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text());
    assert_eq!(status_of(&db, &ops.session_id).await, "open");
    let r = rest(
        &st,
        "/api/audit/session/close",
        Some(&writer),
        json!({ "session_id": writers.session_id }),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.body["closed"], true);
    // The operator's shared key closes anyone's.
    let r = rest(
        &st,
        "/api/audit/session/close",
        Some(&operator),
        json!({ "session_id": theirs.session_id }),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(status_of(&db, &theirs.session_id).await, "closed");
}

#[tokio::test]
async fn naming_another_callers_audit_session_attaches_nothing_to_it() {
    let db = TestDatabase::new().await;
    register_project(&db, P).await;
    let st = state(&db);
    let victim = full_key(&db).await;
    let intruder = credential(&db, CredentialKind::Project, &["project:read"], &[P]).await;

    let first = audited(&st, &db, &victim, Some(("x-action-session-id", "victim-1"))).await;
    assert_eq!((first.session_id.as_str(), first.seq), ("victim-1", 1));

    // Every way of naming it: the intruder's requests are still audited, in a session of its
    // own (one, reused), and the victim's session does not move.
    let mut intruders = Vec::new();
    for named in ["x-action-session-id", "x-webcodex-session-id", "query"] {
        intruders.push(audited(&st, &db, &intruder, Some((named, "victim-1"))).await);
    }
    let own = &intruders[0].session_id;
    assert_ne!(own, "victim-1");
    assert!(
        intruders.iter().all(|e| &e.session_id == own),
        "{intruders:?}"
    );
    assert_eq!(
        intruders.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let victims: Vec<EventRow> = events(&db)
        .await
        .into_iter()
        .filter(|e| e.session_id == "victim-1")
        .collect();
    assert_eq!(victims.len(), 1, "{victims:?}");
    assert_eq!(victims[0].principal_kind.as_deref(), Some("shared_key"));

    // A fresh id the intruder names is its own from then on; the victim naming it is the
    // one turned away now, into its own open session (the one it opened as victim-1).
    let fresh = audited(&st, &db, &intruder, Some(("x-action-session-id", "mine-1"))).await;
    assert_eq!((fresh.session_id.as_str(), fresh.seq), ("mine-1", 1));
    let back = audited(&st, &db, &victim, Some(("x-action-session-id", "mine-1"))).await;
    assert_eq!((back.session_id.as_str(), back.seq), ("victim-1", 2));
    let again = audited(&st, &db, &victim, Some(("x-action-session-id", "victim-1"))).await;
    assert_eq!((again.session_id.as_str(), again.seq), ("victim-1", 3));
    let client = db.pool().get().await.unwrap();
    let mine: i64 = client
        .query_one(
            "SELECT event_count FROM action_sessions WHERE session_id = 'mine-1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(mine, 1);
}

// ---------------------------------------------------------------------------------------------
// A waiting observer

async fn tool(st: &AppState, key: &str, name: &str, args: Value) -> Reply {
    rest_call(st, key, name, args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiting_observer_whose_credential_is_revoked_gets_no_messages() {
    let db = TestDatabase::new().await;
    register_project(&db, P).await;
    let st = state(&db);
    let scopes = ["project:read", "project:write"];
    let group = Some("team");
    let poster = credential_in_group(&db, CredentialKind::Project, &scopes, &[P], group).await;
    let doomed = credential_in_group(&db, CredentialKind::Project, &scopes, &[P], group).await;
    let kept = credential_in_group(&db, CredentialKind::Project, &scopes, &[P], group).await;

    let r = tool(
        &st,
        &poster,
        "work_on_project",
        json!({ "project": P, "instruction": "coordinate" }),
    )
    .await;
    assert_eq!(r.body["success"], true, "{}", r.text());
    let session = r.body["output"]["session_id"].as_str().unwrap().to_owned();
    let baseline = |key: String| {
        let st = st.clone();
        let session = session.clone();
        async move {
            let r = tool(
                &st,
                &key,
                "observe_session_messages",
                json!({ "session_id": session }),
            )
            .await;
            assert_eq!(r.body["success"], true, "{}", r.text());
            r.body["output"]["token"].as_str().unwrap().to_owned()
        }
    };
    let waiting = |key: String, token: String| {
        let st = st.clone();
        let session = session.clone();
        tokio::spawn(async move {
            tool(
                &st,
                &key,
                "observe_session_messages",
                json!({ "session_id": session, "token": token, "wait_ms": 20_000 }),
            )
            .await
        })
    };
    let doomed_wait = waiting(doomed.clone(), baseline(doomed.clone()).await);
    let kept_wait = waiting(kept.clone(), baseline(kept.clone()).await);
    // Both are admitted and waiting (nothing has changed on the board) before the revocation.
    let session_id = wc_domain::SessionId::parse(&session).unwrap();
    eventually("both long polls wait on the board", async || {
        (st.deps.wake.board_waiters(&session_id) == 2).then_some(())
    })
    .await;
    assert!(!doomed_wait.is_finished() && !kept_wait.is_finished());

    let doomed_id: Uuid = {
        let client = db.pool().get().await.unwrap();
        let digest = token::digest(&doomed);
        let cred = wc_store::credentials::find_active_by_digest(&client, &digest)
            .await
            .unwrap()
            .unwrap();
        cred.id
    };
    admin(&db, &["credential", "revoke", &doomed_id.to_string()]);
    let r = tool(
        &st,
        &poster,
        "post_session_message",
        json!({ "session_id": session, "kind": "note", "body": "the build is green" }),
    )
    .await;
    assert_eq!(r.body["success"], true, "{}", r.text());

    // The revoked observer's call answers as a tool that was refused: invalid_token (the kind
    // its next request gets), with the bearer challenge, and no message.
    let refused = doomed_wait.await.unwrap();
    assert_eq!(
        refused.status,
        StatusCode::UNAUTHORIZED,
        "{}",
        refused.text()
    );
    assert_eq!(refused.body["success"], false, "{}", refused.text());
    assert_eq!(refused.body["error"]["kind"], "invalid_token");
    assert!(
        refused.headers[axum::http::header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );
    assert!(
        !refused.text().contains("build is green"),
        "{}",
        refused.text()
    );
    let next = tool(
        &st,
        &doomed,
        "observe_session_messages",
        json!({ "session_id": session }),
    )
    .await;
    assert_eq!(next.status, StatusCode::UNAUTHORIZED);
    assert_eq!(next.body["error"]["kind"], "invalid_token");

    // The observer whose credential stands gets the message.
    let delivered = kept_wait.await.unwrap();
    assert_eq!(delivered.body["success"], true, "{}", delivered.text());
    let bodies: Vec<&str> = delivered.body["output"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies, ["the build is green"]);
}
