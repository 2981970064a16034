//! What the file tools leave as session evidence: the exploration workset (paths only), the
//! observed workspace in the handoff brief, and its progress verdict.

use super::*;

#[tokio::test]
async fn reads_searches_and_edits_feed_the_handoff_brief() {
    let env = start().await;
    let sid = session(&env, "make answer configurable").await;

    // A clean tree: nothing changed, nothing explored yet.
    let brief = handoff(&env, &sid).await;
    assert_eq!(brief["workspace"]["status"], "available", "{brief}");
    assert_eq!(brief["workspace"]["dirty"], false, "{brief}");

    output(
        &env.rest(
            "read_files",
            json!({"session_id": sid, "files": [{"path": "src/lib.rs"}, {"path": "assets/logo.bin"}]}),
        )
        .await,
    );
    env.mcp_ok(
        "search_project_texts",
        json!({"session_id": sid, "pattern": "x \\* 2"}),
    )
    .await;
    // Failures and listings are not exploration evidence.
    kind(
        &env.rest(
            "read_files",
            json!({"session_id": sid, "files": [{"path": "nope.rs"}]}),
        )
        .await,
    );
    output(
        &env.rest("list_project_files", json!({"session_id": sid}))
            .await,
    );
    output(
        &env.rest(
            "apply_text_edits",
            json!({"session_id": sid, "path": "src/lib.rs",
                   "edits": [{"old_text": "    42\n", "new_text": "    std::env::var(\"ANSWER\").map_or(42, |v| v.parse().unwrap_or(42))\n"}]}),
        )
        .await,
    );

    let brief = handoff(&env, &sid).await;
    assert_eq!(brief["workspace"]["status"], "available", "{brief}");
    assert_eq!(brief["workspace"]["dirty"], true, "{brief}");
    assert!(
        brief["workspace"]["changed_paths"]
            .to_string()
            .contains("src/lib.rs"),
        "{brief}"
    );
    assert_eq!(brief["progress"]["state"], "needs_validation", "{brief}");
    // The workset holds the text read and the file searched, newest first: never the binary
    // file (no text was read), the failed read or the listing.
    let recent = brief["recent_files"].to_string();
    assert!(
        recent.contains("src/util/mod.rs") && recent.contains("src/lib.rs"),
        "{brief}"
    );
    for absent in ["assets/logo.bin", "nope.rs", "Cargo.toml"] {
        assert!(!recent.contains(absent), "{absent}: {brief}");
    }
    // The ledger holds paths, never the pattern or the text: every stored payload, read from
    // the database. The paths read and searched are there, so the absences can fail.
    let stored = stored_payloads(&env, &sid).await;
    assert!(
        stored.contains("src/util/mod.rs") && stored.contains("src/lib.rs"),
        "{stored}"
    );
    let kept: Vec<&str> = ["x \\\\* 2", "x * 2", "pub fn double", "pub mod util"]
        .into_iter()
        .filter(|absent| stored.contains(absent))
        .collect();
    assert!(kept.is_empty(), "the ledger keeps {kept:?}: {stored}");

    // A merge conflict blocks.
    git(&env.root(), &["stash"]);
    git(&env.root(), &["checkout", "-q", "-b", "other"]);
    std::fs::write(
        env.root().join("src/lib.rs"),
        "pub fn answer() -> u32 { 1 }\n",
    )
    .unwrap();
    git(&env.root(), &["commit", "-qam", "other"]);
    git(&env.root(), &["checkout", "-q", "main"]);
    std::fs::write(
        env.root().join("src/lib.rs"),
        "pub fn answer() -> u32 { 2 }\n",
    )
    .unwrap();
    git(&env.root(), &["commit", "-qam", "main"]);
    let merged = Command::new("git")
        .args([
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@example.com",
            "merge",
            "other",
        ])
        .current_dir(env.root())
        .output()
        .unwrap();
    assert!(!merged.status.success(), "the merge was meant to conflict");
    let brief = handoff(&env, &sid).await;
    assert_eq!(brief["workspace"]["conflict"], true, "{brief}");
    assert_eq!(brief["progress"]["state"], "blocked", "{brief}");
    let r = env
        .rest("git_commit", json!({"session_id": sid, "message": "x"}))
        .await;
    assert_eq!(kind(&r), "unmerged_paths", "{r}");

    // Finishing hands over the observed workspace too.
    let done = env
        .rest(
            "finish_coding_task",
            json!({"session_id": sid, "summary": "handed over"}),
        )
        .await;
    let brief = &output(&done)["handoff_brief"];
    assert_eq!(brief["workspace"]["conflict"], true, "{brief}");
    assert_eq!(brief["progress"]["state"], "closed", "{brief}");
}

