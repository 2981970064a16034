//! Execution defaults kept on a session: validation, normalization and clearing.

use super::*;

async fn exec_ctx(db: &TestDatabase, s: &str) -> Value {
    session_row(db, s).await.execution_context
}

#[tokio::test]
async fn update_session_context_validates_normalizes_and_clears() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let s = start(&st, &key, P, "configure").await;

    let before = last_seq(&db, &s).await;
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "default_cwd": "./src//x/" }),
    )
    .await;
    let out = output(&r);
    assert_eq!(out["execution_context"], json!({ "default_cwd": "src/x" }));
    assert_eq!(out["changed"], true);
    assert_eq!(exec_ctx(&db, &s).await, json!({ "default_cwd": "src/x" }));
    // The session is the tool's target: it keeps the change's evidence, and no call pair.
    let rows = ledger_after(&db, &s, before).await;
    assert_eq!(shape(&rows), [("session_context_updated", "business")]);
    assert_eq!(rows[0].payload["changed"], json!(["default_cwd"]));
    let summary = call(&st, &key, "session_summary", json!({ "session_id": s })).await;
    assert_eq!(
        output(&summary)["execution_context"],
        json!({ "default_cwd": "src/x" })
    );

    // Refused paths change nothing and write nothing.
    for bad in [
        "/etc",
        "C:\\Windows",
        "\\\\server\\share",
        "~/x",
        "file:///etc",
        "https://x/y",
        "../x",
        "a/../../b",
        "a\nb",
        "a\u{0007}b",
        "a\u{0}b",
        "/srv/password=hunter2hunter2",
    ] {
        for via in SURFACES {
            let before = last_seq(&db, &s).await;
            let r = call_via(
                &st,
                via,
                &key,
                "update_session_context",
                json!({ "session_id": s, "default_cwd": bad }),
                None,
            )
            .await;
            assert_eq!(kind(&r), "invalid_arguments", "{via:?} {bad:?}: {r}");
            assert_eq!(
                r["error"]["pointer"], "/default_cwd",
                "{via:?} {bad:?}: {r}"
            );
            assert_eq!(
                exec_ctx(&db, &s).await,
                json!({ "default_cwd": "src/x" }),
                "{via:?} {bad:?}"
            );
            assert_eq!(last_seq(&db, &s).await, before, "{via:?} {bad:?}");
        }
    }

    // Shells: sh and bash; anything else fails the schema before anything is recorded.
    for shell in ["sh", "bash"] {
        let r = call(
            &st,
            &key,
            "update_session_context",
            json!({ "session_id": s, "default_shell": shell }),
        )
        .await;
        assert_eq!(output(&r)["execution_context"]["default_shell"], shell);
    }
    let before = last_seq(&db, &s).await;
    for shell in ["zsh", "powershell", ""] {
        let r = call(
            &st,
            &key,
            "update_session_context",
            json!({ "session_id": s, "default_shell": shell }),
        )
        .await;
        assert_eq!(kind(&r), "invalid_arguments", "{shell}: {r}");
        assert_eq!(r["error"]["pointer"], "/default_shell", "{r}");
    }
    assert_eq!(last_seq(&db, &s).await, before);
    assert_eq!(
        exec_ctx(&db, &s).await,
        json!({ "default_cwd": "src/x", "default_shell": "bash" })
    );

    // No change, no context event.
    let before = last_seq(&db, &s).await;
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "default_shell": "bash" }),
    )
    .await;
    assert_eq!(output(&r)["changed"], false);
    assert_eq!(last_seq(&db, &s).await, before);

    // With a named resource the cwd is a remote path.
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "resource": "build-box_1", "default_cwd": "/home/dev/x" }),
    )
    .await;
    assert_eq!(
        output(&r)["execution_context"],
        json!({ "default_cwd": "/home/dev/x", "default_shell": "bash", "resource": "build-box_1" })
    );
    // Dropping the resource would leave an absolute local cwd: refused, nothing changes.
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "resource": null }),
    )
    .await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    assert_eq!(r["error"]["pointer"], "/default_cwd");
    assert_eq!(exec_ctx(&db, &s).await["resource"], "build-box_1");
    // A bad resource name.
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "resource": "a b" }),
    )
    .await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    assert_eq!(r["error"]["pointer"], "/resource");

    // null clears a field; absent keeps it.
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "default_shell": null }),
    )
    .await;
    assert_eq!(
        output(&r)["execution_context"],
        json!({ "default_cwd": "/home/dev/x", "resource": "build-box_1" })
    );
    let r = call(
        &st,
        &key,
        "update_session_context",
        json!({ "session_id": s, "resource": null, "default_cwd": null }),
    )
    .await;
    assert_eq!(output(&r)["execution_context"], json!({}));
    assert_eq!(exec_ctx(&db, &s).await, json!({}));
}
