//! Read-only sessions refuse project-changing tools and still manage themselves.

use super::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct TouchArgs {
    /// The project.
    #[allow(dead_code)]
    project: Option<String>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct TouchSessionArgs {
    /// The session.
    #[allow(dead_code)]
    session_id: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Touched {
    touched: bool,
}

fn touch_meta(name: &'static str) -> ToolMeta {
    ToolMeta::consequential(Category::Discovery, name, "Touch the project")
        .about("Test-only tool that changes the project.")
}

/// The real tools plus two project-changing test tools that count their runs.
fn tools_with_touch(runs: Arc<AtomicUsize>) -> Vec<ToolSpec> {
    let mut specs = wc_functions::tools::all();
    let r = runs.clone();
    specs.push(ToolSpec::new(
        touch_meta("touch_project"),
        move |_ctx: ToolContext, _args: TouchArgs| {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ToolError>(Touched { touched: true })
            }
        },
    ));
    let r = runs;
    specs.push(
        ToolSpec::new(
            touch_meta("touch_session_project"),
            move |_ctx: ToolContext, _args: TouchSessionArgs| {
                let r = r.clone();
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, ToolError>(Touched { touched: true })
                }
            },
        )
        .with_session(SessionUse::Works),
    );
    specs
}

#[tokio::test]
async fn a_read_only_session_refuses_project_changing_tools_but_manages_itself() {
    let db = TestDatabase::new().await;
    register_project(&db, P).await;
    let key = credential_in_group(
        &db,
        CredentialKind::SharedKey,
        &ALL_SCOPES,
        &[],
        Some("mode-group"),
    )
    .await;
    let runs = Arc::new(AtomicUsize::new(0));
    let st = state(&db).with_tools(tools_with_touch(runs.clone()));
    let principal = Arc::new(Principal {
        kind: PrincipalKind::SharedKey,
        credential_id: Uuid::nil(),
        authority_group: "mode-group".into(),
        scopes: ScopeSet::all(),
        projects: ProjectGrants::All,
        oauth: None,
    });
    let invoke = |name: &str, arguments: Value, recording: Option<&str>| {
        let st = st.clone();
        let call = ToolCall {
            spec: st.runtime.get(name).expect("a registered tool").clone(),
            arguments,
            wrapper: WrapperMeta {
                recording_session_id: recording.map(|r| SessionId::parse(r).unwrap()),
                ..Default::default()
            },
            principal: principal.clone(),
            window: None,
            audit: None,
            task: None,
            progress: None,
        };
        async move { st.runtime.invoke(&st.deps, call).await.result.to_value() }
    };

    let ro = start_mode(&st, &key, P, "look, don't touch", "read_only").await;
    let normal = start(&st, &key, P, "touch away").await;
    assert_eq!(session_row(&db, &ro).await.mode, Mode::ReadOnly);

    // The kernel refuses, naming the field, before the tool runs and before any write.
    let totals = workflow_totals(&db).await;
    let r = invoke("touch_project", json!({ "project": P }), Some(&ro)).await;
    assert_eq!(kind(&r), "mode_denied", "{r}");
    assert_eq!(r["error"]["field"], "recording_session_id");
    let r = invoke("touch_session_project", json!({ "session_id": ro }), None).await;
    assert_eq!(kind(&r), "mode_denied", "{r}");
    assert_eq!(r["error"]["field"], "session_id");
    // Through the router too (the runtime is the state's).
    let r = call_via(
        &st,
        Via::Mcp(MODERN),
        &key,
        "touch_project",
        json!({}),
        Some(&ro),
    )
    .await;
    assert_eq!(kind(&r), "mode_denied", "{r}");
    let r = call_via(
        &st,
        Via::ToolsCall,
        &key,
        "touch_project",
        json!({}),
        Some(&ro),
    )
    .await;
    assert_eq!(kind(&r), "mode_denied", "{r}");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the tool ran");
    assert_eq!(workflow_totals(&db).await, totals, "a denied call wrote");

    // The same calls in a normal session run and are recorded.
    let before = last_seq(&db, &normal).await;
    output(&invoke("touch_project", json!({ "project": P }), Some(&normal)).await);
    output(
        &invoke(
            "touch_session_project",
            json!({ "session_id": normal }),
            None,
        )
        .await,
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let rows = ledger_after(&db, &normal, before).await;
    assert_eq!(
        shape(&rows),
        [
            ("tool_call_started", "recorder"),
            ("tool_call_finished", "recorder"),
            ("tool_call_started", "business"),
            ("tool_call_finished", "business"),
        ]
    );
    // With no session at all, it runs unrecorded.
    output(&invoke("touch_project", json!({}), None).await);
    assert_eq!(runs.load(Ordering::SeqCst), 3);

    // Read-only tools and session management still work in the read-only session.
    output(&invoke("runtime_status", json!({}), Some(&ro)).await);
    let r = invoke(
        "update_session_context",
        json!({ "session_id": ro, "default_cwd": "src" }),
        Some(&ro),
    )
    .await;
    assert_eq!(output(&r)["execution_context"]["default_cwd"], "src");
    output(
        &invoke(
            "session_handoff_summary",
            json!({ "session_id": ro }),
            Some(&ro),
        )
        .await,
    );
    let r = invoke(
        "finish_coding_task",
        json!({ "session_id": ro, "summary": "looked" }),
        None,
    )
    .await;
    assert_eq!(output(&r)["lifecycle"], "finished");
    let ro2 = start_mode(&st, &key, P, "another look", "read_only").await;
    let r = invoke("close_session", json!({ "session_id": ro2 }), Some(&ro2)).await;
    assert_eq!(output(&r)["lifecycle"], "closed");
    assert_eq!(runs.load(Ordering::SeqCst), 3);

    // An explicit resume to normal mode lifts the refusal.
    let ro3 = start_mode(&st, &key, P, "upgrade me", "read_only").await;
    assert_eq!(
        kind(&invoke("touch_project", json!({}), Some(&ro3)).await),
        "mode_denied"
    );
    let r = call(
        &st,
        &key,
        "work_on_project",
        json!({ "session_id": ro3, "instruction": "now change it", "mode": "normal" }),
    )
    .await;
    assert_eq!(output(&r)["mode"], "normal");
    output(&invoke("touch_project", json!({}), Some(&ro3)).await);
    assert_eq!(runs.load(Ordering::SeqCst), 4);
}
