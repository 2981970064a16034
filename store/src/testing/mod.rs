//! Test support: a fresh, migrated database per test, seeded sessions and runner work, and a
//! local SQS ([`sqs`]). Compiled only with the `testing` feature.
//!
//! The server is `TEST_DATABASE_URL`, else `DATABASE_URL`, else 127.0.0.1:5432 if it answers,
//! else a throwaway cluster started from the installed binaries and shared by later test
//! processes. Each test database is copied from a template migrated once per migration set, so
//! tests do not re-run migrations, and is dropped when the handle goes away.

pub mod pg_proxy;
pub mod sqs;

use std::time::Duration;
use wc_domain::{EventRole, MessageId, MessageKind, Mode, Priority, ProjectId, SessionId};

use deadpool_postgres::{GenericClient, Pool};
use tokio::sync::OnceCell;
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

use crate::cluster::{ClusterOptions, LocalCluster};
use crate::config::{DatabaseConfig, DatabaseUrl};
use crate::{StoreError, migrate, pool};

static ADMIN_URL: OnceCell<DatabaseUrl> = OnceCell::const_new();
static TEMPLATE: OnceCell<String> = OnceCell::const_new();

/// Advisory lock key for template creation ("wc-tmpl").
const TEMPLATE_LOCK_KEY: i64 = 0x0077_632d_746d_706c;

/// The server tests run against, as a superuser URL of its `postgres` database.
pub async fn admin_url() -> DatabaseUrl {
    ADMIN_URL
        .get_or_init(|| async {
            resolve_admin_url()
                .await
                .unwrap_or_else(|e| panic!("no PostgreSQL server for tests: {e}"))
        })
        .await
        .clone()
}

async fn resolve_admin_url() -> Result<DatabaseUrl, String> {
    for var in ["TEST_DATABASE_URL", "DATABASE_URL"] {
        if let Ok(url) = std::env::var(var) {
            return DatabaseUrl::parse(&url).map_err(|e| format!("{var}: {e}"));
        }
    }
    let default = DatabaseUrl::parse("postgres://postgres@127.0.0.1:5432/postgres")
        .expect("well-formed default url");
    if answers(&default).await {
        return Ok(default);
    }
    let root = std::env::temp_dir().join(format!("wc-test-pg-{}", nix::unistd::geteuid()));
    if let Some(url) = crate::cluster::recorded_url(&root, "postgres")
        && answers(&url).await
    {
        return Ok(url);
    }
    let opts = ClusterOptions {
        die_with_parent: false,
        max_connections: 300,
        ..ClusterOptions::default()
    };
    let cluster = LocalCluster::start(&root, &opts)
        .await
        .map_err(|e| e.to_string())?;
    let url = cluster.url("postgres");
    cluster.detach();
    Ok(url)
}

async fn answers(url: &DatabaseUrl) -> bool {
    let mut cfg = url.pg_config();
    cfg.connect_timeout(Duration::from_secs(2));
    match cfg.connect(NoTls).await {
        Ok((client, conn)) => {
            let task = tokio::spawn(conn);
            let ok = client.simple_query("SELECT 1").await.is_ok();
            drop(client);
            let _ = task.await;
            ok
        }
        Err(_) => false,
    }
}

