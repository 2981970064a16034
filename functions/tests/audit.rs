//! Action Audit Sessions over a real database: one row per audited request, the tool-surface
//! and model-ergonomics summaries, session affinity, attribution, the operator routes,
//! concurrency across instances, failure isolation and the dispatch deadline.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use common::*;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use wc_functions::AppState;
use wc_functions::config::ServerConfig;
use wc_store::credentials::CredentialKind;
use wc_store::testing::TestDatabase;

/// The raw JSON text of `result` and of `result.tools` in a JSON-RPC response body.
fn raw_result_and_tools(bytes: &[u8]) -> (String, String) {
    #[derive(serde::Deserialize)]
    struct Resp<'a> {
        #[serde(borrow)]
        result: &'a RawValue,
    }
    #[derive(serde::Deserialize)]
    struct Res<'a> {
        #[serde(borrow)]
        tools: &'a RawValue,
    }
    let resp: Resp<'_> = serde_json::from_slice(bytes).expect("a JSON-RPC result");
    let res: Res<'_> = serde_json::from_str(resp.result.get()).expect("a tools array");
    (resp.result.get().to_owned(), res.tools.get().to_owned())
}

fn ergonomics(row: &EventRow) -> &Value {
    let m = &row.summary["model_ergonomics"];
    assert!(m.is_object(), "no model_ergonomics: {}", row.summary);
    m
}

// ---------------------------------------------------------------------------------------------
// One row per request

