//! work_on_project and start_session: fresh and resumed sessions, and the refusals that change nothing.

use super::*;

#[tokio::test]
async fn work_on_project_without_session_id_creates_a_fresh_unguessable_session() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let mut ids = BTreeSet::new();
    for round in 0..4 {
        for via in SURFACES {
            let r = call_via(
                &st,
                via,
                &key,
                "work_on_project",
                json!({ "project": P, "instruction": "add a cache to the resolver" }),
                None,
            )
            .await;
            let out = output(&r);
            let id = out["session_id"].as_str().unwrap().to_owned();
            let random = id
                .strip_prefix("wc_sess_")
                .unwrap_or_else(|| panic!("{via:?}: {id} lacks the prefix"));
            assert!(random.len() >= 22, "{via:?}: {id} is too short");
            let bytes = URL_SAFE_NO_PAD
                .decode(random)
                .unwrap_or_else(|e| panic!("{via:?}: {id} is not base64url: {e}"));
            assert!(bytes.len() >= 16, "{via:?}: {id} carries under 128 bits");
            assert!(
                ids.insert(id.clone()),
                "round {round} {via:?}: {id} repeated"
            );
            assert_eq!(out["started"], "created", "{via:?}: {out}");
            assert_eq!(out["project"], P);
            assert_eq!(out["lifecycle"], "active");
            assert_eq!(out["mode"], "normal");
            assert_eq!(out["events_observed"], 1, "{via:?}: {out}");
            assert_eq!(
                out["continuation_feedback"],
                json!({ "status": "not_applicable", "reason_code": "fresh_session" }),
                "{via:?}"
            );
            let rows = ledger(&db, &id).await;
            assert_eq!(shape(&rows), [("task_instruction", "business")], "{via:?}");
            assert_eq!(rows[0].payload["excerpt"], "add a cache to the resolver");
            let row = session_row(&db, &id).await;
            assert_eq!(
                row.root_instruction.as_ref().unwrap()["excerpt"],
                "add a cache to the resolver"
            );
        }
    }
    // Twenty ids with no shared 8-character prefix of their random part: not a counter.
    let prefixes: BTreeSet<&str> = ids.iter().map(|i| &i[8..16]).collect();
    assert_eq!(prefixes.len(), ids.len(), "{ids:?}");
    assert_eq!(workflow_totals(&db).await.0, ids.len() as i64);
}

#[tokio::test]
async fn work_on_project_with_session_id_resumes_exactly_that_session() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let id = start(&st, &key, P, "first: fix the parser").await;
    let _decoy = start(&st, &key, P, "a decoy session on the same project").await;
    // Some work in the first attempt.
    output(&rec(&st, &key, "runtime_status", json!({}), &id).await);
    let before = last_seq(&db, &id).await;
    assert_eq!(before, 3);

    let r = call(
        &st,
        &key,
        "work_on_project",
        json!({ "session_id": id, "instruction": "second: add tests" }),
    )
    .await;
    let out = output(&r);
    assert_eq!(out["session_id"], id.as_str());
    assert_eq!(out["started"], "resumed");
    assert_eq!(out["project"], P);
    // Its own business `started`, then the instruction.
    assert_eq!(out["events_observed"], before + 2, "{out}");
    let fb = &out["continuation_feedback"];
    assert_eq!(fb["status"], "available", "{fb}");
    let attempt = &fb["attempt"];
    assert_eq!(
        attempt["instruction"]["text"], "first: fix the parser",
        "{fb}"
    );
    assert_eq!(attempt["instruction"]["truncated"], false);
    assert_eq!(
        attempt["boundary"],
        json!({ "source": "task_instruction", "seq": 1 })
    );
    // The previous attempt: its instruction and the recorded runtime_status, not this call.
    assert_eq!(
        attempt["activity"]["tool_calls"],
        json!({ "started": 1, "finished": 1, "failed": 0, "by_tool": { "runtime_status": 1 } }),
        "{fb}"
    );
    assert_eq!(attempt["event_range"]["to_seq"], before, "{fb}");

    let rows = ledger_after(&db, &id, before).await;
    assert_eq!(
        shape(&rows),
        [
            ("tool_call_started", "business"),
            ("task_instruction", "business"),
            ("tool_call_finished", "business"),
        ]
    );
    assert_eq!(rows[1].payload["excerpt"], "second: add tests");
    assert!(
        rows.iter()
            .all(|e| e.invocation_id == rows[0].invocation_id)
    );

    // A resume over REST describes the attempt just opened.
    let r = call_via(
        &st,
        Via::Action,
        &key,
        "work_on_project",
        json!({ "session_id": id, "instruction": "third: ship it" }),
        None,
    )
    .await;
    let out = output(&r);
    assert_eq!(out["session_id"], id.as_str());
    assert_eq!(
        out["continuation_feedback"]["attempt"]["instruction"]["text"],
        "second: add tests"
    );
    let instructions: Vec<String> = ledger(&db, &id)
        .await
        .into_iter()
        .filter(|e| e.kind == "task_instruction")
        .map(|e| e.payload["excerpt"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        instructions,
        [
            "first: fix the parser",
            "second: add tests",
            "third: ship it"
        ]
    );
    // The root instruction is still the first one.
    assert_eq!(
        session_row(&db, &id).await.root_instruction.unwrap()["excerpt"],
        "first: fix the parser"
    );
    // The decoy was never touched.
    assert_eq!(last_seq(&db, &_decoy).await, 1);
}

