//! The forbidden inferences of the session model: nothing but an explicit id selects a session.

use super::*;

/// The audit session id the audit middleware gave `reply`'s request.
async fn audit_session_of(db: &TestDatabase, reply: &Reply) -> String {
    event_of(db, reply).await.session_id
}

/// An audit session with a Workflow-Session-shaped id (the audit namespace accepts any plain
/// id), holding `events` events of this caller.
async fn lookalike_audit_session(
    st: &AppState,
    db: &TestDatabase,
    key: &str,
    events: usize,
) -> String {
    let id = format!("wc_sess_{}", "Audit".repeat(5));
    for _ in 0..events {
        let mut req = rest_request("/api/actions/runtime_status", Some(key), &json!({}));
        set_header(&mut req, "x-action-session-id", &id);
        let r = send(st, req).await;
        assert_eq!(audit_session_of(db, &r).await, id);
    }
    id
}

/// Row 1: "Infer wc_sess_* from current HTTP Action Audit Session".
#[tokio::test]
async fn forbidden_1_the_current_audit_session_never_yields_a_workflow_session() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    // The caller's implicit audit session (idle reuse), then an explicitly named one.
    let implicit = tools_call(&st, MODERN, Some(&key), "runtime_status", json!({})).await;
    let implicit = audit_session_of(&db, &implicit).await;
    assert!(Uuid::parse_str(&implicit).is_ok(), "{implicit}");
    let lookalike = lookalike_audit_session(&st, &db, &key, 1).await;
    for audit_id in [lookalike.as_str(), implicit.as_str()] {
        let header = [("x-action-session-id", audit_id)];
        for via in SURFACES {
            // Calls made in that audit session, with no Workflow Session named, record nothing.
            let totals = workflow_totals(&db).await;
            for tool in ["runtime_status", "list_projects", "list_tools"] {
                let (r, reply) =
                    call_with_headers(&st, via, &key, tool, json!({}), None, &header).await;
                output(&r);
                assert_eq!(audit_session_of(&db, &reply).await, audit_id, "{via:?}");
            }
            assert_eq!(workflow_totals(&db).await, totals, "{via:?} {audit_id}");
            // work_on_project in it starts a fresh Workflow Session; the audit id is not taken up.
            let (r, _) = call_with_headers(
                &st,
                via,
                &key,
                "work_on_project",
                json!({ "project": P, "instruction": "x" }),
                None,
                &header,
            )
            .await;
            let out = output(&r);
            assert_eq!(out["started"], "created", "{via:?}");
            assert_ne!(out["session_id"], audit_id, "{via:?}");
            assert_eq!(out["events_observed"], 1, "{via:?}");
        }
    }
    let ids: Vec<String> = workflow_state(&db).await.into_iter().map(|s| s.0).collect();
    assert!(
        !ids.contains(&lookalike) && !ids.contains(&implicit),
        "{ids:?}"
    );
}

/// Row 2: "Fall back to Action Audit Session when Workflow Session is missing".
#[tokio::test]
async fn forbidden_2_a_missing_workflow_session_never_falls_back_to_the_audit_session() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let lookalike = lookalike_audit_session(&st, &db, &key, 2).await;
    let (s0, e0) = workflow_totals(&db).await;
    for missing in [nobody(), lookalike.clone()] {
        // The request is audited in the lookalike session, and names a missing Workflow Session.
        let header = [("x-action-session-id", lookalike.as_str())];
        for via in SURFACES {
            for (tool, args) in [
                ("session_summary", json!({ "session_id": missing })),
                ("session_handoff_summary", json!({ "session_id": missing })),
                (
                    "update_session_context",
                    json!({ "session_id": missing, "default_shell": "sh" }),
                ),
                ("finish_coding_task", json!({ "session_id": missing })),
                ("close_session", json!({ "session_id": missing })),
                (
                    "work_on_project",
                    json!({ "session_id": missing, "instruction": "x" }),
                ),
            ] {
                let (r, reply) = call_with_headers(&st, via, &key, tool, args, None, &header).await;
                assert_eq!(
                    kind(&r),
                    "unknown_session_id",
                    "{via:?} {tool} {missing}: {r}"
                );
                assert_eq!(r["error"]["field"], "session_id");
                assert_eq!(audit_session_of(&db, &reply).await, lookalike);
            }
            let (r, _) = call_with_headers(
                &st,
                via,
                &key,
                "runtime_status",
                json!({}),
                Some(&missing),
                &header,
            )
            .await;
            assert_eq!(
                kind(&r),
                "unknown_session_id",
                "{via:?} recorder {missing}: {r}"
            );
            assert_eq!(r["error"]["field"], "recording_session_id");
        }
    }
    assert_eq!(workflow_totals(&db).await, (s0, e0), "a refusal wrote");
    // The audit session kept its own evidence model: one row per request, nothing else.
    let audit = rest(
        &st,
        "/api/audit/session",
        Some(&key),
        json!({ "session_id": lookalike, "limit": 500 }),
    )
    .await;
    assert_eq!(audit.status, StatusCode::OK, "{}", audit.text());
    assert_eq!(audit.body["session"]["event_count"], 2 + 2 * 5 * 7);
}