#[tokio::test]
async fn every_audited_request_leaves_exactly_one_row() {
    let TestApp { db, st, key } = TestApp::new().await;
    let legacy = LEGACY[0];
    let mut expected = 0;

    let requests: Vec<(Request<Body>, &str, &str)> = vec![
        (
            mcp_request(
                legacy,
                Some(&key),
                &rpc(
                    legacy,
                    1,
                    "initialize",
                    json!({ "protocolVersion": legacy, "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }),
                ),
            ),
            "/mcp",
            "mcp_initialize",
        ),
        (
            mcp_request(legacy, Some(&key), &rpc(legacy, 2, "ping", json!({}))),
            "/mcp",
            "mcp_ping",
        ),
        (
            mcp_request(MODERN, Some(&key), &rpc(MODERN, 3, "tools/list", json!({}))),
            "/mcp",
            "mcp_tools_list",
        ),
        (
            mcp_request(
                MODERN,
                Some(&key),
                &rpc(MODERN, 4, "server/discover", json!({})),
            ),
            "/mcp",
            "mcp_server_discover",
        ),
        (
            // A stream: recorded when it opens, its body passed through.
            mcp_request(
                MODERN,
                Some(&key),
                &rpc(
                    MODERN,
                    41,
                    "subscriptions/listen",
                    json!({ "notifications": {} }),
                ),
            ),
            "/mcp",
            "mcp_subscriptions_listen",
        ),
        (
            mcp_request(
                MODERN,
                Some(&key),
                &rpc(
                    MODERN,
                    5,
                    "tools/call",
                    json!({ "name": "runtime_status", "arguments": {} }),
                ),
            ),
            "/mcp",
            "mcp_tools_call",
        ),
        (
            mcp_request(
                legacy,
                Some(&key),
                &rpc(
                    legacy,
                    6,
                    "tools/call",
                    json!({ "name": "no_such_tool", "arguments": {} }),
                ),
            ),
            "/mcp",
            "mcp_tools_call",
        ),
        (
            mcp_request(MODERN, Some(&key), &rpc(MODERN, 7, "foo/bar", json!({}))),
            "/mcp",
            "mcp_foo_bar",
        ),
        (
            {
                let mut r = mcp_request(legacy, Some(&key), &json!({}));
                *r.body_mut() = Body::from("{not json");
                r
            },
            "/mcp",
            "mcp_invalid_request",
        ),
        (
            rest_request("/api/actions/runtime_status", Some(&key), &json!({})),
            "/api/actions/runtime_status",
            "rest_tool_call",
        ),
        (
            rest_request(
                "/api/tools/call",
                Some(&key),
                &json!({ "tool": "list_projects", "arguments": { "limit": 0 } }),
            ),
            "/api/tools/call",
            "rest_tool_call",
        ),
        (
            rest_request("/api/tools/list", Some(&key), &json!({})),
            "/api/tools/list",
            "rest_tools_list",
        ),
        (
            rest_request(
                "/api/tools/call",
                Some(&key),
                &json!({ "tool": "no_such_tool" }),
            ),
            "/api/tools/call",
            "rest_rejected",
        ),
        (
            rest_request("/api/actions/no_such_tool", Some(&key), &json!({})),
            "/api/actions/no_such_tool",
            "rest_rejected",
        ),
    ];
    for (req, endpoint, operation) in requests {
        let r = send(&st, req).await;
        expected += 1;
        let row = event_of(&db, &r).await;
        assert_eq!(row.endpoint, endpoint, "{}", r.text());
        assert_eq!(row.operation, operation, "{}", r.text());
        assert_eq!(row.http_method, "POST");
        assert_eq!(i32::from(r.status.as_u16()), row.status_code);
        assert_eq!(events(&db).await.len(), expected, "after {operation}");
    }

    // Notifications have no row.
    for version in VERSIONS {
        let r = send(
            &st,
            mcp_request(
                version,
                Some(&key),
                &notification("notifications/initialized"),
            ),
        )
        .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{version}: {}", r.text());
    }
    // Nor do requests that never reach the audited routes (no credential, GET).
    let r = tools_list(&st, MODERN, None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let get = Request::get("/mcp")
        .header(header::HOST, "localhost")
        .header(header::AUTHORIZATION, format!("Bearer {key}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&st, get).await.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(events(&db).await.len(), expected);

    // The failed ones count as failures, the rest as successes.
    let rows = events(&db).await;
    let failed: Vec<&str> = rows
        .iter()
        .filter(|e| !e.success)
        .map(|e| e.operation.as_str())
        .collect();
    assert_eq!(
        failed,
        [
            "mcp_tools_call",
            "mcp_foo_bar",
            "mcp_invalid_request",
            "rest_tool_call",
            "rest_rejected",
            "rest_rejected"
        ],
        "{rows:?}"
    );
}

#[tokio::test]
async fn tools_list_rows_measure_the_tool_surface() {
    let db = TestDatabase::new().await;
    let st = state(&db);
    let full = full_key(&db).await;
    let limited = credential(&db, CredentialKind::Project, &[], &["agent:local:a"]).await;
    for key in [&full, &limited] {
        for version in VERSIONS {
            let r = tools_list(&st, version, Some(key)).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text());
            let row = event_of(&db, &r).await;
            assert_eq!(row.endpoint, "/mcp");
            assert_eq!(row.action_name, "toolsList");
            assert_eq!(row.operation, "mcp_tools_list");
            assert!(row.success);
            let surface = &row.summary["tool_surface"];
            assert_eq!(surface["schema_version"], 1, "{surface}");
            let era = if version == MODERN {
                "stateless_2026"
            } else {
                "legacy"
            };
            assert_eq!(surface["protocol_era"], era, "{version}: {surface}");
            let tools = r.result()["tools"].as_array().unwrap();
            assert_eq!(surface["tool_count"], tools.len(), "{surface}");
            let (raw_result, raw_tools) = raw_result_and_tools(&r.bytes);
            assert_eq!(
                surface["serialized_tools_bytes"],
                raw_tools.len(),
                "{version}: {surface}"
            );
            assert_eq!(
                surface["serialized_result_bytes"],
                raw_result.len(),
                "{version}: {surface}"
            );
            assert_eq!(surface["gateway_tool_included"], false, "{surface}");
            assert!(row.summary.get("model_ergonomics").is_none());
        }
    }
    // The REST listing is audited too.
    let r = rest(&st, "/api/tools/list", Some(&full), json!({})).await;
    let row = event_of(&db, &r).await;
    assert_eq!(row.endpoint, "/api/tools/list");
    assert_eq!(row.action_name, "toolsList");
    assert_eq!(row.operation, "rest_tools_list");
}

#[tokio::test]
async fn tool_call_rows_carry_model_ergonomics_without_argument_values() {
    let TestApp { db, st, key } = TestApp::new().await;
    let limited = credential(&db, CredentialKind::Project, &[], &["agent:local:a"]).await;
    let nine: Vec<String> = (0..9).map(|i| format!("wc_msg_{i}")).collect();
    // (caller, tool, arguments, success, error kind, bytes measured)
    type Case<'a> = (&'a str, &'a str, Value, bool, Option<&'a str>, bool);
    let cases: Vec<Case<'_>> = vec![
        (&key, "runtime_status", json!({}), true, None, true),
        (
            &key,
            "list_tools",
            json!({ "category": "qzxvcategory" }),
            true,
            None,
            true,
        ),
        (
            &key,
            "list_projects",
            json!({ "limit": 437 }),
            true,
            None,
            true,
        ),
        (
            &key,
            "list_projects",
            json!({ "limit": 987_654_321 }),
            false,
            Some("invalid_arguments"),
            false,
        ),
        (
            &key,
            "list_tools",
            json!({ "secretarg": "qzxvvalue" }),
            false,
            Some("invalid_arguments"),
            false,
        ),
        (
            &limited,
            "list_projects",
            json!({ "limit": 438 }),
            false,
            Some("insufficient_scope"),
            false,
        ),
        (
            &key,
            "runtime_status",
            json!({ "ack_session_message_ids": nine }),
            false,
            Some("invalid_params"),
            false,
        ),
        (
            &key,
            "runtime_status",
            json!({ "recording_session_id": "qzxv" }),
            false,
            Some("invalid_params"),
            false,
        ),
    ];
    for version in VERSIONS {
        for (auth, tool, args, success, kind, measured) in &cases {
            let r = tools_call(&st, version, Some(auth), tool, args.clone()).await;
            let row = event_of(&db, &r).await;
            let what = format!("{version} {tool} {args}");
            assert_eq!(row.endpoint, "/mcp", "{what}");
            assert_eq!(row.operation, "mcp_tools_call", "{what}");
            assert_eq!(row.action_name, *tool, "{what}");
            assert_eq!(row.success, *success, "{what}");
            assert_eq!(row.summary["transport"], "mcp", "{what}");
            let m = ergonomics(&row);
            assert_eq!(m["schema_version"], 6, "{what}: {m}");
            assert_eq!(m["tool_name"], *tool, "{what}: {m}");
            assert_eq!(m["success"], *success, "{what}: {m}");
            assert_eq!(m["error_kind"].as_str(), *kind, "{what}: {m}");
            if *measured {
                let sc = &r.result()["structuredContent"];
                let text = r.result()["content"][0]["text"].as_str().unwrap();
                assert_eq!(m["serialized_result_bytes"], text.len(), "{what}: {m}");
                assert_eq!(
                    m["serialized_result_bytes"],
                    serde_json::to_vec(sc).unwrap().len(),
                    "{what}: {m}"
                );
                assert_eq!(m["execution_state"], "completed", "{what}: {m}");
            } else {
                assert!(
                    m["serialized_result_bytes"].is_null(),
                    "{what}: rejected calls have no result size: {m}"
                );
                assert_eq!(m["execution_state"], "rejected", "{what}: {m}");
            }
            let summary = row.summary.to_string();
            for value in ["qzxv", "987654321", "437", "438", "wc_msg_"] {
                assert!(
                    !summary.contains(value),
                    "{what}: argument value {value} in the summary: {summary}"
                );
            }
        }
    }
    // REST tool calls carry the same record, measured on the REST body.
    for (auth, tool, args, success, kind, measured) in &cases[..6] {
        let r = rest(
            &st,
            "/api/tools/call",
            Some(auth),
            json!({ "tool": tool, "arguments": args }),
        )
        .await;
        let row = event_of(&db, &r).await;
        assert_eq!(row.operation, "rest_tool_call");
        assert_eq!(row.action_name, *tool);
        assert_eq!(row.success, *success);
        assert_eq!(row.summary["transport"], "rest");
        let m = ergonomics(&row);
        assert_eq!(m["schema_version"], 6);
        assert_eq!(m["error_kind"].as_str(), *kind, "{m}");
        if *measured {
            assert_eq!(m["serialized_result_bytes"], r.bytes.len(), "{tool}: {m}");
        } else {
            assert!(m["serialized_result_bytes"].is_null(), "{m}");
        }
        let summary = row.summary.to_string();
        assert!(!summary.contains("qzxv") && !summary.contains("987654321"));
    }
}

#[tokio::test]
async fn serialized_result_bytes_leave_out_the_session_attention_sidecar() {
    let db = TestDatabase::new().await;
    register_project(&db, "agent:local:a").await;
    let st = state(&db);
    let key = full_key(&db).await;
    let started = tools_call(
        &st,
        MODERN,
        Some(&key),
        "start_session",
        json!({ "project": "agent:local:a", "instruction": "audited" }),
    )
    .await;
    let w = output(&started.result()["structuredContent"])["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    let posted = tools_call(
        &st,
        MODERN,
        Some(&key),
        "post_session_message",
        json!({ "session_id": w, "kind": "question", "body": "confirm", "ack_required": true }),
    )
    .await;
    assert_eq!(
        posted.result()["structuredContent"]["success"],
        true,
        "{}",
        posted.text()
    );
    for version in VERSIONS {
        let r = tools_call(
            &st,
            version,
            Some(&key),
            "list_projects",
            json!({ "recording_session_id": w }),
        )
        .await;
        let sc = &r.result()["structuredContent"];
        assert_eq!(sc["session_attention"]["total"], 1, "{version}: {sc}");
        let mut model_facing = sc.clone();
        model_facing
            .as_object_mut()
            .unwrap()
            .remove("session_attention");
        let m = ergonomics(&event_of(&db, &r).await).clone();
        assert_eq!(
            m["serialized_result_bytes"],
            serde_json::to_vec(&model_facing).unwrap().len(),
            "{version}: {m}"
        );
        assert!(
            serde_json::to_vec(sc).unwrap().len()
                > serde_json::to_vec(&model_facing).unwrap().len()
        );
    }
    // The REST body carries the sidecar too; its size is not the measure either.
    let r = rest(
        &st,
        "/api/tools/call",
        Some(&key),
        json!({ "tool": "list_projects", "arguments": {}, "recording_session_id": w }),
    )
    .await;
    assert_eq!(r.body["session_attention"]["total"], 1, "{}", r.text());
    let mut model_facing = r.body.clone();
    model_facing
        .as_object_mut()
        .unwrap()
        .remove("session_attention");
    let m = ergonomics(&event_of(&db, &r).await).clone();
    assert_eq!(
        m["serialized_result_bytes"],
        serde_json::to_vec(&model_facing).unwrap().len(),
        "{m}"
    );
}

// ---------------------------------------------------------------------------------------------
// Session affinity

#[tokio::test]
async fn an_explicit_session_id_selects_that_session_on_every_surface() {
    let TestApp { db, st, key } = TestApp::new().await;
    let list = rpc(MODERN, 1, "tools/list", json!({}));

    for (i, header_name) in ["x-action-session-id", "x-webcodex-session-id"]
        .into_iter()
        .enumerate()
    {
        let sid = format!("ops-header-{i}");
        let mut req = mcp_request(MODERN, Some(&key), &list);
        set_header(&mut req, header_name, &sid);
        let first = event_of(&db, &send(&st, req).await).await;
        assert_eq!(first.session_id, sid, "{header_name}");
        assert_eq!(first.seq, 1);
        let mut req = rest_request("/api/actions/runtime_status", Some(&key), &json!({}));
        set_header(&mut req, header_name, &sid);
        let second = event_of(&db, &send(&st, req).await).await;
        assert_eq!(second.session_id, sid, "{header_name}");
        assert_eq!(second.seq, 2);
    }

    let sid = "ops-query.1:x";
    let mut req = mcp_request(MODERN, Some(&key), &list);
    *req.uri_mut() = format!("/mcp?action_session_id={sid}").parse().unwrap();
    let r = send(&st, req).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(event_of(&db, &r).await.session_id, sid);
    let r = send(
        &st,
        rest_request(
            &format!("/api/tools/call?action_session_id={sid}"),
            Some(&key),
            &json!({ "tool": "list_tools" }),
        ),
    )
    .await;
    let row = event_of(&db, &r).await;
    assert_eq!((row.session_id.as_str(), row.seq), (sid, 2));

    // A session another caller opened takes none of its requests: naming it records the
    // request in that caller's own session.
    let other = credential(&db, CredentialKind::SharedKey, &["project:read"], &[]).await;
    let mut req = mcp_request(MODERN, Some(&other), &list);
    set_header(&mut req, "x-action-session-id", sid);
    let row = event_of(&db, &send(&st, req).await).await;
    assert_ne!(row.session_id, sid);
    assert_eq!(row.seq, 1);

    // A malformed id is ignored, as if none were given: a fresh caller gets a new session.
    let fresh = credential(&db, CredentialKind::SharedKey, &[], &[]).await;
    let mut req = mcp_request(MODERN, Some(&fresh), &list);
    set_header(&mut req, "x-action-session-id", "bad id/with spaces");
    let row = event_of(&db, &send(&st, req).await).await;
    assert!(
        uuid::Uuid::parse_str(&row.session_id).is_ok(),
        "{}",
        row.session_id
    );
    assert_eq!(row.seq, 1);

    // The stored sessions agree with the events.
    let admin = rest(
        &st,
        "/api/audit/session",
        Some(&key),
        json!({ "session_id": sid }),
    )
    .await;
    assert_eq!(admin.status, StatusCode::OK, "{}", admin.text());
    assert_eq!(admin.body["session"]["event_count"], 2);
    let seqs: Vec<i64> = admin.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2]);
}

