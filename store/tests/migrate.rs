//! Migrations against a real Postgres.

use wc_store::migrate;
use wc_store::testing::TestDatabase;

#[tokio::test]
async fn migrating_twice_applies_nothing_the_second_time() {
    let db = TestDatabase::empty().await;
    let first = migrate::migrate(&db.config()).await.unwrap();
    assert_eq!(first.level, migrate::expected_level());
    assert!(!first.applied.is_empty());
    let second = migrate::migrate(&db.config()).await.unwrap();
    assert!(second.applied.is_empty(), "{second:?}");
    assert_eq!(second.level, first.level);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_migrators_both_succeed_and_apply_each_migration_once() {
    let db = TestDatabase::empty().await;
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let config = db.config();
            tokio::spawn(async move { migrate::migrate(&config).await })
        })
        .collect();
    let mut applied = Vec::new();
    for r in runs {
        applied.extend(r.await.unwrap().expect("every migrator succeeds").applied);
    }
    let expected = (1..=migrate::expected_level()).count();
    assert_eq!(
        applied.len(),
        expected,
        "each migration applied by exactly one run: {applied:?}"
    );
    let client = db.pool().get().await.unwrap();
    let rows: i64 = client
        .query_one("SELECT count(*) FROM refinery_schema_history", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows as usize, expected);
}

#[tokio::test]
async fn template_databases_arrive_migrated() {
    let db = TestDatabase::new().await;
    let client = db.pool().get().await.unwrap();
    assert_eq!(
        migrate::current_level(&client).await.unwrap(),
        Some(migrate::expected_level())
    );
}

/// The tables whose single-column rules are column types (domains) since V9 and V10.
const DOMAIN_TABLES: [&str; 7] = [
    "workflow_sessions",
    "session_events",
    "session_messages",
    "action_sessions",
    "action_events",
    "runner_work",
    "runner_work_output",
];

/// Rows as the schema before V9 held them.
const LEVEL_8_ROWS: &str = "
INSERT INTO workflow_sessions (id, project, owner_authority_fingerprint, mode, lifecycle,
    events_observed, messages_posted, messages_retained, kind_counts)
VALUES ('wc_sess_AAAAAAAAAAAAAAAAAAAAAA', 'web', repeat('ab', 32), 'normal', 'active',
    1, 1, 1, '{\"task_instruction\": 1}');
INSERT INTO session_events (session_id, seq, kind, call_id, invocation_id, role, tool_name, payload)
VALUES ('wc_sess_AAAAAAAAAAAAAAAAAAAAAA', 1, 'task_instruction', gen_random_uuid(),
    gen_random_uuid(), 'business', 'work_on_project', '{\"excerpt\": \"fix the build\"}');
INSERT INTO session_messages (id, session_id, number, kind, priority, ack_required, status, body,
    body_redacted, observation_revision)
VALUES ('wc_msg_BBBBBBBBBBBBBBBBBBBBBB', 'wc_sess_AAAAAAAAAAAAAAAAAAAAAA', 1, 'note', 'normal',
    false, 'open', 'hello', false, 1);
INSERT INTO action_sessions (session_id, caller_fingerprint, event_count)
VALUES ('audit-1', repeat('c', 64), 1);
INSERT INTO action_events (id, session_id, seq, endpoint, http_method, action_name, operation,
    status_code, success, duration_ms)
VALUES (gen_random_uuid(), 'audit-1', 1, '/mcp', 'POST', 'runtime_status', 'mcp_tools_call',
    200, true, 3);
INSERT INTO runner_work (id, client_id, project_id, owner_authority_fingerprint, tool, mode, item,
    queue)
VALUES ('00000000-0000-0000-0000-000000000001', 'host', 'web', repeat('ab', 32), 'run_process',
    'sync', '{}', 'postgres');
INSERT INTO runner_work_output (work_id, stream, byte_offset, data)
VALUES ('00000000-0000-0000-0000-000000000001', 'stdout', 0, 'hi'::bytea);
";

