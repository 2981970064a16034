//! The SQS work queue end to end: real Postgres, the real router served over TCP, moto's SQS
//! server, the real runner agent receiving from the queue, real processes. Work is published
//! after commit, runs once, and its message is deleted; duplicate deliveries are claimed,
//! answered "already claimed" and deleted unrun; malformed messages are deleted; a long run
//! keeps its message hidden.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use uuid::Uuid;
use wc_functions::AppState;
use wc_functions::config::ServerConfig;
use wc_runner_protocol::QueueEnvelope;
use wc_store::outbox::QueuePublisher;
use wc_store::testing::TestDatabase;
use wc_store::testing::sqs::LocalSqs;

const P: &str = "agent:local:alpha";

/// The queue, the database, a served state routing runner `local` to the queue, a shared key,
/// a project root and an SQS runner.
struct Env {
    // Fields drop in order: the runner stops before the queue server goes away.
    _runner: TestRunner,
    sqs: LocalSqs,
    queue: String,
    db: TestDatabase,
    st: AppState,
    key: String,
    root: tempfile::TempDir,
}

impl Env {
    /// Everything up, with received messages hidden for `visibility`.
    async fn start(visibility: Duration) -> Env {
        let sqs = LocalSqs::start().await;
        let queue = sqs.create_queue().await;
        let mut config = ServerConfig::default();
        config
            .runner_sqs_queues
            .insert("local".into(), queue.clone());
        let TestApp { db, st, key } = TestApp::with_config(&[P], config).await;
        let publisher: Arc<dyn QueuePublisher> = Arc::new(sqs.publisher());
        let st = st.with_publisher(Some(publisher));
        let root = tempfile::tempdir().unwrap();
        let base_url = serve(st.clone()).await;
        let runner = TestRunner::start_sqs_at(
            &db,
            &base_url,
            "local",
            &[("alpha", root.path())],
            &sqs,
            &queue,
            visibility,
        )
        .await;
        Env {
            _runner: runner,
            sqs,
            queue,
            db,
            st,
            key,
            root,
        }
    }

    async fn run_process(&self, argv: &[&str]) -> Value {
        let r = action(
            &self.st,
            &self.key,
            "run_process",
            json!({ "project": P, "argv": argv }),
        )
        .await;
        assert_eq!(r.body["success"], true, "{}", r.text());
        r.body["output"].clone()
    }

    /// `run_process` in the background.
    fn spawn_run(&self, argv: &[&str]) -> tokio::task::JoinHandle<Value> {
        let (st, key) = (self.st.clone(), self.key.clone());
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        tokio::spawn(async move {
            let r = action(
                &st,
                &key,
                "run_process",
                json!({ "project": P, "argv": argv }),
            )
            .await;
            assert_eq!(r.body["success"], true, "{}", r.text());
            r.body["output"].clone()
        })
    }

