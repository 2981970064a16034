//! Concurrent recorded calls on two instances over one database land exactly once.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thirty_two_concurrent_recorded_calls_on_two_instances_land_exactly_once() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let a = serve(state(&db)).await;
    let b = serve(second_instance(&db, ServerConfig::default())).await;
    let w = start(&st, &key, P, "concurrent recorder").await;
    let c = start(&st, &key, P, "read by summaries").await;
    let (w0, c0) = (last_seq(&db, &w).await, last_seq(&db, &c).await);
    let client = wc_e2e::client::Client::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut summaries = 0;
    for i in 0..32usize {
        let base = if i % 2 == 0 { a.clone() } else { b.clone() };
        let tool = ["runtime_status", "list_tools", "session_summary"][i % 3];
        if tool == "session_summary" {
            summaries += 1;
        }
        let (client, key, w, c) = (client.clone(), key.clone(), w.clone(), c.clone());
        tasks.spawn(async move {
            let mut args = match tool {
                "session_summary" => json!({ "session_id": c }),
                _ => json!({}),
            };
            let auth = format!("Bearer {key}");
            let (reply, mcp) = if i % 4 == 3 {
                let body = json!({ "tool": tool, "arguments": args, "recording_session_id": w });
                let r = client
                    .send(
                        axum::http::Method::POST,
                        &format!("{base}/api/tools/call"),
                        &[
                            ("content-type", "application/json"),
                            ("authorization", auth.as_str()),
                        ],
                        serde_json::to_vec(&body).unwrap(),
                    )
                    .await
                    .unwrap();
                (r, false)
            } else {
                let version = VERSIONS[i % 3];
                args["recording_session_id"] = json!(w);
                let body = rpc(
                    version,
                    i as i64,
                    "tools/call",
                    json!({ "name": tool, "arguments": args }),
                );
                let mut headers = vec![
                    ("content-type", "application/json"),
                    ("accept", "application/json, text/event-stream"),
                    ("mcp-protocol-version", version),
                    ("authorization", auth.as_str()),
                ];
                if version == MODERN {
                    headers.push(("mcp-method", "tools/call"));
                    headers.push(("mcp-name", tool));
                }
                let r = client
                    .send(
                        axum::http::Method::POST,
                        &format!("{base}/mcp"),
                        &headers,
                        serde_json::to_vec(&body).unwrap(),
                    )
                    .await
                    .unwrap();
                (r, true)
            };
            assert_eq!(
                reply.status,
                200,
                "call {i}: {}",
                String::from_utf8_lossy(&reply.body)
            );
            let body = reply.json();
            let result = if mcp {
                body["result"]["structuredContent"].clone()
            } else {
                body
            };
            assert_eq!(result["success"], true, "call {i} ({tool}): {result}");
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let row = session_row(&db, &w).await;
    assert_eq!(row.events_observed, w0 + 64);
    let rows = ledger(&db, &w).await;
    assert_eq!(
        rows.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=w0 + 64).collect::<Vec<_>>(),
        "seqs are not gap-free"
    );
    let mut by_call: BTreeMap<Uuid, Vec<&LedgerRow>> = BTreeMap::new();
    for e in rows.iter().filter(|e| e.seq > w0) {
        by_call.entry(e.call_id).or_default().push(e);
    }
    assert_eq!(by_call.len(), 32);
    for (call_id, pair) in &by_call {
        let kinds: Vec<(&str, &str)> = pair
            .iter()
            .map(|e| (e.kind.as_str(), e.role.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("tool_call_started", "recorder"),
                ("tool_call_finished", "recorder")
            ],
            "{call_id}"
        );
        assert_eq!(pair[0].invocation_id, pair[1].invocation_id);
    }
    let invocations: BTreeSet<Uuid> = by_call.values().map(|p| p[0].invocation_id).collect();
    assert_eq!(invocations.len(), 32);
    let mut tools: BTreeMap<&str, usize> = BTreeMap::new();
    for pair in by_call.values() {
        *tools
            .entry(pair[0].tool_name.as_deref().unwrap())
            .or_default() += 1;
    }
    assert_eq!(tools.get("session_summary"), Some(&summaries));
    // The read session was each summary's target, not its recorder: it took nothing.
    assert!(summaries > 0);
    let c_rows = ledger_after(&db, &c, c0).await;
    assert!(c_rows.is_empty(), "{c_rows:#?}");
}
#[tokio::test]
async fn a_session_tool_is_recorded_only_in_its_recorder_and_its_target_keeps_only_the_effect() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let w = start(&st, &key, P, "recorder").await;
    for (tool, extra, own) in [
        ("session_summary", json!({}), None),
        (
            "session_handoff_summary",
            json!({ "diagnostic": true }),
            None,
        ),
        ("list_session_messages", json!({}), None),
        ("observe_session_messages", json!({}), None),
        (
            "update_session_context",
            json!({ "default_cwd": "src" }),
            Some("session_context_updated"),
        ),
        (
            "post_session_message",
            json!({ "kind": "note", "body": "hello" }),
            Some("message_posted"),
        ),
        (
            "finish_coding_task",
            json!({ "summary": "done" }),
            Some("session_finished"),
        ),
        ("close_session", json!({}), Some("session_closed")),
    ] {
        for recorded in [true, false] {
            let c = start(&st, &key, P, "target").await;
            let mut args = extra.clone();
            args["session_id"] = json!(c);
            let (w0, c0) = (last_seq(&db, &w).await, last_seq(&db, &c).await);
            let r = if recorded {
                rec(&st, &key, tool, args, &w).await
            } else {
                call(&st, &key, tool, args).await
            };
            output(&r);
            let w_rows = ledger_after(&db, &w, w0).await;
            let c_rows = ledger_after(&db, &c, c0).await;
            // The target holds the tool's effect and nothing else; a handoff named no
            // recorder, so it is recorded in its session instead (its compatibility fallback).
            let want: Vec<(&str, &str)> = if !recorded && tool == "session_handoff_summary" {
                vec![
                    ("tool_call_started", "business"),
                    ("tool_call_finished", "business"),
                ]
            } else {
                own.map(|k| (k, "business")).into_iter().collect()
            };
            assert_eq!(
                shape(&c_rows),
                want,
                "{tool} recorded {recorded}: {c_rows:#?}"
            );
            if recorded {
                let (_, invocation) = one_recorder_pair(&w_rows, tool);
                assert!(
                    c_rows.iter().all(|e| e.invocation_id == invocation),
                    "{tool}: {c_rows:#?}"
                );
            } else {
                assert!(w_rows.is_empty(), "{tool}: {w_rows:#?}");
            }
        }
    }
}