/// Row 3: "Treat /api/audit/session payload as coding-task summary".
#[tokio::test]
async fn forbidden_3_an_audit_session_payload_is_not_a_coding_task_summary() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let real = start(&st, &key, P, "real").await;
    let lookalike = lookalike_audit_session(&st, &db, &key, 2).await;
    let audit = rest(
        &st,
        "/api/audit/session",
        Some(&key),
        json!({ "session_id": lookalike }),
    )
    .await;
    assert_eq!(audit.status, StatusCode::OK, "{}", audit.text());
    let payload = audit.body.clone();
    assert!(
        payload["session"].is_object() && payload["events"].is_array(),
        "{payload}"
    );
    let totals = workflow_totals(&db).await;

    // Handed to the session tools as their input, an audit payload is refused by the schema.
    for via in SURFACES {
        let mut as_args = payload.clone();
        as_args["session_id"] = json!(real);
        for tool in [
            "session_summary",
            "session_handoff_summary",
            "finish_coding_task",
        ] {
            let r = call_via(&st, via, &key, tool, as_args.clone(), None).await;
            assert_eq!(kind(&r), "invalid_arguments", "{via:?} {tool}: {r}");
        }
        let r = call_via(
            &st,
            via,
            &key,
            "session_handoff_summary",
            json!({ "session_id": real, "session": payload["session"] }),
            None,
        )
        .await;
        assert_eq!(kind(&r), "invalid_arguments", "{via:?}: {r}");
        assert_eq!(r["error"]["pointer"], "/session", "{via:?}: {r}");
        // Its session id, Workflow-shaped as it is, names no Workflow Session.
        let r = call_via(
            &st,
            via,
            &key,
            "session_summary",
            json!({ "session_id": payload["session"]["session_id"] }),
            None,
        )
        .await;
        assert_eq!(kind(&r), "unknown_session_id", "{via:?}: {r}");
    }
    assert_eq!(workflow_totals(&db).await, totals);
    // And the other way round: the audit routes know no Workflow Session.
    let r = rest(
        &st,
        "/api/audit/session",
        Some(&key),
        json!({ "session_id": real }),
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text());
    let listed = rest(&st, "/api/audit/sessions", Some(&key), json!({})).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text());
    assert!(!listed.text().contains(&real), "{}", listed.text());
    // The two summaries do not even share a shape.
    let summary = call(&st, &key, "session_summary", json!({ "session_id": real })).await;
    let out = output(&summary);
    for audit_field in ["event_count", "error_count", "status"] {
        assert!(out.get(audit_field).is_none(), "{audit_field} in {out}");
    }
}