    /// The only work row's (id, queue, state).
    async fn work(&self) -> Vec<(Uuid, String, String)> {
        let client = self.db.pool().get().await.unwrap();
        client
            .query(
                "SELECT id, queue, state FROM runner_work ORDER BY created_at",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect()
    }

    /// Waits until some work is leased; returns its id.
    async fn wait_leased(&self) -> Uuid {
        eventually("some work is leased", async || {
            self.work()
                .await
                .into_iter()
                .find(|w| w.2 == "leased")
                .map(|(id, _, _)| id)
        })
        .await
    }

    async fn outbox_rows(&self) -> usize {
        wc_store::outbox::pending(&self.db.pool().get().await.unwrap())
            .await
            .unwrap()
            .len()
    }

    /// Nothing left anywhere: no visible or in-flight message, nothing to receive, no outbox
    /// row.
    async fn assert_drained(&self) {
        self.sqs
            .wait_empty(&self.queue, Duration::from_secs(20))
            .await;
        assert!(
            self.sqs.receive(&self.queue, 1).await.is_empty(),
            "a message was still received"
        );
        assert_eq!(self.outbox_rows().await, 0, "outbox rows left");
    }
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_published_to_sqs_runs_once_and_its_message_is_deleted() {
    let env = Env::start(Duration::from_secs(30)).await;
    let out = env.run_process(&["echo", "hi"]).await;
    assert_eq!(out["execution_state"], "succeeded", "{out}");
    assert_eq!(out["exit_code"], 0);
    assert_eq!(out["stdout"], "hi\n");
    let work = env.work().await;
    assert_eq!(work.len(), 1);
    assert_eq!(
        (work[0].1.as_str(), work[0].2.as_str()),
        ("sqs", "succeeded")
    );
    assert_eq!(out["job_id"], work[0].0.to_string());
    env.assert_drained().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_deliveries_are_claimed_once_and_deleted_unrun() {
    let env = Env::start(Duration::from_secs(30)).await;
    let count = env.root.path().join("count.txt");
    let run = env.spawn_run(&["sh", "-c", "echo ran >> count.txt; sleep 1"]);

    // A copy delivered while the work runs, and another after it ended.
    let id = env.wait_leased().await;
    let body = QueueEnvelope::new(id).to_body();
    env.sqs.send(&env.queue, &body).await;
    let out = run.await.unwrap();
    assert_eq!(out["execution_state"], "succeeded", "{out}");
    env.sqs.send(&env.queue, &body).await;

    env.assert_drained().await;
    assert_eq!(lines(&count), 1, "the command ran more than once");
    assert_eq!(
        env.work().await,
        [(id, "sqs".to_owned(), "succeeded".to_owned())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_unknown_messages_are_deleted_and_the_runner_carries_on() {
    let env = Env::start(Duration::from_secs(30)).await;
    for body in [
        "not json".to_owned(),
        r#"{"work_id": "nope"}"#.to_owned(),
        format!(
            r#"{{"protocol_version":99,"work_id":"{}"}}"#,
            Uuid::now_v7()
        ),
        QueueEnvelope::new(Uuid::now_v7()).to_body(),
    ] {
        env.sqs.send(&env.queue, &body).await;
    }
    env.assert_drained().await;
    assert!(env.work().await.is_empty());

    let out = env.run_process(&["echo", "still here"]).await;
    assert_eq!(out["stdout"], "still here\n", "{out}");
    env.assert_drained().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_run_keeps_its_message_hidden() {
    let env = Env::start(Duration::from_secs(2)).await;
    let count = env.root.path().join("count.txt");
    // The run marks the moment it has gone on for longer than the visibility timeout, and
    // keeps running after it.
    let past = env.root.path().join("past-visibility");
    let run = env.spawn_run(&[
        "sh",
        "-c",
        "echo ran >> count.txt; sleep 3; echo > past-visibility; sleep 2",
    ]);
    env.wait_leased().await;
    eventually("the run outlives the visibility timeout", async || {
        past.exists().then_some(())
    })
    .await;
    // Past the visibility timeout the message is still in flight: extended, not delivered
    // again (a redelivery would be claimed, answered already claimed and deleted).
    assert_eq!(env.sqs.counts(&env.queue).await, (0, 1));
    let out = run.await.unwrap();
    assert_eq!(out["execution_state"], "succeeded", "{out}");
    env.assert_drained().await;
    assert_eq!(lines(&count), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wc_local_configured_from_the_environment_publishes_and_its_runner_receives() {
    use wc_e2e::client::Client;
    use wc_e2e::server::{LocalOptions, LocalServer, workspace_binary};

    let sqs = LocalSqs::start().await;
    let queue = sqs.create_queue().await;
    let db = TestDatabase::empty().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("proj")).unwrap();
    let mut opts = LocalOptions::in_dir(dir.path());
    opts.database_url = Some(db.url().expose().to_owned());
    opts.args = vec![
        "--project".into(),
        format!("alpha={}", dir.path().join("proj").display()),
    ];
    opts.env = sqs.wc_local_env("local", &queue);
    let server = LocalServer::spawn(&workspace_binary("wc-local"), &opts).unwrap();
    let reply = Client::new()
        .post_json(
            &format!("{}/api/actions/run_process", server.base_url),
            Some(&server.token),
            &json!({ "project": P, "argv": ["echo", "via sqs"] }),
        )
        .await
        .unwrap();
    let body = reply.json();
    assert_eq!(body["success"], true, "{body}\n{}", server.logs());
    assert_eq!(body["output"]["stdout"], "via sqs\n", "{body}");
    let client = db.pool().get().await.unwrap();
    let row = client
        .query_one("SELECT queue, state FROM runner_work", &[])
        .await
        .unwrap();
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, String>(1)),
        ("sqs".to_owned(), "succeeded".to_owned())
    );
    let runner_queue: Option<String> = client
        .query_one("SELECT queue FROM runners WHERE client_id = 'local'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(runner_queue.as_deref(), Some("sqs"));
    sqs.wait_empty(&queue, Duration::from_secs(20)).await;
    assert!(server.interrupt().unwrap().success());
}
