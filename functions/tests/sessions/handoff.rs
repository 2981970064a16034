//! The handoff brief: bounded, redacted and honest, and closed by finishing the session.

use super::*;

#[track_caller]
fn sorted_codes(brief: &Value) -> Vec<String> {
    let codes: Vec<String> = brief["basis"]["reason_codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    let mut sorted = codes.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(codes, sorted, "reason codes are not sorted and distinct");
    assert_eq!(brief["basis"]["complete"], json!(codes.is_empty()));
    codes
}

#[tokio::test]
async fn the_handoff_brief_is_bounded_redacted_and_honest() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;

    // A clean, short instruction comes back whole.
    let clean = start(&st, &key, P, "add a cache to the resolver").await;
    let brief = brief_of(
        &call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": clean }),
        )
        .await,
    );
    assert_eq!(
        brief["instruction"]["root"],
        json!({ "text": "add a cache to the resolver", "truncated": false })
    );
    assert_eq!(brief["instruction"]["latest"], brief["instruction"]["root"]);
    assert_eq!(brief["instruction"]["latest_is_root"], true);
    assert_eq!(brief["lifecycle"], "active");
    // No runner serves the project: the workspace was asked for and could not be observed.
    assert_eq!(
        brief["workspace"],
        json!({ "status": "unavailable", "reason": "runner_unavailable" })
    );
    // Its ledger was read: no validation ran.
    assert_eq!(brief["validation"], json!({ "status": "not_run" }));
    assert_eq!(sorted_codes(&brief), ["workspace_unavailable"]);
    assert_eq!(brief["basis"]["complete"], false);
    assert_eq!(brief["progress"]["state"], "insufficient_evidence");

    // Workspace not requested: reported as such, never as unavailable or queried.
    let brief = brief_of(
        &call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": clean, "include_workspace": false }),
        )
        .await,
    );
    assert_eq!(brief["workspace"], json!({ "status": "not_requested" }));
    assert_eq!(sorted_codes(&brief), ["workspace_not_requested"]);
    let brief = brief_of(
        &call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": clean, "include_workspace": false, "include_validation": false }),
        )
        .await,
    );
    assert_eq!(brief["validation"], json!({ "status": "not_requested" }));
    assert_eq!(
        sorted_codes(&brief),
        ["validation_not_requested", "workspace_not_requested"]
    );
    // Not requested is the caller's choice, not missing evidence.
    assert_eq!(brief["progress"]["state"], "ready_to_continue");

    // A secret in the instruction does not survive, and the excerpt says it was changed.
    let long = format!(
        "{} password=hunter2hunter2 {}",
        "x".repeat(300),
        "y".repeat(700)
    );
    let s = start(&st, &key, P, &long).await;
    let brief = brief_of(
        &call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": s }),
        )
        .await,
    );
    let root = &brief["instruction"]["root"];
    let text = root["text"].as_str().unwrap();
    assert!(
        text.chars().count() <= 600,
        "{} chars",
        text.chars().count()
    );
    assert!(!text.contains("hunter2hunter2"), "{text}");
    assert!(text.contains("password=[REDACTED]"), "{text}");
    assert_eq!(root["truncated"], true);
    // A secret alone (short text) still marks the excerpt changed.
    let s2 = start(&st, &key, P, "deploy with password=hunter2hunter2").await;
    let brief = brief_of(
        &call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": s2 }),
        )
        .await,
    );
    assert_eq!(
        brief["instruction"]["root"]["text"],
        "deploy with password=[REDACTED]"
    );
    assert_eq!(brief["instruction"]["root"]["truncated"], true);

    // Worst case: escape-heavy root and latest instructions, many recorded calls with huge
    // secret-bearing arguments. Still at most 8 KiB, and every cut is flagged.
    let heavy = |c: char| {
        format!(
            "{}password=hunter2hunter2{}",
            c.to_string().repeat(8000),
            "\"".repeat(7000)
        )
    };
    let big = start(&st, &key, P, &heavy('\u{1}')).await;
    output(
        &call(
            &st,
            &key,
            "work_on_project",
            json!({ "session_id": big, "instruction": heavy('\u{2}') }),
        )
        .await,
    );
    for i in 0..40 {
        let r = rec(
            &st,
            &key,
            "work_on_project",
            json!({ "project": P, "instruction": format!("{i} {} token=7f3c9a1b2d4e5f60718293a4b5c6d7e8", "\\".repeat(15000)) }),
            &big,
        )
        .await;
        output(&r);
    }
    // Exploration evidence as a focused-read tool records it (no such tool is registered yet,
    // so its finished events go straight to the store): long, escape-heavy paths.
    for i in 0..20 {
        let paths: Vec<String> = (0..5)
            .map(|j| format!("src/{}/{i}-{j}.rs", "\u{1}".repeat(300)))
            .collect();
        let event = NewEvent {
            kind: EventKind::ToolCallFinished,
            call_id: Uuid::now_v7(),
            invocation_id: Uuid::now_v7(),
            role: EventRole::Recorder,
            tool_name: Some("read_files".into()),
            payload: json!({ "tool": "read_files", "success": true, "exploration_paths": paths }),
        };
        sessions::mutate(db.pool(), &SessionId::parse(&big).unwrap(), move |_| {
            Decision::Write(SessionChange::default(), vec![event.clone()], ())
        })
        .await
        .unwrap();
    }
    for via in SURFACES {
        let r = call_via(
            &st,
            via,
            &key,
            "session_handoff_summary",
            json!({ "session_id": big, "diagnostic": true }),
            None,
        )
        .await;
        let brief = brief_of(&r);
        // Over budget before reduction; recent files go first, keeping their real total.
        let recent = &brief["recent_files"];
        assert_eq!(recent["total"], 100, "{via:?}: {recent}");
        assert_eq!(recent["truncated"], true);
        let kept = recent["returned"].as_u64().unwrap();
        assert!(
            kept < 8,
            "{via:?}: no reduction happened ({kept} recent files kept)"
        );
        assert_eq!(recent["items"].as_array().unwrap().len() as u64, kept);
        let instr = &brief["instruction"];
        assert_eq!(instr["latest_is_root"], false);
        for which in ["root", "latest"] {
            let e = &instr[which];
            let t = e["text"].as_str().unwrap();
            assert!(t.chars().count() <= 600, "{via:?} {which}");
            assert_eq!(e["truncated"], true, "{via:?} {which}");
            assert!(!t.contains("hunter2"), "{via:?} {which}");
        }
        let text = serde_json::to_string(&output(&r)).unwrap();
        assert!(
            !text.contains("hunter2hunter2") && !text.contains("7f3c9a1b2d4e5f60718293a4b5c6d7e8"),
            "{via:?}"
        );
    }
    let all_text = session_events_text(&db).await;
    assert!(
        !all_text.contains("hunter2hunter2")
            && !all_text.contains("7f3c9a1b2d4e5f60718293a4b5c6d7e8")
    );
}

