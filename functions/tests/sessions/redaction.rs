//! Redaction through storage and logs, and text at the edges of the bounds.

use super::*;

/// (input, the secret in it): the credential shapes of the redaction rules (copied from the
/// corpus of `wc_functions::redaction`'s unit tests).
const CORPUS: &[(&str, &str)] = include!("../data/secret_corpus.rs");

#[tokio::test]
async fn no_secret_of_the_corpus_reaches_storage_or_logs() {
    assert!(CORPUS.len() >= 30);
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let (logs, _guard) = capture_logs();
    let w = start(&st, &key, P, "the recorder").await;
    let mut request_ids = Vec::new();
    for (i, (input, _)) in CORPUS.iter().enumerate() {
        let via = SURFACES[i % SURFACES.len()];
        // Start and resume with the secret in the instruction, recorded.
        let r = call_via(
            &st,
            via,
            &key,
            "work_on_project",
            json!({ "project": P, "instruction": format!("task {i}: {input} then run the tests") }),
            Some(&w),
        )
        .await;
        let s = output(&r)["session_id"].as_str().unwrap().to_owned();
        let r = call_via(
            &st,
            via,
            &key,
            "work_on_project",
            json!({ "session_id": s, "instruction": format!("{input}") }),
            Some(&w),
        )
        .await;
        output(&r);
        // A refused update with it (the call is still recorded; no resource yet, so the cwd must be
        // project-relative).
        let r = call_via(
            &st,
            via,
            &key,
            "update_session_context",
            json!({ "session_id": s, "default_cwd": format!("../{input}") }),
            Some(&w),
        )
        .await;
        assert_eq!(kind(&r), "invalid_arguments");
        // A string argument of a recorded read tool.
        if input.chars().count() <= 64 {
            output(
                &call_via(
                    &st,
                    via,
                    &key,
                    "list_tools",
                    json!({ "category": input }),
                    Some(&w),
                )
                .await,
            );
        }
        // An execution default is no place for a credential: a remote cwd carrying one is
        // refused (recorded, stored nowhere), a clean one is kept.
        let r = call_via(
            &st,
            via,
            &key,
            "update_session_context",
            json!({ "session_id": s, "resource": "box", "default_cwd": format!("/srv/{input}") }),
            Some(&w),
        )
        .await;
        assert_eq!(kind(&r), "invalid_arguments", "{via:?} {input:?}: {r}");
        assert_eq!(r["error"]["pointer"], "/default_cwd", "{r}");
        let r = call_via(
            &st,
            via,
            &key,
            "update_session_context",
            json!({ "session_id": s, "resource": "box", "default_cwd": format!("/srv/task-{i}") }),
            Some(&w),
        )
        .await;
        output(&r);
        // Finish with it in the summary.
        let r = call_via(
            &st,
            via,
            &key,
            "finish_coding_task",
            json!({ "session_id": s, "summary": format!("done: {input}") }),
            Some(&w),
        )
        .await;
        output(&r);
        // And read everything back through the tools.
        for tool in ["session_summary", "session_handoff_summary"] {
            let args = if tool == "session_handoff_summary" {
                json!({ "session_id": s, "diagnostic": true })
            } else {
                json!({ "session_id": s })
            };
            let r = call_via(&st, via, &key, tool, args, None).await;
            let text = serde_json::to_string(output(&r)).unwrap();
            let secret = CORPUS[i].1;
            assert!(!text.contains(secret), "{tool} served {secret:?} ({via:?})");
        }
        let r = tools_call(
            &st,
            MODERN,
            Some(&key),
            "session_summary",
            json!({ "session_id": w, "limit": 200 }),
        )
        .await;
        request_ids.push(r.headers["x-request-id"].to_str().unwrap().to_owned());
    }

    let events = session_events_text(&db).await;
    let client = db.pool().get().await.unwrap();
    let mut roots = String::new();
    for row in client
        .query("SELECT to_jsonb(t)::text FROM workflow_sessions t", &[])
        .await
        .unwrap()
    {
        roots.push_str(&row.get::<_, String>(0));
        roots.push('\n');
    }
    let mut summaries = String::new();
    for row in client
        .query("SELECT summary::text FROM action_events", &[])
        .await
        .unwrap()
    {
        summaries.push_str(&row.get::<_, String>(0));
        summaries.push('\n');
    }
    let log_text = logs.text();
    // The checks can see: the rows and logs are there and carry the surrounding text.
    assert!(events.contains("then run the tests") && events.contains("[REDACTED]"));
    assert!(roots.contains("then run the tests") && roots.contains("/srv/task-"));
    assert!(!summaries.is_empty());
    for id in &request_ids {
        assert!(log_text.contains(id.as_str()), "request {id} not logged");
    }
    for (input, secret) in CORPUS {
        assert!(
            !events.contains(secret),
            "session_events keep {secret:?} (from {input:?})"
        );
        assert!(!roots.contains(secret), "workflow_sessions keep {secret:?}");
        assert!(
            !summaries.contains(secret),
            "action_events.summary keeps {secret:?}"
        );
        if let Some(at) = log_text.find(secret) {
            let from = log_text[..at].rfind('\n').map_or(0, |i| i + 1);
            let to = log_text[at..].find('\n').map_or(log_text.len(), |i| at + i);
            panic!("the logs keep {secret:?}: {}", &log_text[from..to]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Text at the edges of the bounds

#[tokio::test]
async fn wide_and_unusual_text_is_stored_bounded_never_an_internal_error() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let w = start(&st, &key, P, "recorder").await;
    let mut failures = Vec::new();
    let mut check = |what: String, r: &Value| {
        if r["success"] != true {
            failures.push(format!("{what}: {r}"));
            false
        } else {
            true
        }
    };
    // Four-byte characters at every length bound, NUL and other control characters.
    for (label, text) in [
        ("crabs", "🦀".repeat(16000)),
        ("han", "漢".repeat(16000)),
        ("nul", format!("before\u{0}after {}", "\u{0}".repeat(100))),
        ("controls", "\u{1}\u{7f}\u{1b}[31m".repeat(2000)),
    ] {
        let r = rec(
            &st,
            &key,
            "work_on_project",
            json!({ "project": P, "instruction": text }),
            &w,
        )
        .await;
        if !check(format!("{label}: create"), &r) {
            continue;
        }
        let s = r["output"]["session_id"].as_str().unwrap().to_owned();
        let r = rec(
            &st,
            &key,
            "work_on_project",
            json!({ "session_id": s, "instruction": text }),
            &w,
        )
        .await;
        check(format!("{label}: resume"), &r);
        let r = rec(
            &st,
            &key,
            "list_tools",
            json!({ "category": text.chars().take(64).collect::<String>() }),
            &w,
        )
        .await;
        check(format!("{label}: recorded list_tools"), &r);
        let summary: String = text.chars().take(4000).collect();
        let r = rec(
            &st,
            &key,
            "finish_coding_task",
            json!({ "session_id": s, "summary": summary }),
            &w,
        )
        .await;
        if check(format!("{label}: finish"), &r) {
            assert_eq!(r["output"]["lifecycle"], "finished", "{label}");
            let rows = ledger(&db, &s).await;
            assert!(rows.iter().any(|e| e.kind == "session_finished"), "{label}");
        }
        let r = call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": s, "diagnostic": true }),
        )
        .await;
        if check(format!("{label}: handoff"), &r) {
            brief_of(&r);
        }
    }
    // Every recorded call left its pair, whatever the tool answered.
    let rows = ledger(&db, &w).await;
    let started = rows
        .iter()
        .filter(|e| e.kind == "tool_call_started")
        .count();
    let finished = rows
        .iter()
        .filter(|e| e.kind == "tool_call_finished")
        .count();
    assert_eq!(started, finished);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
