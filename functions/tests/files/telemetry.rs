//! The edit telemetry of the audit: each edit call's row says which surface it used and how
//! it ended, a conflict by its kind, and nothing else carries those fields.

use super::*;

/// The model-ergonomics record of the audited request `reply` answered.
async fn ergonomics(env: &RunnerApp, reply: &Reply) -> Value {
    let row = event_of(&env.db, reply).await;
    let m = row.summary["model_ergonomics"].clone();
    assert!(m.is_object(), "no model_ergonomics: {}", row.summary);
    m
}

/// (edit_surface, edit_outcome, edit_conflict_kind) of a record, `None` where absent.
fn edit_fields(m: &Value) -> (Option<&str>, Option<&str>, Option<&str>) {
    (
        m.get("edit_surface").map(|v| v.as_str().expect("a string")),
        m.get("edit_outcome").map(|v| v.as_str().expect("a string")),
        m.get("edit_conflict_kind")
            .map(|v| v.as_str().expect("a string")),
    )
}

#[tokio::test]
async fn edit_calls_record_their_surface_outcome_and_conflict() {
    let env = start().await;
    let path = env.root().join("src/lib.rs");
    let stale = file_sha(&path);
    std::fs::write(
        &path,
        "pub mod util;\n\npub fn answer() -> u32 {\n    41\n}\n",
    )
    .unwrap();

    // A conflicting canonical edit.
    let r = action(
        &env.st,
        &env.key,
        "apply_text_edits",
        json!({"project": P, "path": "src/lib.rs", "expected_sha256": stale,
               "edits": [{"old_text": "    41\n", "new_text": "    42\n"}]}),
    )
    .await;
    assert_eq!(kind(&r.body), "sha256_mismatch", "{}", r.text());
    let m = ergonomics(&env, &r).await;
    assert_eq!(
        edit_fields(&m),
        (Some("canonical"), Some("conflict"), Some("sha256_mismatch")),
        "{m}"
    );
    assert_eq!(m["error_kind"], "sha256_mismatch", "{m}");
    assert_eq!(m["execution_state"], "completed", "{m}");
    assert_eq!(m["tool_name"], "apply_text_edits", "{m}");

    // A patch that applies, over MCP.
    let patch = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -3,3 +3,3 @@\n pub fn answer() -> u32 {\n-    41\n+    6 * 7\n }\n";
    let r = tools_call(
        &env.st,
        MODERN,
        Some(&env.key),
        "apply_patch",
        json!({"project": P, "patch": patch}),
    )
    .await;
    let sc = &r.result()["structuredContent"];
    assert_eq!(sc["success"], true, "{sc}");
    assert_eq!(sc["output"]["files"][0]["change"], "modified", "{sc}");
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("    6 * 7\n")
    );
    let m = ergonomics(&env, &r).await;
    assert_eq!(
        edit_fields(&m),
        (Some("advanced"), Some("applied"), None),
        "{m}"
    );
    assert_eq!(m["success"], true, "{m}");

    // An edit that replaces a text by itself changed nothing.
    let r = action(
        &env.st,
        &env.key,
        "apply_text_edits",
        json!({"project": P, "path": "src/lib.rs",
               "edits": [{"old_text": "    6 * 7\n", "new_text": "    6 * 7\n"}]}),
    )
    .await;
    assert_eq!(output(&r.body)["changed"], false, "{}", r.text());
    let m = ergonomics(&env, &r).await;
    assert_eq!(
        edit_fields(&m),
        (Some("canonical"), Some("unchanged"), None),
        "{m}"
    );

    // A failure that is no conflict has no conflict kind; one refused before it ran is
    // `rejected`.
    let r = action(
        &env.st,
        &env.key,
        "apply_text_edits",
        json!({"project": P, "path": "assets/logo.bin",
               "edits": [{"old_text": "binary", "new_text": "text"}]}),
    )
    .await;
    assert_eq!(kind(&r.body), "not_text", "{}", r.text());
    let m = ergonomics(&env, &r).await;
    assert_eq!(
        edit_fields(&m),
        (Some("canonical"), Some("failed"), None),
        "{m}"
    );
    let r = action(
        &env.st,
        &env.key,
        "apply_patch",
        json!({"project": P, "patch": "", "surplus": 1}),
    )
    .await;
    assert_eq!(kind(&r.body), "invalid_arguments", "{}", r.text());
    let m = ergonomics(&env, &r).await;
    assert_eq!(
        edit_fields(&m),
        (Some("advanced"), Some("rejected"), None),
        "{m}"
    );

    // Reads and Git tools are no edit surface.
    for (tool, args) in [
        (
            "read_files",
            json!({"project": P, "files": [{"path": "src/lib.rs"}]}),
        ),
        (
            "git_commit",
            json!({"project": P, "message": "answer: six times seven"}),
        ),
    ] {
        let r = action(&env.st, &env.key, tool, args).await;
        assert_eq!(r.body["success"], true, "{tool}: {}", r.text());
        let m = ergonomics(&env, &r).await;
        assert_eq!(edit_fields(&m), (None, None, None), "{tool}: {m}");
    }
}