#[tokio::test]
async fn an_upgrade_to_column_domains_keeps_the_rows_and_every_rule() {
    let db = TestDatabase::empty().await;
    let old = migrate::migrate_up_to(&db.config(), Some(8)).await.unwrap();
    assert_eq!(old.level, 8);
    let client = db.pool().get().await.unwrap();
    client.batch_execute(LEVEL_8_ROWS).await.unwrap();

    let upgrade = migrate::migrate(&db.config()).await.unwrap();
    assert_eq!(upgrade.level, migrate::expected_level());
    for applied in ["V9__column_domains", "V10__runner_work_domains"] {
        assert!(upgrade.applied.iter().any(|a| a == applied), "{upgrade:?}");
    }

    // The rows are all there, unchanged.
    let session = client
        .query_one(
            "SELECT lifecycle::text, events_observed::bigint, messages_retained::int, \
               kind_counts::jsonb, owner_authority_fingerprint::text FROM workflow_sessions",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(session.get::<_, String>(0), "active");
    assert_eq!(session.get::<_, i64>(1), 1);
    assert_eq!(session.get::<_, i32>(2), 1);
    assert_eq!(
        session.get::<_, serde_json::Value>(3),
        serde_json::json!({"task_instruction": 1})
    );
    assert_eq!(session.get::<_, String>(4), "ab".repeat(32));
    for (table, rows) in [
        ("session_events", 1i64),
        ("session_messages", 1),
        ("action_sessions", 1),
        ("action_events", 1),
        ("runner_work", 1),
        ("runner_work_output", 1),
    ] {
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, rows, "{table}");
    }
    let payload: serde_json::Value = client
        .query_one("SELECT payload::jsonb FROM session_events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(payload, serde_json::json!({"excerpt": "fix the build"}));

    // Every single-column rule of these tables is now its column's type; the rules over
    // several columns are still table constraints.
    let single: Vec<String> = client
        .query(
            "SELECT conrelid::regclass::text || '.' || conname FROM pg_constraint \
             WHERE contype = 'c' AND cardinality(conkey) = 1 \
               AND conrelid::regclass::text = ANY($1)",
            &[&DOMAIN_TABLES.to_vec()],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(single.is_empty(), "single-column table checks: {single:?}");
    let column_type: String = client
        .query_one(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = 'workflow_sessions'::regclass AND attname = 'events_observed'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(column_type, "wc_count");

    // Each rule still refuses what it refused, naming itself, and writes nothing.
    let refused = [
        (
            "UPDATE workflow_sessions SET events_observed = -1",
            "wc_count_nonnegative",
        ),
        (
            "UPDATE workflow_sessions SET lifecycle = 'paused'",
            "wc_session_lifecycle_values",
        ),
        (
            "UPDATE workflow_sessions SET messages_retained = 501",
            "workflow_sessions_messages_retained_bound",
        ),
        (
            "UPDATE workflow_sessions SET owner_authority_fingerprint = 'ABC'",
            "wc_sha256_hex_format",
        ),
        (
            "INSERT INTO session_messages (id, session_id, number, kind, priority, ack_required, \
               status, body, body_redacted, observation_revision) \
             VALUES ('wc_msg_short', 'wc_sess_AAAAAAAAAAAAAAAAAAAAAA', 2, 'note', 'normal', \
               false, 'open', 'hi', false, 2)",
            "wc_message_id_format",
        ),
        (
            "UPDATE session_messages SET status = 'completed'",
            "session_messages_check",
        ),
        (
            "UPDATE session_events SET role = 'observer'",
            "wc_event_role_values",
        ),
        (
            "UPDATE action_sessions SET status = 'paused'",
            "wc_audit_status_values",
        ),
        (
            "UPDATE action_events SET endpoint = repeat('/', 201)",
            "wc_text_200_length",
        ),
        (
            "UPDATE runner_work SET state = 'paused'",
            "wc_work_state_values",
        ),
        (
            "UPDATE runner_work_output SET data = ''::bytea",
            "wc_output_chunk_size",
        ),
    ];
    for (sql, constraint) in refused {
        let err = client.execute(sql, &[]).await.unwrap_err();
        assert_eq!(
            err.as_db_error().and_then(|e| e.constraint()),
            Some(constraint),
            "{sql}: {err}"
        );
    }
    let after = client
        .query_one(
            "SELECT lifecycle::text, events_observed::bigint, messages_retained::int \
             FROM workflow_sessions",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (
            after.get::<_, String>(0),
            after.get::<_, i64>(1),
            after.get::<_, i32>(2)
        ),
        ("active".to_owned(), 1, 1)
    );
}
