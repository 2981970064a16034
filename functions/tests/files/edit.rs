//! Changing a project: exact-text edits with conflicts and a retry, patches, the diff and the
//! commit, and the evidence and telemetry they leave.

use super::*;

#[tokio::test]
async fn an_edit_that_conflicts_is_retried_with_the_new_hash_diffed_and_committed() {
    let env = start().await;
    let read = env
        .mcp_tool(
            "read_files",
            json!({"project": P, "files": [{"path": "src/lib.rs"}]}),
        )
        .await;
    let seen = output(&read)["files"][0]["sha256"]
        .as_str()
        .unwrap()
        .to_owned();

    // Someone else changes the file after it was read.
    let path = env.root().join("src/lib.rs");
    let changed = "pub mod util;\n\npub fn answer() -> u32 {\n    41 + 1\n}\n";
    std::fs::write(&path, changed).unwrap();
    let r = env
        .rest(
            "apply_text_edits",
            json!({"project": P, "path": "src/lib.rs", "expected_sha256": seen,
                   "edits": [{"old_text": "pub fn answer", "new_text": "pub fn the_answer"}]}),
        )
        .await;
    assert_eq!(kind(&r), "sha256_mismatch", "{r}");
    assert_eq!(r["error"]["current_sha256"], sha(changed.as_bytes()), "{r}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        changed,
        "a refused edit wrote"
    );

    // Ambiguous and missing texts are typed and name the edit.
    let r = env
        .rest(
            "apply_text_edits",
            json!({"project": P, "path": "src/lib.rs",
                   "edits": [{"old_text": "u32", "new_text": "u64"}, {"old_text": "1", "new_text": "2"}]}),
        )
        .await;
    assert_eq!(kind(&r), "multiple_matches", "{r}");
    assert_eq!(r["error"]["edit_index"], 1, "{r}");
    assert_eq!(r["error"]["matches"], 2, "{r}");
    let r = env
        .rest(
            "apply_text_edits",
            json!({"project": P, "path": "src/lib.rs",
                   "edits": [{"old_text": "u32 {\n    41", "new_text": "u64 {\n    41"}, {"old_text": "nowhere", "new_text": "x"}]}),
        )
        .await;
    assert_eq!(kind(&r), "match_not_found", "{r}");
    assert_eq!(r["error"]["edit_index"], 1, "{r}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        changed,
        "a refused edit wrote"
    );

    // The retry with the current hash applies, atomically, and answers the new hash and a diff.
    let r = env
        .mcp_tool(
            "apply_text_edits",
            json!({"project": P, "path": "src/lib.rs", "expected_sha256": sha(changed.as_bytes()),
                   "edits": [{"old_text": "41 + 1", "new_text": "6 * 7"}]}),
        )
        .await;
    let out = output(&r);
    let now = std::fs::read(&path).unwrap();
    assert_eq!(out["sha256"], sha(&now), "{r}");
    assert_eq!(out["changed"], true);
    assert!(
        out["diff"]
            .as_str()
            .unwrap()
            .contains("-    41 + 1\n+    6 * 7\n"),
        "{r}"
    );

    let r = env.rest("git_diff", json!({"project": P})).await;
    let diff = output(&r);
    assert_eq!(diff["files"][0]["path"], "src/lib.rs", "{r}");
    assert!(diff["diff"].as_str().unwrap().contains("+    6 * 7"), "{r}");

    let r = env.rest("git_status", json!({"project": P})).await;
    let status = output(&r);
    assert_eq!(status["dirty"], true, "{r}");
    assert_eq!(status["entries"][0]["path"], "src/lib.rs", "{r}");
    assert_eq!(status["entries"][0]["worktree"], "modified", "{r}");

    let r = env
        .mcp_tool(
            "git_commit",
            json!({"project": P, "message": "answer: six times seven"}),
        )
        .await;
    let commit = output(&r)["commit"].as_str().unwrap().to_owned();
    assert_eq!(git(&env.root(), &["rev-parse", "HEAD"]).trim(), commit);
    let r = env
        .rest("git_commit", json!({"project": P, "message": "again"}))
        .await;
    assert_eq!(kind(&r), "nothing_to_commit", "{r}");
    let r = env.rest("git_log", json!({"project": P, "limit": 1})).await;
    assert_eq!(
        output(&r)["commits"][0]["subject"],
        "answer: six times seven",
        "{r}"
    );
}

#[tokio::test]
async fn a_read_only_session_reads_but_never_edits_or_commits() {
    let env = start().await;
    let s = env
        .mcp_tool(
            "start_session",
            json!({"project": P, "instruction": "look around", "mode": "read_only"}),
        )
        .await;
    let sid = output(&s)["session_id"].as_str().unwrap().to_owned();
    let r = env
        .rest(
            "read_files",
            json!({"session_id": sid, "files": [{"path": "src/lib.rs"}]}),
        )
        .await;
    output(&r);
    for (tool, args) in [
        (
            "apply_text_edits",
            json!({"session_id": sid, "path": "src/lib.rs", "edits": [{"old_text": "42", "new_text": "43"}]}),
        ),
        (
            "apply_patch",
            json!({"session_id": sid, "patch": "--- a/x\n+++ b/x\n"}),
        ),
        ("git_commit", json!({"session_id": sid, "message": "no"})),
    ] {
        let r = env.rest(tool, args).await;
        assert_eq!(kind(&r), "mode_denied", "{tool}: {r}");
    }
    assert!(
        std::fs::read_to_string(env.root().join("src/lib.rs"))
            .unwrap()
            .contains("42")
    );
}