#[tokio::test]
async fn a_finished_or_closed_session_takes_no_events_from_any_read() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let w = start(&st, &key, P, "an active recorder").await;
    for end in ["finish_coding_task", "close_session"] {
        let s = start(&st, &key, P, "ends").await;
        output(
            &call(
                &st,
                &key,
                "post_session_message",
                json!({ "session_id": s, "kind": "todo", "body": "t" }),
            )
            .await,
        );
        output(&call(&st, &key, end, json!({ "session_id": s })).await);
        let reads = [
            ("session_summary", json!({ "session_id": s })),
            (
                "session_handoff_summary",
                json!({ "session_id": s, "diagnostic": true }),
            ),
            ("list_session_messages", json!({ "session_id": s })),
            ("observe_session_messages", json!({ "session_id": s })),
            ("list_jobs", json!({ "session_id": s })),
        ];
        for via in SURFACES {
            for (tool, args) in &reads {
                let before = ledger(&db, &s).await;
                let row = session_row(&db, &s).await;
                // Unrecorded, and recorded in an active session: the read answers, the ended
                // session is left as it was, and only the recorder records the call.
                let r = call_via(&st, via, &key, tool, args.clone(), None).await;
                output(&r);
                let w0 = last_seq(&db, &w).await;
                output(&call_via(&st, via, &key, tool, args.clone(), Some(&w)).await);
                one_recorder_pair(&ledger_after(&db, &w, w0).await, tool);
                // Naming the ended session as the recorder is refused: it takes no new calls.
                let r = call_via(&st, via, &key, tool, args.clone(), Some(&s)).await;
                assert_eq!(kind(&r), "session_closed", "{via:?} {end} {tool}: {r}");
                assert_eq!(r["error"]["field"], "recording_session_id", "{r}");
                assert_eq!(ledger(&db, &s).await, before, "{via:?} {end} {tool}");
                let after = session_row(&db, &s).await;
                assert_eq!(
                    (after.events_observed, after.version, after.updated_at),
                    (row.events_observed, row.version, row.updated_at),
                    "{via:?} {end} {tool}"
                );
            }
        }
    }
}

#[tokio::test]
async fn continuation_feedback_counts_a_call_recorded_in_its_own_session_once() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let root = tempfile::tempdir().unwrap();
    let _runner = TestRunner::start(&db, &st, "local", &[("alpha", root.path())]).await;
    let c = start(&st, &key, P, "work and record in one session").await;
    // Recorded in the session it works in: both pairs land there, nested.
    output(
        &rec(
            &st,
            &key,
            "run_shell",
            json!({ "session_id": c, "command": "true" }),
            &c,
        )
        .await,
    );
    let r = rec(
        &st,
        &key,
        "run_shell",
        json!({ "session_id": c, "command": "exit 3" }),
        &c,
    )
    .await;
    assert_eq!(kind(&r), "exit_nonzero", "{r}");
    let calls: Vec<(String, String)> = ledger(&db, &c)
        .await
        .into_iter()
        .filter(|e| e.kind.starts_with("tool_call_"))
        .map(|e| (e.kind, e.role))
        .collect();
    assert_eq!(calls.len(), 8, "{calls:?}");
    let r = call(
        &st,
        &key,
        "session_handoff_summary",
        json!({ "session_id": c, "diagnostic": true }),
    )
    .await;
    let feedback = &output(&r)["diagnostic"]["continuation_feedback"];
    assert_eq!(
        feedback["attempt"]["activity"]["tool_calls"],
        json!({ "started": 2, "finished": 2, "failed": 1, "by_tool": { "run_shell": 2 } }),
        "{feedback}"
    );
    assert_eq!(
        feedback["attempt"]["activity"]["events_by_kind"]["tool_call_started"], 2,
        "{feedback}"
    );
    // finish_coding_task's feedback reads the same way; the unrecorded handoff left its one
    // (fallback) pair in the session, and counts once as well.
    let r = call(&st, &key, "finish_coding_task", json!({ "session_id": c })).await;
    assert_eq!(
        output(&r)["continuation_feedback"]["attempt"]["activity"]["tool_calls"]["by_tool"],
        json!({ "run_shell": 2, "session_handoff_summary": 1 })
    );
}