async fn admin_client() -> (tokio_postgres::Client, tokio::task::JoinHandle<()>) {
    let (client, conn) = admin_url()
        .await
        .pg_config()
        .connect(NoTls)
        .await
        .expect("connect to the test server");
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    (client, task)
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// The migrated template for the current migration set, created once per server.
async fn template() -> String {
    TEMPLATE
        .get_or_init(|| async {
            let name = format!("wc_tpl_{}", &migrate::fingerprint()[..16]);
            let (client, task) = admin_client().await;
            client
                .execute("SELECT pg_advisory_lock($1)", &[&TEMPLATE_LOCK_KEY])
                .await
                .expect("template lock");
            let ready: Option<bool> = client
                .query_opt(
                    "SELECT datistemplate FROM pg_database WHERE datname = $1",
                    &[&name],
                )
                .await
                .expect("look up template")
                .map(|r| r.get(0));
            if ready != Some(true) {
                // Absent, or left half-made by an interrupted run: build it afresh.
                client
                    .batch_execute(&format!(
                        "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                        quote(&name)
                    ))
                    .await
                    .expect("drop stale template");
                client
                    .batch_execute(&format!("CREATE DATABASE {}", quote(&name)))
                    .await
                    .expect("create template");
                let db = DatabaseConfig::new(admin_url().await.with_database(&name));
                migrate::migrate(&db).await.expect("migrate template");
                client
                    .batch_execute(&format!(
                        "ALTER DATABASE {} WITH IS_TEMPLATE true",
                        quote(&name)
                    ))
                    .await
                    .expect("mark template");
            }
            client
                .execute("SELECT pg_advisory_unlock($1)", &[&TEMPLATE_LOCK_KEY])
                .await
                .expect("template unlock");
            drop(client);
            let _ = task.await;
            name
        })
        .await
        .clone()
}

/// A database of its own for one test, dropped when this handle is dropped.
pub struct TestDatabase {
    name: String,
    url: DatabaseUrl,
    pool: Pool,
}

impl TestDatabase {
    /// A fresh database with the current schema.
    pub async fn new() -> TestDatabase {
        let template = template().await;
        Self::create(Some(&template)).await
    }

    /// A fresh database with no schema at all.
    pub async fn empty() -> TestDatabase {
        Self::create(None).await
    }

    async fn create(template: Option<&str>) -> TestDatabase {
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let sql = match template {
            Some(t) => format!("CREATE DATABASE {} TEMPLATE {}", quote(&name), quote(t)),
            None => format!("CREATE DATABASE {}", quote(&name)),
        };
        let (client, task) = admin_client().await;
        let mut tries = 0;
        loop {
            match client.batch_execute(&sql).await {
                Ok(()) => break,
                // Copying a template fails while another session is connected to it.
                Err(e) if e.code() == Some(&SqlState::OBJECT_IN_USE) && tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("create test database: {e}"),
            }
        }
        drop(client);
        let _ = task.await;
        let url = admin_url().await.with_database(&name);
        let pool = pool::build_pool(&DatabaseConfig::new(url.clone())).expect("test pool");
        TestDatabase { name, url, pool }
    }

    /// The database's URL.
    pub fn url(&self) -> &DatabaseUrl {
        &self.url
    }

    /// A configuration for this database.
    pub fn config(&self) -> DatabaseConfig {
        DatabaseConfig::new(self.url.clone())
    }

    /// The shared pool of this test.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Another, independent pool: a second "instance" of a stateless server.
    pub fn new_pool(&self) -> Pool {
        pool::build_pool(&self.config()).expect("second pool")
    }

    /// A new active Workflow Session (project `agent:local:p`) whose ledger holds one
    /// `first_event`; returns its id.
    pub async fn new_session(&self, first_event: crate::sessions::NewEvent) -> SessionId {
        let id = SessionId::generate();
        crate::sessions::create(
            self.pool(),
            &crate::sessions::NewSession {
                id: id.clone(),
                project: ProjectId::parse("agent:local:p").expect("project id"),
                owner_authority_fingerprint: "a".repeat(64),
                mode: Mode::Normal,
                root_instruction: None,
            },
            &[first_event],
        )
        .await
        .expect("session created");
        id
    }
}

/// An empty business event of `kind`, with fresh call and invocation ids.
pub fn event(kind: wc_domain::EventKind) -> crate::sessions::NewEvent {
    crate::sessions::NewEvent {
        kind,
        call_id: uuid::Uuid::now_v7(),
        invocation_id: uuid::Uuid::now_v7(),
        role: EventRole::Business,
        tool_name: None,
        payload: serde_json::json!({}),
    }
}

/// The `task_instruction` event a test session can start with.
pub fn task_instruction() -> crate::sessions::NewEvent {
    event(wc_domain::EventKind::TaskInstruction)
}

/// A note to post, with a fresh `wc_msg_` id.
pub fn note(body: &str) -> crate::board::NewMessage {
    crate::board::NewMessage {
        id: MessageId::generate(),
        kind: MessageKind::Note,
        priority: Priority::Normal,
        ack_required: false,
        reply_to: None,
        body: body.into(),
        body_redacted: false,
        author_session_id: None,
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        self.pool.close();
        let name = self.name.clone();
        let admin = ADMIN_URL.get().cloned();
        // Drop runs outside async context guarantees; use a private runtime on its own thread.
        let _ = std::thread::spawn(move || {
            let Some(admin) = admin else { return };
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok((client, conn)) = admin.pg_config().connect(NoTls).await {
                    let task = tokio::spawn(conn);
                    let _ = client
                        .batch_execute(&format!(
                            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                            quote(&name)
                        ))
                        .await;
                    drop(client);
                    let _ = task.await;
                }
            });
        })
        .join();
    }
}