#[tokio::test]
async fn a_session_writes_and_deletes_whole_files_and_its_ledger_keeps_paths_never_content() {
    let env = start().await;
    let sid = session(&env, "add the changelog").await;
    let secret_line = "the first entry of a brand-new changelog";

    // A new file, in a new directory.
    let made = env
        .mcp_ok(
            "write_project_file",
            json!({"session_id": sid, "path": "docs/CHANGELOG.md",
                   "content": format!("# Changes\n\n- {secret_line}\n")}),
        )
        .await;
    assert_eq!(
        (made["created"].as_bool(), made["changed"].as_bool()),
        (Some(true), Some(true))
    );
    let path = env.root().join("docs/CHANGELOG.md");
    let first = std::fs::read(&path).unwrap();
    assert_eq!(made["sha256"], sha(&first), "{made}");

    // Replaced only while it still holds what was read.
    std::fs::write(&path, "# Changes (edited meanwhile)\n").unwrap();
    let r = env
        .mcp_tool(
            "write_project_file",
            json!({"session_id": sid, "path": "docs/CHANGELOG.md", "content": "# Lost\n",
                   "expected_sha256": sha(&first)}),
        )
        .await;
    assert_eq!(kind(&r), "sha256_mismatch", "{r}");
    assert_eq!(
        r["error"]["current_sha256"],
        sha(b"# Changes (edited meanwhile)\n"),
        "{r}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "# Changes (edited meanwhile)\n"
    );
    let replaced = env
        .mcp_ok(
            "write_project_file",
            json!({"session_id": sid, "path": "docs/CHANGELOG.md", "content": "# Changes\n",
                   "expected_sha256": sha(b"# Changes (edited meanwhile)\n")}),
        )
        .await;
    assert_eq!(replaced["created"], false, "{replaced}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# Changes\n");

    // Outside the root is refused before anything is written.
    let r = env
        .mcp_tool(
            "write_project_file",
            json!({"project": P, "path": "/etc/passwd", "content": "x"}),
        )
        .await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");

    // The session saw the tree change (Git reports the new directory as untracked); its
    // ledger holds the path written, never the content.
    let brief = handoff(&env, &sid).await;
    assert_eq!(brief["workspace"]["dirty"], true, "{brief}");
    assert_eq!(
        brief["workspace"]["changed_paths"]["items"],
        json!(["docs"]),
        "{brief}"
    );
    let stored = stored_payloads(&env, &sid).await;
    assert!(stored.contains("docs/CHANGELOG.md"), "{stored}");
    assert!(!stored.contains(secret_line), "{stored}");

    // Deleted all together or not at all.
    let r = env
        .mcp_tool(
            "delete_project_files",
            json!({"session_id": sid, "paths": ["docs/CHANGELOG.md", "docs/missing.md"]}),
        )
        .await;
    assert_eq!(kind(&r), "path_not_found", "{r}");
    assert!(path.exists());
    let gone = env
        .mcp_ok(
            "delete_project_files",
            json!({"session_id": sid, "paths": ["docs/CHANGELOG.md", "docs/CHANGELOG.md"]}),
        )
        .await;
    assert_eq!(
        gone["deleted"],
        json!([{"path": "docs/CHANGELOG.md", "size": 10}]),
        "{gone}"
    );
    assert!(!path.exists());

    // Moved to a new directory, never over a file, and recorded under both paths.
    let root = env.root();
    let moved = env
        .mcp_ok(
            "move_project_file",
            json!({"session_id": sid, "from": "src/util/mod.rs", "to": "src/helpers/mod.rs"}),
        )
        .await;
    assert_eq!(
        (&moved["from"], &moved["to"]),
        (&json!("src/util/mod.rs"), &json!("src/helpers/mod.rs")),
        "{moved}"
    );
    assert!(!root.join("src/util/mod.rs").exists());
    assert!(root.join("src/helpers/mod.rs").exists());
    let r = env
        .rest(
            "move_project_file",
            json!({"session_id": sid, "from": "src/helpers/mod.rs", "to": "src/lib.rs"}),
        )
        .await;
    assert_eq!(kind(&r), "already_exists", "{r}");
    let r = env
        .mcp_tool(
            "move_project_file",
            json!({"session_id": sid, "from": "src/lib.rs", "to": "./src/lib.rs"}),
        )
        .await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    assert_eq!(r["error"]["pointer"], "/to", "{r}");
    let stored = stored_payloads(&env, &sid).await;
    let recorded = stored
        .lines()
        .find(|l| l.contains("move_project_file") && l.contains("changed_paths"))
        .unwrap_or_else(|| panic!("no move evidence: {stored}"));
    assert!(
        recorded.contains("src/util/mod.rs") && recorded.contains("src/helpers/mod.rs"),
        "{recorded}"
    );
}