/// Row 4: "Pass audit UUID as tool session_id expecting ledger semantics".
#[tokio::test]
async fn forbidden_4_an_audit_uuid_as_session_id_is_refused_naming_the_field() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    start(&st, &key, P, "a real workflow session").await;
    let first = tools_call(&st, MODERN, Some(&key), "runtime_status", json!({})).await;
    let audit_id = audit_session_of(&db, &first).await;
    assert!(Uuid::parse_str(&audit_id).is_ok(), "{audit_id}");
    let state_before = workflow_state(&db).await;
    let totals = workflow_totals(&db).await;

    // As a business session_id: refused by the schema (`wc_sess_` pattern) as
    // invalid_arguments naming the field, before any lookup; never resolved to anything.
    for via in SURFACES {
        for tool in [
            "session_summary",
            "session_handoff_summary",
            "finish_coding_task",
            "close_session",
            "update_session_context",
        ] {
            let r = call_via(
                &st,
                via,
                &key,
                tool,
                json!({ "session_id": audit_id }),
                None,
            )
            .await;
            assert_eq!(kind(&r), "invalid_arguments", "{via:?} {tool}: {r}");
            assert_eq!(r["error"]["pointer"], "/session_id", "{via:?} {tool}: {r}");
        }
        let r = call_via(
            &st,
            via,
            &key,
            "work_on_project",
            json!({ "session_id": audit_id, "instruction": "x" }),
            None,
        )
        .await;
        assert_eq!(kind(&r), "invalid_arguments", "{via:?}: {r}");
        assert_eq!(r["error"]["pointer"], "/session_id", "{via:?}: {r}");
    }
    // As the recorder: MCP refuses the wrapper metadata (JSON-RPC invalid params naming the
    // field), REST answers invalid_arguments naming it.
    for version in VERSIONS {
        let r = tools_call(
            &st,
            version,
            Some(&key),
            "runtime_status",
            json!({ "recording_session_id": audit_id }),
        )
        .await;
        assert_eq!(r.rpc_code(), Some(-32602), "{version}: {}", r.text());
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("recording_session_id"), "{}", r.text());
    }
    for via in [Via::Action, Via::ToolsCall] {
        let r = call_via(&st, via, &key, "runtime_status", json!({}), Some(&audit_id)).await;
        assert_eq!(kind(&r), "invalid_arguments", "{via:?}: {r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains("recording_session_id"), "{r}");
    }
    assert_eq!(workflow_state(&db).await, state_before);
    assert_eq!(workflow_totals(&db).await, totals);
    assert!(!session_events_text(&db).await.contains(&audit_id));
}

/// Beyond the table: a caller-supplied Mcp-Session-Id, the same credential, the same window
/// (`_meta["openai/session"]`), the same project or an earlier call never selects a session.
#[tokio::test]
async fn nothing_but_an_explicit_id_selects_a_session() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let window = json!("window-7f3a");
    // Start a session with every ambient identity a server could be tempted to remember.
    let mut body = rpc(
        MODERN,
        1,
        "tools/call",
        json!({ "name": "work_on_project", "arguments": { "project": P, "instruction": "the task" } }),
    );
    body["params"]["_meta"]["openai/session"] = window.clone();
    let r = send(&st, mcp_request(MODERN, Some(&key), &body)).await;
    let s = output(&r.result()["structuredContent"])["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let before_state = workflow_state(&db).await;
    let totals = workflow_totals(&db).await;

    // Same credential, same window, the session id as Mcp-Session-Id and as the audit
    // session, on the same project, right after: nothing is recorded anywhere.
    for version in VERSIONS {
        for (tool, args) in [
            ("runtime_status", json!({})),
            ("list_projects", json!({})),
            ("list_tools", json!({})),
        ] {
            let mut body = rpc(
                version,
                2,
                "tools/call",
                json!({ "name": tool, "arguments": args }),
            );
            body["params"]["_meta"]["openai/session"] = window.clone();
            let mut req = mcp_request(version, Some(&key), &body);
            set_header(&mut req, "mcp-session-id", &s);
            set_header(&mut req, "x-action-session-id", &s);
            let r = send(&st, req).await;
            output(&r.result()["structuredContent"]);
        }
    }
    for via in [Via::Action, Via::ToolsCall] {
        for tool in ["runtime_status", "list_projects"] {
            output(&call_via(&st, via, &key, tool, json!({}), None).await);
        }
    }
    assert_eq!(
        workflow_state(&db).await,
        before_state,
        "a call without an explicit id was recorded"
    );
    assert_eq!(workflow_totals(&db).await, totals);
    // Only the exact id selects it.
    output(&rec(&st, &key, "runtime_status", json!({}), &s).await);
    assert_eq!(workflow_totals(&db).await.1, totals.1 + 2);
}