#[tokio::test]
async fn work_on_project_refusals_change_nothing() {
    let TestApp { db, st, .. } = TestApp::with_projects(&[P, Q]).await;
    let all = &ALL_SCOPES;
    let owner =
        credential_in_group(&db, CredentialKind::SharedKey, all, &[], Some("group-a")).await;
    let same_group =
        credential_in_group(&db, CredentialKind::SharedKey, all, &[], Some("group-a")).await;
    let other_group =
        credential_in_group(&db, CredentialKind::SharedKey, all, &[], Some("group-b")).await;
    let pc_granted = credential_in_group(
        &db,
        CredentialKind::Project,
        &PROJECT_SCOPES,
        &[P],
        Some("group-a"),
    )
    .await;
    let pc_ungranted = credential_in_group(
        &db,
        CredentialKind::Project,
        &PROJECT_SCOPES,
        &[Q],
        Some("group-a"),
    )
    .await;
    let pc_other_group = credential_in_group(
        &db,
        CredentialKind::Project,
        &PROJECT_SCOPES,
        &[P],
        Some("group-b"),
    )
    .await;

    let s = start(&st, &owner, P, "the task").await;
    let finished = start(&st, &owner, P, "to be finished").await;
    output(
        &call(
            &st,
            &owner,
            "finish_coding_task",
            json!({ "session_id": finished }),
        )
        .await,
    );
    let closed = start(&st, &owner, P, "to be closed").await;
    output(
        &call(
            &st,
            &owner,
            "close_session",
            json!({ "session_id": closed }),
        )
        .await,
    );

    let resume = |id: &str| json!({ "session_id": id, "instruction": "continue" });
    let cases: Vec<(&str, &String, Value, &str)> = vec![
        (
            "unknown id",
            &owner,
            resume(&nobody()),
            "unknown_session_id",
        ),
        (
            "another authority group",
            &other_group,
            resume(&s),
            "unknown_session_id",
        ),
        (
            "another group's project credential",
            &pc_other_group,
            resume(&s),
            "unknown_session_id",
        ),
        (
            "same group, no grant for the session's project",
            &pc_ungranted,
            resume(&s),
            "unknown_session_id",
        ),
        ("finished", &owner, resume(&finished), "session_closed"),
        ("closed", &owner, resume(&closed), "session_closed"),
        (
            "explicit other project",
            &owner,
            json!({ "session_id": s, "project": Q, "instruction": "continue" }),
            "project_mismatch",
        ),
        (
            "no project, no session",
            &owner,
            json!({ "instruction": "start something" }),
            "invalid_arguments",
        ),
        (
            "unknown project",
            &owner,
            json!({ "project": "agent:local:nope", "instruction": "x" }),
            "unknown_project",
        ),
        (
            "project outside the grant",
            &pc_granted,
            json!({ "project": Q, "instruction": "x" }),
            "unknown_project",
        ),
    ];
    for via in SURFACES {
        for (what, auth, args, want) in &cases {
            let before = workflow_state(&db).await;
            let totals = workflow_totals(&db).await;
            let r = call_via(&st, via, auth, "work_on_project", args.clone(), None).await;
            assert_eq!(kind(&r), *want, "{via:?} {what}: {r}");
            match *want {
                "unknown_session_id" | "session_closed" | "project_mismatch" => {
                    assert_eq!(r["error"]["field"], "session_id", "{via:?} {what}: {r}")
                }
                "invalid_arguments" => {
                    assert_eq!(r["error"]["pointer"], "/project", "{via:?} {what}: {r}")
                }
                _ => {}
            }
            assert_eq!(
                workflow_state(&db).await,
                before,
                "{via:?} {what}: state changed"
            );
            assert_eq!(
                workflow_totals(&db).await,
                totals,
                "{via:?} {what}: rows written"
            );
        }
    }
    // The same refusals hold for reading the session.
    for auth in [&other_group, &pc_other_group, &pc_ungranted] {
        let r = call(&st, auth, "session_summary", json!({ "session_id": s })).await;
        assert_eq!(kind(&r), "unknown_session_id", "{r}");
    }

    // What is allowed: the same authority group, by shared key and by a granted project
    // credential, resumes exactly that session.
    for auth in [&same_group, &pc_granted] {
        let r = call(&st, auth, "work_on_project", resume(&s)).await;
        let out = output(&r);
        assert_eq!(
            (out["session_id"].as_str(), out["started"].as_str()),
            (Some(s.as_str()), Some("resumed"))
        );
        let r = call(&st, auth, "session_summary", json!({ "session_id": s })).await;
        assert_eq!(output(&r)["session_id"], s.as_str());
    }
    // A project credential of the group that may see the project starts sessions there.
    let r = call(
        &st,
        &pc_granted,
        "work_on_project",
        json!({ "project": P, "instruction": "x" }),
    )
    .await;
    assert_eq!(output(&r)["started"], "created");
}