/// Stores `n` finished Workflow Sessions of `project`, each with `events` ledger events, so
/// benchmarks can show that per-call cost does not grow with the data.
pub async fn seed_sessions(
    client: &impl deadpool_postgres::GenericClient,
    n: i64,
    events: i64,
    project: &str,
    fingerprint: &str,
) -> Result<(), StoreError> {
    client
        .execute(
            "INSERT INTO workflow_sessions (id, project, owner_authority_fingerprint, mode, lifecycle, \
               events_observed, version) \
             SELECT 'wc_sess_seed' || md5(i::text), $2::text, $3::text, 'normal', 'finished', $4::bigint, 1 \
             FROM generate_series(1, $1::bigint) AS i",
            &[&n, &project, &fingerprint, &events],
        )
        .await?;
    client
        .execute(
            "INSERT INTO session_events (session_id, seq, kind, call_id, invocation_id, role, tool_name, payload) \
             SELECT 'wc_sess_seed' || md5(i::text), e, 'tool_call_started', gen_random_uuid(), gen_random_uuid(), \
                    'recorder', 'runtime_status', '{}'::jsonb \
             FROM generate_series(1, $1::bigint) AS i, generate_series(1, $2::bigint) AS e",
            &[&n, &events],
        )
        .await?;
    client
        .batch_execute("ANALYZE workflow_sessions; ANALYZE session_events")
        .await?;
    Ok(())
}

/// Where the time of runner work created since `since` went, from its durable timestamps:
/// p50 of queued → leased and of leased → finished, in ms (benchmarks).
pub async fn work_timing(
    client: &impl GenericClient,
    since: chrono::DateTime<chrono::Utc>,
) -> Result<(Option<f64>, Option<f64>), StoreError> {
    let row = client
        .query_one(
            "SELECT \
               percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM leased_at - created_at))::float8 * 1000, \
               percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - leased_at))::float8 * 1000 \
             FROM runner_work WHERE created_at >= $1 AND finished_at IS NOT NULL AND leased_at IS NOT NULL",
            &[&since],
        )
        .await?;
    Ok((row.get(0), row.get(1)))
}

/// When each runner work item created since `since` was created, leased and finished, oldest
/// first (benchmarks: set beside a caller's own clock, they split its round trips).
pub async fn work_times(
    client: &impl GenericClient,
    since: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<WorkTimes>, StoreError> {
    let rows = client
        .query(
            "SELECT created_at, leased_at, finished_at FROM runner_work \
             WHERE created_at >= $1 ORDER BY created_at, id",
            &[&since],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| WorkTimes {
            created: r.get(0),
            leased: r.get(1),
            finished: r.get(2),
        })
        .collect())
}

/// The durable timestamps of one runner work item ([`work_times`]); each is the `now()` of the
/// transaction that wrote it, so its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkTimes {
    /// Queued (the enqueuing transaction).
    pub created: chrono::DateTime<chrono::Utc>,
    /// Claimed by a runner.
    pub leased: Option<chrono::DateTime<chrono::Utc>>,
    /// Its result recorded.
    pub finished: Option<chrono::DateTime<chrono::Utc>>,
}