#[tokio::test]
async fn finishing_closes_the_brief_and_every_later_mutation_is_session_closed() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let s = start(&st, &key, P, "finish me").await;
    let w = start(&st, &key, P, "recorder").await;
    output(&rec(&st, &key, "runtime_status", json!({}), &s).await);

    // Default: no diagnostic part.
    let r = call(
        &st,
        &key,
        "session_handoff_summary",
        json!({ "session_id": s }),
    )
    .await;
    assert!(output(&r).get("diagnostic").is_none(), "{r}");
    let r = call(
        &st,
        &key,
        "session_handoff_summary",
        json!({ "session_id": s, "diagnostic": true, "limit": 2 }),
    )
    .await;
    let diag = &output(&r)["diagnostic"];
    assert_eq!(
        diag["continuation_feedback"]["status"], "available",
        "{diag}"
    );
    assert_eq!(
        diag["continuation_feedback"]["attempt"]["instruction"]["text"],
        "finish me"
    );
    let events = diag["events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{diag}");
    assert!(
        events[0]["seq"].as_i64() > events[1]["seq"].as_i64(),
        "newest first: {diag}"
    );

    let r = rec(
        &st,
        &key,
        "finish_coding_task",
        json!({ "session_id": s, "summary": "all done" }),
        &w,
    )
    .await;
    let out = output(&r);
    assert_eq!(out["lifecycle"], "finished");
    let brief = &out["handoff_brief"];
    assert!(serde_json::to_vec(brief).unwrap().len() <= 8192);
    assert_eq!(brief["lifecycle"], "finished");
    assert_eq!(
        brief["progress"],
        json!({ "state": "closed", "blockers": [] })
    );
    assert_eq!(
        brief["next_actions"]["items"],
        json!([{ "action": "start_new_session" }])
    );
    assert_eq!(out["continuation_feedback"]["status"], "available");
    let row = session_row(&db, &s).await;
    assert_eq!(row.lifecycle, Lifecycle::Finished);
    assert!(row.finished_at.is_some());
    let finished_events: Vec<LedgerRow> = ledger(&db, &s)
        .await
        .into_iter()
        .filter(|e| e.kind == "session_finished")
        .collect();
    assert_eq!(finished_events.len(), 1);
    assert_eq!(finished_events[0].payload["summary"]["excerpt"], "all done");

    // Reading still works; the brief stays closed.
    let brief = brief_of(
        &call(
            &st,
            &key,
            "session_handoff_summary",
            json!({ "session_id": s }),
        )
        .await,
    );
    assert_eq!(brief["progress"]["state"], "closed");
    assert_eq!(
        output(&call(&st, &key, "session_summary", json!({ "session_id": s })).await)["lifecycle"],
        "finished"
    );

    // Every mutation is refused without writing.
    let mutations: Vec<(&str, Value, Option<&str>)> = vec![
        (
            "work_on_project",
            json!({ "session_id": s, "instruction": "more" }),
            None,
        ),
        (
            "update_session_context",
            json!({ "session_id": s, "default_shell": "sh" }),
            None,
        ),
        ("finish_coding_task", json!({ "session_id": s }), None),
        ("runtime_status", json!({}), Some(s.as_str())),
        (
            "work_on_project",
            json!({ "project": P, "instruction": "x" }),
            Some(s.as_str()),
        ),
    ];
    for via in SURFACES {
        for (tool, args, recording) in &mutations {
            let before = workflow_state(&db).await;
            let totals = workflow_totals(&db).await;
            let r = call_via(&st, via, &key, tool, args.clone(), *recording).await;
            assert_eq!(kind(&r), "session_closed", "{via:?} {tool}: {r}");
            assert_eq!(workflow_state(&db).await, before, "{via:?} {tool}");
            assert_eq!(workflow_totals(&db).await, totals, "{via:?} {tool}");
        }
    }
    // Closing a finished session is the one lifecycle step left; then it is closed for good.
    let r = call(&st, &key, "close_session", json!({ "session_id": s })).await;
    assert_eq!(output(&r)["changed"], true);
    assert_eq!(session_row(&db, &s).await.lifecycle, Lifecycle::Closed);
    let r = call(&st, &key, "close_session", json!({ "session_id": s })).await;
    assert_eq!(output(&r)["changed"], false);
    let r = call(
        &st,
        &key,
        "work_on_project",
        json!({ "session_id": s, "instruction": "more" }),
    )
    .await;
    assert_eq!(kind(&r), "session_closed");
}