#[tokio::test]
async fn without_an_id_a_caller_reuses_its_idle_open_session() {
    let db = TestDatabase::new().await;
    let st = state_with(
        &db,
        ServerConfig {
            audit_idle_timeout: Duration::from_secs(1),
            ..ServerConfig::default()
        },
    );
    let a = full_key(&db).await;
    let b = full_key(&db).await;

    let call = |auth: String, mcp: bool| {
        let st = st.clone();
        async move {
            if mcp {
                tools_call(&st, MODERN, Some(&auth), "runtime_status", json!({})).await
            } else {
                rest(&st, "/api/actions/runtime_status", Some(&auth), json!({})).await
            }
        }
    };

    let a1 = event_of(&db, &call(a.clone(), true).await).await;
    let a2 = event_of(&db, &call(a.clone(), false).await).await;
    let b1 = event_of(&db, &call(b.clone(), true).await).await;
    let a3 = event_of(&db, &call(a.clone(), true).await).await;
    assert_eq!(
        a1.session_id, a2.session_id,
        "consecutive calls share a session"
    );
    assert_eq!(a2.session_id, a3.session_id);
    assert_eq!((a1.seq, a2.seq, a3.seq), (1, 2, 3));
    assert_ne!(
        b1.session_id, a1.session_id,
        "another caller, another session"
    );
    assert_eq!(b1.seq, 1);
    assert!(
        uuid::Uuid::parse_str(&a1.session_id).is_ok(),
        "{}",
        a1.session_id
    );

    let a4 = event_of(&db, &call(a.clone(), false).await).await;
    assert_eq!(
        (a4.session_id.as_str(), a4.seq),
        (a1.session_id.as_str(), 4)
    );

    // Past the idle timeout, a new session: once the database, whose clock decides idleness,
    // says the session has been idle for longer than the timeout.
    eventually("the session idles past its timeout", async || {
        let client = db.pool().get().await.unwrap();
        client
            .query_one(
                "SELECT now() - last_event_at > interval '1500 milliseconds' \
                 FROM action_sessions WHERE session_id = $1",
                &[&a1.session_id],
            )
            .await
            .unwrap()
            .get::<_, bool>(0)
            .then_some(())
    })
    .await;
    let a5 = event_of(&db, &call(a.clone(), true).await).await;
    assert_ne!(a5.session_id, a1.session_id, "an idle session was reused");
    assert_eq!(a5.seq, 1);
    let a6 = event_of(&db, &call(a.clone(), true).await).await;
    assert_eq!(a6.session_id, a5.session_id);

    // Closing it: the next call opens a new one.
    let closed = rest(
        &st,
        "/api/audit/session/close",
        Some(&a),
        json!({ "session_id": a5.session_id }),
    )
    .await;
    assert_eq!(closed.status, StatusCode::OK, "{}", closed.text());
    assert_eq!(closed.body["closed"], true);
    assert_eq!(closed.body["session"]["status"], "closed");
    let a7 = event_of(&db, &call(a.clone(), false).await).await;
    assert_ne!(a7.session_id, a5.session_id, "a closed session was reused");
    assert_eq!(a7.seq, 1);
    let again = rest(
        &st,
        "/api/audit/session/close",
        Some(&a),
        json!({ "session_id": a5.session_id }),
    )
    .await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body["closed"], false);
    let missing = rest(
        &st,
        "/api/audit/session/close",
        Some(&a),
        json!({ "session_id": "no-such-session" }),
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.text());
}