#[tokio::test]
async fn start_session_creates_a_plain_session_owned_by_the_callers_authority() {
    let TestApp { db, st, .. } = TestApp::with_projects(&[P, Q]).await;
    let owner = credential_in_group(
        &db,
        CredentialKind::SharedKey,
        &ALL_SCOPES,
        &[],
        Some("group-a"),
    )
    .await;
    let same_group = credential_in_group(
        &db,
        CredentialKind::Project,
        &PROJECT_SCOPES,
        &[P],
        Some("group-a"),
    )
    .await;
    let other_group = credential_in_group(
        &db,
        CredentialKind::SharedKey,
        &ALL_SCOPES,
        &[],
        Some("group-b"),
    )
    .await;
    let mut ids = BTreeSet::new();
    for via in SURFACES {
        for mode in ["normal", "read_only"] {
            let r = call_via(
                &st,
                via,
                &owner,
                "start_session",
                json!({ "project": P, "instruction": "add a cache", "mode": mode }),
                None,
            )
            .await;
            let out = output(&r);
            let id = out["session_id"].as_str().unwrap().to_owned();
            assert!(id.starts_with("wc_sess_"), "{via:?}: {id}");
            assert!(ids.insert(id.clone()), "{via:?}: {id} repeated");
            assert_eq!(out["project"], P);
            assert_eq!(out["mode"], mode, "{via:?}: {out}");
            assert_eq!(out["lifecycle"], "active");
            assert_eq!(out["events_observed"], 1, "{via:?}: {out}");
            // A plain create: no startup projection.
            for projected in [
                "started",
                "continuation_feedback",
                "workflow_guidance",
                "project_instructions",
            ] {
                assert!(
                    out.get(projected).is_none(),
                    "{via:?}: {projected} in {out}"
                );
            }
            let rows = ledger(&db, &id).await;
            assert_eq!(shape(&rows), [("task_instruction", "business")], "{via:?}");
            assert_eq!(rows[0].tool_name.as_deref(), Some("start_session"));
            assert_eq!(rows[0].payload["excerpt"], "add a cache");
            let row = session_row(&db, &id).await;
            assert_eq!(row.mode.as_str(), mode);
            assert_eq!(
                row.root_instruction.as_ref().unwrap()["excerpt"],
                "add a cache"
            );
        }
    }
    // The session belongs to the caller's authority group, exactly as a work_on_project
    // start: the group resumes and reads it, another group cannot see it.
    let id = ids.iter().next().unwrap().clone();
    let r = call(
        &st,
        &same_group,
        "work_on_project",
        json!({ "session_id": id, "instruction": "continue" }),
    )
    .await;
    assert_eq!(output(&r)["started"], "resumed");
    let r = call(
        &st,
        &other_group,
        "session_summary",
        json!({ "session_id": id }),
    )
    .await;
    assert_eq!(kind(&r), "unknown_session_id", "{r}");
    let r = call(
        &st,
        &other_group,
        "work_on_project",
        json!({ "session_id": id, "instruction": "steal" }),
    )
    .await;
    assert_eq!(kind(&r), "unknown_session_id", "{r}");
}

