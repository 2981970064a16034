//! Cleaning up through both surfaces: tracked paths restored to HEAD, untracked files listed
//! in a dry run and then discarded, both recorded as changes, and both undone by the
//! session's automatic checkpoint.

use super::*;

#[tokio::test]
async fn a_session_restores_paths_discards_untracked_files_and_can_undo_both() {
    let env = start().await;
    let root = env.root();
    let sid = session(&env, "clean up after an experiment").await;
    std::fs::write(root.join("src/lib.rs"), "pub fn answer() -> u32 { 0 }\n").unwrap();
    std::fs::create_dir_all(root.join("experiments")).unwrap();
    std::fs::write(root.join("experiments/try.rs"), "// try\n").unwrap();

    let r = env
        .mcp_tool(
            "git_restore_paths",
            json!({"session_id": sid, "paths": ["src/lib.rs"]}),
        )
        .await;
    let restored = output(&r);
    assert_eq!(restored["source"], "head", "{r}");
    assert_eq!(restored["restored"], json!(["src/lib.rs"]), "{r}");
    assert!(
        std::fs::read_to_string(root.join("src/lib.rs"))
            .unwrap()
            .contains("42")
    );

    let r = env
        .rest("discard_untracked", json!({"session_id": sid}))
        .await;
    let listed = output(&r);
    assert_eq!(listed["dry_run"], true, "{r}");
    assert_eq!(listed["files"], json!(["experiments/try.rs"]), "{r}");
    assert!(root.join("experiments/try.rs").exists());
    let r = env
        .mcp_tool(
            "discard_untracked",
            json!({"session_id": sid, "dry_run": false}),
        )
        .await;
    assert_eq!(output(&r)["files"], json!(["experiments/try.rs"]), "{r}");
    assert!(!root.join("experiments").exists());
    assert_eq!(git(&root, &["status", "--porcelain"]), "");

    let r = env
        .mcp_tool(
            "git_restore_paths",
            json!({"session_id": sid, "paths": ["nothing/here.rs"]}),
        )
        .await;
    assert_eq!(kind(&r), "path_not_found", "{r}");

    // Both are changes the ledger records, with their paths.
    let payloads = stored_payloads(&env, &sid).await;
    for (tool, path) in [
        ("git_restore_paths", "src/lib.rs"),
        ("discard_untracked", "experiments/try.rs"),
    ] {
        assert!(
            payloads
                .lines()
                .any(|l| l.contains(tool) && l.contains("changed_paths") && l.contains(path)),
            "{tool}: {payloads}"
        );
    }

    // The session's first change took its checkpoint: both are undone in one restore.
    let r = env
        .rest("list_checkpoints", json!({"session_id": sid}))
        .await;
    let listed = output(&r);
    let auto = &listed["checkpoints"][0];
    assert_eq!(auto["kind"], "automatic", "{r}");
    env.mcp_ok(
        "restore_checkpoint",
        json!({"session_id": sid, "checkpoint": auto["id"],
               "expected_state": listed["current_state"]}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(root.join("experiments/try.rs")).unwrap(),
        "// try\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("src/lib.rs")).unwrap(),
        "pub fn answer() -> u32 { 0 }\n"
    );
}

#[tokio::test]
async fn a_diff_summary_reviews_the_changes_on_both_surfaces() {
    let env = start().await;
    let root = env.root();
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn answer() -> u32 {\n    43\n}\n",
    )
    .unwrap();
    std::fs::write(root.join("NEW.md"), "new\n").unwrap();
    let r = env
        .mcp_tool("git_diff_summary", json!({"project": P, "limit": 1}))
        .await;
    let page = output(&r);
    assert_eq!(page["total_files"], 2, "{r}");
    assert_eq!(
        page["files"],
        json!([{"path": "NEW.md", "status": "untracked", "original_path": null,
                "added": 0, "removed": 0, "binary": false}]),
        "{r}"
    );
    assert_eq!(page["next_offset"], 1, "{r}");
    let r = env
        .rest(
            "git_diff_summary",
            json!({"project": P, "include_untracked": false}),
        )
        .await;
    let rest = output(&r);
    assert_eq!(rest["total_files"], 1, "{r}");
    assert_eq!(rest["files"][0]["path"], "src/lib.rs", "{r}");
    assert_eq!(
        (&rest["added"], &rest["removed"]),
        (&json!(1), &json!(3)),
        "{r}"
    );
    let r = env
        .mcp_tool("git_diff_summary", json!({"project": P, "base": "-p"}))
        .await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    assert_eq!(r["error"]["pointer"], "/base", "{r}");
    let r = env
        .mcp_tool("git_diff_summary", json!({"project": P, "base": "nope"}))
        .await;
    assert_eq!(kind(&r), "revision_not_found", "{r}");
}