// ---------------------------------------------------------------------------------------------
// Attribution and the operator routes

#[tokio::test]
async fn attribution_is_stored_per_event_but_never_served() {
    let db = TestDatabase::new().await;
    let st = state(&db);
    let admin = full_key(&db).await;
    let project = credential(
        &db,
        CredentialKind::Project,
        &["project:read"],
        &["agent:local:a"],
    )
    .await;
    let sid = "attribution-1";
    for (auth, n) in [(&admin, 3), (&project, 2)] {
        for _ in 0..n {
            let mut req = rest_request("/api/actions/runtime_status", Some(auth), &json!({}));
            set_header(&mut req, "x-action-session-id", sid);
            assert_eq!(send(&st, req).await.status, StatusCode::OK);
        }
    }
    let rows = events(&db).await;
    let kinds: Vec<&str> = rows
        .iter()
        .map(|e| e.principal_kind.as_deref().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "shared_key",
            "shared_key",
            "shared_key",
            "project_credential",
            "project_credential"
        ]
    );
    assert!(rows.iter().all(|e| e.principal_user_id.is_none()));
    assert!(rows.iter().all(|e| e.oauth_client_id.is_none()));

    for (path, body) in [
        ("/api/audit/session", json!({ "session_id": sid })),
        ("/api/audit/sessions", json!({})),
        ("/api/audit/session/close", json!({ "session_id": sid })),
    ] {
        let r = rest(&st, path, Some(&admin), body).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text());
        for field in ["principal_kind", "principal_user_id", "oauth_client_id"] {
            assert!(
                !r.text().contains(field),
                "{path} serves {field}: {}",
                r.text()
            );
        }
        assert!(!r.text().contains("caller_fingerprint"), "{path}");
    }

    let stats = rest(&st, "/api/audit/stats", Some(&admin), json!({})).await;
    assert_eq!(stats.status, StatusCode::OK, "{}", stats.text());
    // The stats request itself is not an audited route, so it counts only the five calls.
    assert_eq!(
        stats.body["credential_kinds"],
        json!({ "shared_key": 3, "project_credential": 2 }),
        "{}",
        stats.text()
    );
    let cov = &stats.body["coverage"];
    assert_eq!(
        (&cov["scanned"], &cov["available"], &cov["complete"]),
        (&json!(5), &json!(5), &json!(true)),
        "{cov}"
    );
    let partial = rest(
        &st,
        "/api/audit/stats",
        Some(&admin),
        json!({ "max_scan": 2 }),
    )
    .await;
    let cov = &partial.body["coverage"];
    assert_eq!(
        (&cov["scanned"], &cov["available"], &cov["complete"]),
        (&json!(2), &json!(5), &json!(false)),
        "{cov}"
    );
    let counted: i64 = partial.body["credential_kinds"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert_eq!(counted, 2, "a partial scan aggregates only what it scanned");
    assert_eq!(partial.body["events"]["total"], 2);
}