#[tokio::test]
async fn start_session_refuses_what_work_on_project_refuses_and_changes_nothing() {
    let TestApp { db, st, .. } = TestApp::with_projects(&[P, Q]).await;
    let owner = credential_in_group(
        &db,
        CredentialKind::SharedKey,
        &ALL_SCOPES,
        &[],
        Some("group-a"),
    )
    .await;
    let pc_granted = credential_in_group(
        &db,
        CredentialKind::Project,
        &PROJECT_SCOPES,
        &[P],
        Some("group-a"),
    )
    .await;
    let read_only_key = credential_in_group(
        &db,
        CredentialKind::SharedKey,
        &["project:read"],
        &[],
        Some("group-a"),
    )
    .await;
    let cases: Vec<(&str, &String, Value, &str)> = vec![
        (
            "unknown project",
            &owner,
            json!({ "project": "agent:local:nope", "instruction": "x" }),
            "unknown_project",
        ),
        (
            "project outside the grant",
            &pc_granted,
            json!({ "project": Q, "instruction": "x" }),
            "unknown_project",
        ),
        (
            "no project",
            &owner,
            json!({ "instruction": "x" }),
            "invalid_arguments",
        ),
        (
            "no instruction",
            &owner,
            json!({ "project": P }),
            "invalid_arguments",
        ),
        (
            "an unknown mode",
            &owner,
            json!({ "project": P, "instruction": "x", "mode": "inspect" }),
            "invalid_arguments",
        ),
        (
            "a session to resume",
            &owner,
            json!({ "project": P, "instruction": "x", "session_id": nobody() }),
            "invalid_arguments",
        ),
        (
            "without project:write",
            &read_only_key,
            json!({ "project": P, "instruction": "x" }),
            "insufficient_scope",
        ),
    ];
    for via in SURFACES {
        for (what, auth, args, want) in &cases {
            // work_on_project refuses the same start the same way (a resume is its own).
            if *what != "a session to resume" {
                let before = workflow_totals(&db).await;
                let w = call_via(&st, via, auth, "work_on_project", args.clone(), None).await;
                assert_eq!(kind(&w), *want, "{via:?} work_on_project {what}: {w}");
                assert_eq!(workflow_totals(&db).await, before, "{via:?} {what}");
            }
            let before = workflow_state(&db).await;
            let totals = workflow_totals(&db).await;
            let r = call_via(&st, via, auth, "start_session", args.clone(), None).await;
            assert_eq!(kind(&r), *want, "{via:?} {what}: {r}");
            if *want == "unknown_project" {
                assert_eq!(
                    r["error"]["project"], args["project"],
                    "{via:?} {what}: {r}"
                );
            }
            assert_eq!(
                workflow_state(&db).await,
                before,
                "{via:?} {what}: state changed"
            );
            assert_eq!(
                workflow_totals(&db).await,
                totals,
                "{via:?} {what}: rows written"
            );
        }
    }
}

#[tokio::test]
async fn start_session_may_be_recorded_in_a_read_only_session() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let ro = start_mode(&st, &key, P, "watch", "read_only").await;
    let before = last_seq(&db, &ro).await;
    // Creating a session changes no project: a read-only recorder takes it, as it takes a
    // work_on_project start.
    for tool in ["start_session", "work_on_project"] {
        let r = rec(
            &st,
            &key,
            tool,
            json!({ "project": P, "instruction": "a sibling", "mode": "read_only" }),
            &ro,
        )
        .await;
        let out = output(&r);
        assert_eq!(out["mode"], "read_only", "{tool}: {out}");
        assert_ne!(out["session_id"], json!(ro));
    }
    let rows = ledger_after(&db, &ro, before).await;
    one_recorder_pair(&rows[..2], "start_session");
    one_recorder_pair(&rows[2..], "work_on_project");
}