/// Runner work created since `since`, counted by state (benchmarks and tests).
pub async fn work_states(
    client: &impl GenericClient,
    since: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<(String, i64)>, StoreError> {
    work_counts_by(client, since, "state").await
}

/// Runner work created since `since`, counted by the queue that carried it (`postgres`,
/// `sqs`), so a benchmark says which path its figures are about.
pub async fn work_queues(
    client: &impl GenericClient,
    since: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<(String, i64)>, StoreError> {
    work_counts_by(client, since, "queue").await
}

async fn work_counts_by(
    client: &impl GenericClient,
    since: chrono::DateTime<chrono::Utc>,
    column: &'static str,
) -> Result<Vec<(String, i64)>, StoreError> {
    Ok(client
        .query(
            &format!(
                "SELECT {column}, count(*) FROM runner_work WHERE created_at >= $1 \
                 GROUP BY {column} ORDER BY {column}"
            ),
            &[&since],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect())
}

/// Runner work fixtures shared by the store's and the functions' tests.
pub mod runner_work {
    use serde_json::json;
    use uuid::Uuid;
    use wc_domain::{EventRole, ProjectId, WorkMode};

    use crate::Pool;
    use crate::runners::{self, Registered, Registration};
    use crate::tasks::Ending;
    use crate::work::{self, Enqueued, NewWork, QueueRoute};

    /// Owner fingerprint of fixture work.
    pub const FP: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    /// Creates runner `client_id` (serving project `web`) and registers an instance of it.
    pub async fn runner(pool: &Pool, client_id: &str) -> Uuid {
        let c = pool.get().await.expect("a connection");
        let mut digest = [0u8; 32];
        digest[..16].copy_from_slice(Uuid::new_v4().as_bytes());
        runners::create(&c, client_id, None, &digest, false)
            .await
            .expect("create runner")
            .expect("a new runner");
        register(pool, client_id).await
    }

    /// An ending that writes no evidence, for transitions whose work has no session to write
    /// to; a task waiting for the work completes with the work's state and its stdout head.
    #[derive(Debug, Clone, Copy)]
    pub struct NoEvidence;

    impl work::WorkEnding for NoEvidence {
        fn evidence(
            &self,
            _: &work::WorkRow,
            _: Option<&serde_json::Value>,
        ) -> Option<crate::sessions::NewEvent> {
            None
        }

        fn head_bytes(&self) -> i64 {
            HEAD_BYTES
        }

        fn task_end(&self, _: &crate::tasks::TaskRow, work: &work::EndedWork<'_>) -> Ending {
            ended_with(work)
        }
    }

    /// How many bytes of each stream the testing endings read.
    pub const HEAD_BYTES: i64 = 4;

    fn ended_with(work: &work::EndedWork<'_>) -> Ending {
        Ending {
            status: wc_domain::TaskStatus::Completed,
            result: Some(json!({
                "state": work.row.state,
                "stdout": String::from_utf8_lossy(&work.stdout),
                "answered": work.answer.is_some(),
            })),
            error: None,
            status_message: Some("ended with its work".into()),
            events: Vec::new(),
        }
    }

    /// An ending whose `execution_finished` is a marker naming the work and the state it
    /// ended in; tasks end as [`NoEvidence`] ends them.
    #[derive(Debug, Clone, Copy)]
    pub struct MarkerEvidence;

    impl work::WorkEnding for MarkerEvidence {
        fn evidence(
            &self,
            row: &work::WorkRow,
            _: Option<&serde_json::Value>,
        ) -> Option<crate::sessions::NewEvent> {
            Some(crate::sessions::NewEvent {
                kind: wc_domain::EventKind::ExecutionFinished,
                call_id: Uuid::now_v7(),
                invocation_id: Uuid::now_v7(),
                role: EventRole::Business,
                tool_name: Some(row.tool.clone()),
                payload: json!({"job_id": row.id, "state": row.state}),
            })
        }

        fn head_bytes(&self) -> i64 {
            HEAD_BYTES
        }

        fn task_end(&self, _: &crate::tasks::TaskRow, work: &work::EndedWork<'_>) -> Ending {
            ended_with(work)
        }
    }

    /// Registers a fresh instance of runner `client_id`.
    pub async fn register(pool: &Pool, client_id: &str) -> Uuid {
        let instance = Uuid::now_v7();
        let got = runners::register(
            pool,
            &Registration {
                client_id,
                instance_id: instance,
                agent_version: "test",
                queue: "api_poll",
                max_concurrency: 4,
                projects: &["web".to_owned()],
                work_kinds: &[
                    "process".to_owned(),
                    "shell".to_owned(),
                    "script".to_owned(),
                ],
            },
            &NoEvidence,
        )
        .await
        .expect("register runner");
        assert!(matches!(got, Registered::Current { .. }), "{got:?}");
        instance
    }

    /// The outcome of a process that exited with `code`.
    pub fn exited(code: i32) -> wc_runner_protocol::WorkOutcome {
        wc_runner_protocol::WorkOutcome {
            exit_code: Some(code),
            duration_ms: 1,
            ..wc_runner_protocol::WorkOutcome::ended(wc_runner_protocol::Termination::Exited)
        }
    }

    /// A small `run_process` work item for runner `client_id` on `queue`.
    pub fn new_work(client_id: &str, queue: QueueRoute) -> NewWork {
        let id = Uuid::now_v7();
        let item = wc_runner_protocol::WorkItem {
            protocol_version: wc_runner_protocol::PROTOCOL_VERSION,
            work_id: id,
            project: "web".into(),
            cwd: None,
            spec: wc_runner_protocol::WorkSpec::Process {
                argv: vec!["true".into()],
            },
            stdin: None,
            env: Default::default(),
            limits: wc_runner_protocol::WorkLimits {
                timeout_ms: 1000,
                output_bytes_per_stream: 10,
            },
        };
        NewWork {
            id,
            client_id: client_id.into(),
            project_id: ProjectId::of_runner(client_id, "web").expect("project id"),
            owner_authority_fingerprint: FP.into(),
            session_id: None,
            tool: "run_process".into(),
            mode: WorkMode::Sync,
            item,
            expectation: Default::default(),
            queue,
        }
    }

    /// Queues `w` and returns its id.
    pub async fn enqueue(pool: &Pool, w: &NewWork) -> Uuid {
        match work::applied(
            work::enqueue(pool, w, None, work::OpenLimits::NONE)
                .await
                .expect("enqueue"),
        )
        .expect("applied")
        {
            Enqueued::Queued(row, _) => row.id,
            other => panic!("{other:?}"),
        }
    }
}

/// IAM auth signing for tests: fixed example credentials, and either the real clock or a clock
/// that ticks one second per reading (so consecutive tokens differ deterministically).
#[derive(Debug)]
pub struct FixedSigning {
    ticking: Option<std::sync::Mutex<std::time::SystemTime>>,
}

impl FixedSigning {
    /// Fixed credentials, the real clock.
    pub fn real_clock() -> FixedSigning {
        FixedSigning { ticking: None }
    }

    /// Fixed credentials, a clock reading `start`, then one second later at each reading.
    pub fn ticking_from(start: std::time::SystemTime) -> FixedSigning {
        FixedSigning {
            ticking: Some(std::sync::Mutex::new(start)),
        }
    }

    /// The credentials every token is signed with.
    pub fn credentials() -> aws_credential_types::Credentials {
        aws_credential_types::Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            None,
            None,
            "test",
        )
    }
}

impl crate::iam_auth::SigningContext for FixedSigning {
    fn now(&self) -> std::time::SystemTime {
        match &self.ticking {
            None => std::time::SystemTime::now(),
            Some(next) => {
                let mut next = next.lock().expect("clock lock");
                let now = *next;
                *next += Duration::from_secs(1);
                now
            }
        }
    }

    fn credentials(
        &self,
    ) -> crate::iam_auth::BoxFuture<
        '_,
        Result<aws_credential_types::Credentials, crate::iam_auth::IamAuthError>,
    > {
        Box::pin(async { Ok(Self::credentials()) })
    }
}