#[tokio::test]
async fn audit_routes_need_audit_read() {
    let db = TestDatabase::new().await;
    let st = state(&db);
    let project = credential(
        &db,
        CredentialKind::Project,
        &["project:read", "project:write"],
        &["agent:local:a"],
    )
    .await;
    let no_audit = credential(&db, CredentialKind::SharedKey, &["project:read"], &[]).await;
    let admin = credential(&db, CredentialKind::SharedKey, &["audit:read"], &[]).await;
    for path in [
        "/api/audit/sessions",
        "/api/audit/session",
        "/api/audit/session/close",
        "/api/audit/stats",
    ] {
        for key in [&project, &no_audit] {
            let r = rest(&st, path, Some(key), json!({ "session_id": "x" })).await;
            assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}: {}", r.text());
            assert_eq!(r.body["error"]["kind"], "insufficient_scope", "{path}");
            assert!(
                r.headers[header::WWW_AUTHENTICATE]
                    .to_str()
                    .unwrap()
                    .contains("audit:read")
            );
        }
        let r = rest(&st, path, None, json!({})).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}");
    }
    let r = rest(&st, "/api/audit/sessions", Some(&admin), json!({})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    // Operator reads are not themselves audited.
    assert!(events(&db).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Concurrency across instances

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn two_hundred_concurrent_calls_on_two_instances_land_exactly_once() {
    let db = TestDatabase::new().await;
    let key = full_key(&db).await;
    let a = serve(state(&db)).await;
    let b = serve(second_instance(&db, ServerConfig::default())).await;
    let sid = "concurrency-200";
    let client = wc_e2e::client::Client::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut expected_errors = 0;
    for i in 0..200usize {
        let base = if i % 2 == 0 { a.clone() } else { b.clone() };
        let failing = i % 5 == 0;
        if failing {
            expected_errors += 1;
        }
        let client = client.clone();
        let key = key.clone();
        let mcp = i % 4 < 2;
        tasks.spawn(async move {
            let auth = format!("Bearer {key}");
            let args = if failing {
                json!({ "limit": 0 })
            } else {
                json!({})
            };
            let reply = if mcp {
                let version = VERSIONS[i % 3];
                let body = rpc(
                    version,
                    i as i64,
                    "tools/call",
                    json!({ "name": "list_projects", "arguments": args }),
                );
                let mut headers = vec![
                    ("content-type", "application/json"),
                    ("accept", "application/json, text/event-stream"),
                    ("mcp-protocol-version", version),
                    ("authorization", auth.as_str()),
                    ("x-action-session-id", sid),
                ];
                if version == MODERN {
                    headers.push(("mcp-method", "tools/call"));
                    headers.push(("mcp-name", "list_projects"));
                }
                client
                    .send(
                        axum::http::Method::POST,
                        &format!("{base}/mcp"),
                        &headers,
                        serde_json::to_vec(&body).unwrap(),
                    )
                    .await
                    .unwrap()
            } else {
                client
                    .send(
                        axum::http::Method::POST,
                        &format!("{base}/api/actions/list_projects"),
                        &[
                            ("content-type", "application/json"),
                            ("authorization", auth.as_str()),
                            ("x-action-session-id", sid),
                        ],
                        serde_json::to_vec(&args).unwrap(),
                    )
                    .await
                    .unwrap()
            };
            let body = reply.json();
            let success = if mcp {
                assert_eq!(reply.status, 200, "{body}");
                body["result"]["structuredContent"]["success"].as_bool()
            } else {
                body["success"].as_bool()
            };
            assert_eq!(success, Some(!failing), "call {i}: {body}");
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    assert_eq!(expected_errors, 40);

    let st = state(&db);
    let r = rest(
        &st,
        "/api/audit/session",
        Some(&key),
        json!({ "session_id": sid, "limit": 500 }),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(
        r.body["session"]["event_count"], 200,
        "{}",
        r.body["session"]
    );
    assert_eq!(r.body["session"]["error_count"], expected_errors);
    let events_served = r.body["events"].as_array().unwrap();
    let seqs: Vec<i64> = events_served
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=200).collect::<Vec<i64>>());
    let failed = events_served
        .iter()
        .filter(|e| e["success"] == false)
        .count();
    assert_eq!(failed, expected_errors);

    let rows = events(&db).await;
    assert_eq!(rows.len(), 200);
    assert!(rows.iter().all(|e| e.session_id == sid));
    let unique: BTreeSet<i64> = rows.iter().map(|e| e.seq).collect();
    assert_eq!(unique.len(), 200);
    let request_ids: BTreeSet<&str> = rows
        .iter()
        .map(|e| e.request_id.as_deref().unwrap())
        .collect();
    assert_eq!(request_ids.len(), 200, "one row per request");
    let mcp_rows = rows.iter().filter(|e| e.endpoint == "/mcp").count();
    assert_eq!(mcp_rows, 100);
}

// ---------------------------------------------------------------------------------------------
// Failure isolation

#[tokio::test]
async fn a_failing_audit_write_changes_nothing_the_caller_sees() {
    let TestApp { db, st, key } = TestApp::new().await;
    {
        let client = db.pool().get().await.unwrap();
        wc_store::projects::register(&client, "agent:local:a", "a", "local")
            .await
            .unwrap();
    }

    async fn calls(st: &AppState, key: &str) -> Vec<(StatusCode, Value)> {
        let mut out = Vec::new();
        for version in VERSIONS {
            for (tool, args) in [
                ("runtime_status", json!({})),
                ("list_projects", json!({})),
                ("list_projects", json!({ "limit": 0 })),
            ] {
                let r = tools_call(st, version, Some(key), tool, args).await;
                out.push((r.status, r.result()["structuredContent"].clone()));
            }
            let r = tools_list(st, version, Some(key)).await;
            out.push((r.status, r.result()["tools"].clone()));
        }
        for (path, body) in [
            ("/api/actions/runtime_status", json!({})),
            ("/api/actions/list_projects", json!({})),
            ("/api/tools/call", json!({ "tool": "list_tools" })),
            (
                "/api/tools/call",
                json!({ "tool": "list_projects", "arguments": { "limit": 0 } }),
            ),
            ("/api/tools/list", json!({})),
        ] {
            let r = rest(st, path, Some(key), body).await;
            out.push((r.status, r.body));
        }
        out
    }

    let before = calls(&st, &key).await;
    let rows_before = events(&db).await.len();
    assert_eq!(rows_before, before.len());
    let sessions_before = session_count(&db).await;

    sql(&db, "ALTER TABLE action_events RENAME TO action_events_x").await;
    let during = calls(&st, &key).await;
    // A project registered meanwhile is visible: the tools really ran against the store.
    {
        let client = db.pool().get().await.unwrap();
        wc_store::projects::register(&client, "agent:local:b", "b", "local")
            .await
            .unwrap();
    }
    let effect = tools_call(&st, MODERN, Some(&key), "list_projects", json!({})).await;
    let rest_effect = rest(&st, "/api/actions/list_projects", Some(&key), json!({})).await;
    sql(&db, "ALTER TABLE action_events_x RENAME TO action_events").await;

    assert_eq!(during.len(), before.len());
    for (i, (b, d)) in before.iter().zip(&during).enumerate() {
        assert_eq!(b, d, "call {i} differs while audit writes fail");
    }
    let sc = &effect.result()["structuredContent"];
    assert_eq!(sc["success"], true, "{sc}");
    assert_eq!(sc["output"]["returned"], 2, "{sc}");
    assert_eq!(&rest_effect.body, sc);
    assert_eq!(rest_effect.status, StatusCode::OK);

    // Nothing was half-written: no events and no orphan sessions from the failed writes.
    assert_eq!(events(&db).await.len(), rows_before);
    assert_eq!(session_count(&db).await, sessions_before);
    // And auditing resumes once the table is back.
    let r = tools_call(&st, MODERN, Some(&key), "runtime_status", json!({})).await;
    event_of(&db, &r).await;
}

// ---------------------------------------------------------------------------------------------
// Dispatch deadline

#[tokio::test]
async fn a_dispatch_past_the_deadline_is_reported_and_audited_as_timed_out() {
    let db = TestDatabase::new().await;
    let config = ServerConfig {
        dispatch_deadline: Duration::from_millis(1),
        allow_anonymous: true,
        ..ServerConfig::default()
    };
    // A fresh pool per call: runtime_status must connect before it can answer, which takes
    // longer than a millisecond. The anonymous caller needs no connection to authenticate.
    for version in VERSIONS {
        let st = second_instance(&db, config.clone());
        let r = tools_call(&st, version, None, "runtime_status", json!({})).await;
        let sc = &r.result()["structuredContent"];
        assert_eq!(sc["success"], false, "{version}: {sc}");
        assert_eq!(sc["error"]["kind"], "dispatch_timeout", "{version}: {sc}");
        assert_eq!(r.result()["isError"], true);
        let row = event_of(&db, &r).await;
        let m = ergonomics(&row);
        assert_eq!(m["error_kind"], "dispatch_hard_timeout", "{m}");
        assert_eq!(m["execution_state"], "timed_out", "{m}");
        assert_eq!(m["failure_kind"], "timeout", "{m}");
        assert!(!row.success);
    }
    let st = second_instance(&db, config.clone());
    let r = rest(&st, "/api/actions/runtime_status", None, json!({})).await;
    assert_eq!(r.status, StatusCode::GATEWAY_TIMEOUT, "{}", r.text());
    assert_eq!(r.body["error"]["kind"], "dispatch_timeout");
    let m = ergonomics(&event_of(&db, &r).await).clone();
    assert_eq!(m["error_kind"], "dispatch_hard_timeout", "{m}");
    assert_eq!(m["execution_state"], "timed_out", "{m}");
}
