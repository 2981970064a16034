//! Checkpoints through both surfaces: taken in a session, listed with the current state,
//! diffed, restored only over the expected state (the refusal typed, naming what changed),
//! recorded as changes in the ledger, deleted; and refused to a read-only session.

use super::*;

#[tokio::test]
async fn a_session_checkpoints_breaks_and_restores_its_project() {
    let env = start().await;
    let sid = session(&env, "try a risky change").await;
    let root = env.root();
    let lib = root.join("src/lib.rs");
    let good = std::fs::read_to_string(&lib).unwrap();

    let taken = env
        .mcp_ok(
            "create_checkpoint",
            json!({"session_id": sid, "label": "before the risky change"}),
        )
        .await;
    let checkpoint = taken["checkpoint"].clone();
    let id = checkpoint["id"].as_str().unwrap().to_owned();
    assert_eq!(taken["project"], P);
    assert_eq!(taken["created"], true);
    assert_eq!(checkpoint["kind"], "manual");
    assert_eq!(checkpoint["label"], "before the risky change");
    assert_eq!(checkpoint["session_id"], sid.as_str());

    // Break it: a changed file and a new one.
    env.mcp_ok(
        "write_project_file",
        json!({"session_id": sid, "path": "src/lib.rs", "content": "broken(\n"}),
    )
    .await;
    env.mcp_ok(
        "write_project_file",
        json!({"session_id": sid, "path": "src/stray.rs", "content": "// stray\n"}),
    )
    .await;

    // The writes took the session's automatic checkpoint, after the named one.
    let r = env
        .rest("list_checkpoints", json!({"session_id": sid}))
        .await;
    let listed = output(&r);
    assert_eq!(listed["checkpoints"][1]["id"], id.as_str(), "{r}");
    assert_eq!(listed["checkpoints"][0]["kind"], "automatic", "{r}");
    let automatic = listed["checkpoints"][0]["id"].clone();
    let current = listed["current_state"].as_str().unwrap().to_owned();
    assert_ne!(current, checkpoint["state"].as_str().unwrap());

    let r = env
        .rest(
            "diff_checkpoint",
            json!({"session_id": sid, "checkpoint": id}),
        )
        .await;
    let diff = output(&r);
    let files: Vec<&str> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["src/lib.rs", "src/stray.rs"], "{r}");
    assert!(diff["diff"].as_str().unwrap().contains("+broken("), "{r}");

    // A restore over a state the caller did not see is refused, typed, and changes nothing.
    let stale = checkpoint["state"].as_str().unwrap();
    let r = env
        .mcp_tool(
            "restore_checkpoint",
            json!({"session_id": sid, "checkpoint": id, "expected_state": stale}),
        )
        .await;
    assert_eq!(kind(&r), "state_changed", "{r}");
    assert_eq!(r["error"]["current_state"], current.as_str(), "{r}");
    assert_eq!(
        r["error"]["changed_paths"],
        json!(["src/lib.rs", "src/stray.rs"]),
        "{r}"
    );
    assert_eq!(std::fs::read_to_string(&lib).unwrap(), "broken(\n");

    let r = env
        .rest(
            "restore_checkpoint",
            json!({"session_id": sid, "checkpoint": id, "expected_state": current}),
        )
        .await;
    let restored = output(&r);
    assert_eq!(restored["restored"]["id"], id.as_str(), "{r}");
    assert_eq!(restored["replaced"]["kind"], "before_restore", "{r}");
    assert_eq!(
        restored["files"],
        json!([{"path": "src/lib.rs", "change": "modified"},
               {"path": "src/stray.rs", "change": "deleted"}]),
        "{r}"
    );
    assert_eq!(std::fs::read_to_string(&lib).unwrap(), good);
    assert!(!root.join("src/stray.rs").exists());
    assert_eq!(
        git(&root, &["status", "--porcelain"]),
        "",
        "back to the commit"
    );

    // The ledger records the restore's changed files like any edit's.
    let payloads = stored_payloads(&env, &sid).await;
    let restore_finished = payloads
        .lines()
        .find(|l| l.contains("restore_checkpoint") && l.contains("changed_paths"))
        .unwrap_or_else(|| panic!("no restore evidence: {payloads}"));
    assert!(
        restore_finished.contains("src/stray.rs"),
        "{restore_finished}"
    );

    // Both checkpoints are deleted together; a missing one deletes none.
    let replaced = restored["replaced"]["id"].as_str().unwrap();
    let r = env
        .mcp_tool(
            "delete_checkpoint",
            json!({"session_id": sid, "checkpoints": [id, "ck-000000000000"]}),
        )
        .await;
    assert_eq!(kind(&r), "checkpoint_not_found", "{r}");
    let r = env
        .mcp_tool(
            "delete_checkpoint",
            json!({"session_id": sid, "checkpoints": [id, replaced, id]}),
        )
        .await;
    assert_eq!(output(&r)["deleted"], json!([id, replaced]), "{r}");
    let r = env.rest("list_checkpoints", json!({"project": P})).await;
    let left: Vec<&Value> = output(&r)["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["id"])
        .collect();
    assert_eq!(left, [&automatic], "{r}");
}

