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
    // The read session got one business pair per summary, of the same invocations.
    let c_rows = ledger_after(&db, &c, c0).await;
    assert_eq!(c_rows.len(), 2 * summaries);
    assert!(
        c_rows
            .iter()
            .all(|e| invocations.contains(&e.invocation_id) && e.role == "business")
    );
}