#[tokio::test]
async fn work_on_project_projects_the_instruction_files_read_on_the_build_host() {
    let env = start().await;
    // The fixture holds AGENTS.md; a CLAUDE.md with a secret is redacted, and a long one cut.
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
    let claude = format!("Use the token {secret} for CI.\n{}", "rule\n".repeat(3000));
    std::fs::write(env.root().join("CLAUDE.md"), &claude).unwrap();
    let r = env
        .mcp_tool(
            "work_on_project",
            json!({"project": P, "instruction": "tidy up"}),
        )
        .await;
    let pi = &output(&r)["project_instructions"];
    assert_eq!(pi["status"], "available", "{pi}");
    assert_eq!(pi["files"][0]["path"], "AGENTS.md", "{pi}");
    assert_eq!(
        pi["files"][0]["text"],
        "# Demo\nRun cargo test before committing.\n"
    );
    assert_eq!(pi["files"][0]["truncated"], false);
    assert_eq!(pi["files"][1]["path"], "CLAUDE.md", "{pi}");
    let text = pi["files"][1]["text"].as_str().unwrap();
    assert!(!text.contains(secret), "a secret reached the projection");
    assert!(text.chars().count() <= 8000, "{}", text.len());
    assert_eq!(pi["files"][1]["truncated"], true);
    assert_eq!(pi["truncated"], true);

    // Asked not to include them: nothing is read or projected.
    let r = env
        .rest(
            "work_on_project",
            json!({"project": P, "instruction": "again", "include_project_instructions": false}),
        )
        .await;
    assert!(output(&r).get("project_instructions").is_none(), "{r}");

    // A project without instruction files says so.
    std::fs::remove_file(env.root().join("AGENTS.md")).unwrap();
    std::fs::remove_file(env.root().join("CLAUDE.md")).unwrap();
    let r = env
        .rest(
            "work_on_project",
            json!({"project": P, "instruction": "bare"}),
        )
        .await;
    assert_eq!(
        output(&r)["project_instructions"],
        json!({"status": "absent"}),
        "{r}"
    );
}

#[tokio::test]
async fn the_context_sidecar_serves_project_instructions_after_the_call() {
    let env = start().await;
    let r = env
        .mcp_tool(
            "git_status",
            json!({"project": P, "context_request": {"materials": [
                "project.instructions", "webcodex.workflow", "memory.bootstrap", "no.such"
            ]}}),
        )
        .await;
    output(&r);
    let m = &r["context_materials"];
    assert_eq!(m["project.instructions"]["status"], "available", "{m}");
    assert_eq!(
        m["project.instructions"]["files"][0]["path"], "AGENTS.md",
        "{m}"
    );
    assert_eq!(m["webcodex.workflow"]["status"], "available", "{m}");
    assert_eq!(m["memory.bootstrap"]["reason_code"], "not_offered", "{m}");
    assert_eq!(m["no.such"]["reason_code"], "unknown_material", "{m}");

    // Without an explicit project nothing is inferred (not even from a session), and a
    // caller without project:read is denied the material, not the call.
    let sid = session(&env, "x").await;
    let r = env
        .mcp_tool(
            "git_status",
            json!({"session_id": sid, "context_request": {"materials": ["project.instructions"]}}),
        )
        .await;
    output(&r);
    assert_eq!(
        r["context_materials"]["project.instructions"]["reason_code"], "project_required",
        "{r}"
    );
    let writer = env
        .token(
            wc_store::credentials::CredentialKind::Project,
            &["project:write"],
            &[P],
        )
        .await;
    let r = mcp_tool(
        &env.st,
        &writer,
        "run_process",
        json!({"project": P, "argv": ["true"], "context_request": {"materials": ["project.instructions"]}}),
    )
    .await;
    assert_eq!(
        r["context_materials"]["project.instructions"]["reason_code"], "scope_denied",
        "{r}"
    );
}