#[tokio::test]
async fn checkpoint_arguments_are_checked_and_a_read_only_session_only_looks() {
    let env = start().await;
    for (tool, args, pointer) in [
        (
            "restore_checkpoint",
            json!({"project": P, "checkpoint": "latest", "expected_state": "a".repeat(40)}),
            "/checkpoint",
        ),
        (
            "restore_checkpoint",
            json!({"project": P, "checkpoint": "ck-0123456789ab", "expected_state": "HEAD"}),
            "/expected_state",
        ),
        (
            "diff_checkpoint",
            json!({"project": P, "checkpoint": "ck-0123456789ab", "paths": ["/etc"]}),
            "/paths/0",
        ),
        (
            "delete_checkpoint",
            json!({"project": P, "checkpoints": []}),
            "/checkpoints",
        ),
        (
            "create_checkpoint",
            json!({"project": P, "label": "two\nlines"}),
            "/label",
        ),
    ] {
        let r = env.mcp_tool(tool, args).await;
        assert_eq!(kind(&r), "invalid_arguments", "{tool}: {r}");
        assert_eq!(r["error"]["pointer"], pointer, "{tool}: {r}");
    }
    let r = env
        .mcp_tool(
            "start_session",
            json!({"project": P, "instruction": "look", "mode": "read_only"}),
        )
        .await;
    let sid = output(&r)["session_id"].as_str().unwrap().to_owned();
    let r = env
        .rest("list_checkpoints", json!({"session_id": sid}))
        .await;
    assert_eq!(output(&r)["checkpoints"], json!([]), "{r}");
    for tool in [
        "create_checkpoint",
        "delete_checkpoint",
        "restore_checkpoint",
    ] {
        let args = json!({"session_id": sid, "checkpoints": ["ck-0123456789ab"],
                          "checkpoint": "ck-0123456789ab", "expected_state": "a".repeat(40)});
        let mut args = args;
        if tool == "create_checkpoint" {
            args = json!({"session_id": sid});
        } else if tool == "delete_checkpoint" {
            args = json!({"session_id": sid, "checkpoints": ["ck-0123456789ab"]});
        } else {
            args.as_object_mut().unwrap().remove("checkpoints");
        }
        let r = env.mcp_tool(tool, args).await;
        assert_eq!(kind(&r), "mode_denied", "{tool}: {r}");
    }
}

#[tokio::test]
async fn a_sessions_first_change_takes_one_checkpoint_that_undoes_the_whole_session() {
    let env = start().await;
    let root = env.root();
    // Uncommitted work from before the session is part of what the checkpoint keeps.
    std::fs::write(root.join("NOTES.md"), "mine, uncommitted\n").unwrap();
    let before = git(&root, &["status", "--porcelain"]);
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();

    // Edits without a session take none.
    env.mcp_ok(
        "write_project_file",
        json!({"project": P, "path": "scratch.txt", "content": "no session\n"}),
    )
    .await;
    let r = env.rest("list_checkpoints", json!({"project": P})).await;
    assert_eq!(output(&r)["checkpoints"], json!([]), "{r}");
    std::fs::remove_file(root.join("scratch.txt")).unwrap();

    let sid = session(&env, "change several things").await;
    env.mcp_ok(
        "apply_text_edits",
        json!({"session_id": sid, "path": "src/lib.rs",
               "edits": [{"old_text": "42", "new_text": "43"}]}),
    )
    .await;
    env.mcp_ok(
        "write_project_file",
        json!({"session_id": sid, "path": "src/new.rs", "content": "// new\n"}),
    )
    .await;
    env.mcp_ok(
        "delete_project_files",
        json!({"session_id": sid, "paths": ["AGENTS.md"]}),
    )
    .await;
    let patch = "--- a/src/util/mod.rs\n+++ b/src/util/mod.rs\n@@ -1,3 +1,3 @@\n pub fn double(x: u32) -> u32 {\n-    x * 2\n+    x + x\n }\n";
    env.mcp_ok("apply_patch", json!({"session_id": sid, "patch": patch}))
        .await;

    let r = env
        .rest("list_checkpoints", json!({"session_id": sid}))
        .await;
    let listed = output(&r);
    let checkpoints = listed["checkpoints"].as_array().unwrap();
    assert_eq!(
        checkpoints.len(),
        1,
        "one automatic checkpoint per session: {r}"
    );
    let auto = &checkpoints[0];
    assert_eq!(auto["kind"], "automatic", "{r}");
    assert_eq!(auto["session_id"], sid.as_str(), "{r}");

    // Undo everything the session did: one restore.
    let r = env
        .mcp_tool(
            "restore_checkpoint",
            json!({"session_id": sid, "checkpoint": auto["id"],
                   "expected_state": listed["current_state"]}),
        )
        .await;
    let files: Vec<&str> = output(&r)["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        ["AGENTS.md", "src/lib.rs", "src/new.rs", "src/util/mod.rs"],
        "{r}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("src/lib.rs")).unwrap(),
        lib
    );
    assert_eq!(
        git(&root, &["status", "--porcelain"]),
        before,
        "back to before the session"
    );

    // A second session gets its own.
    let other = session(&env, "another try").await;
    env.mcp_ok(
        "write_project_file",
        json!({"session_id": other, "path": "src/new.rs", "content": "// again\n"}),
    )
    .await;
    let r = env.rest("list_checkpoints", json!({"project": P})).await;
    let kinds: Vec<(&str, &str)> = output(&r)["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap(),
                c["session_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(kinds.len(), 3, "{r}");
    assert!(kinds.contains(&("automatic", other.as_str())), "{r}");
    assert!(kinds.contains(&("before_restore", sid.as_str())), "{r}");
}
