//! Every typed refusal of the file tools on the REST surface, with its HTTP status: paths
//! that leave the root or lead nowhere readable, bad patterns, globs, cursors and patches,
//! edits the file's kind forbids, Git tools outside a repository, and a runner that does not
//! edit. Refusals of malformed input happen before anything is queued; refused edits write
//! nothing.

use std::path::PathBuf;

use wc_store::runners::{self, Registration};

use super::*;

/// `tool` over REST, refused as `kind` with HTTP `status`; the error.
#[track_caller]
fn refused_as(r: &Reply, tool: &str, kind_: &str, status: u16) -> Value {
    assert_eq!(kind(&r.body), kind_, "{tool}: {}", r.text());
    assert_eq!(r.status.as_u16(), status, "{tool}: {}", r.text());
    assert!(
        !r.body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{tool}: a refusal without words: {}",
        r.text()
    );
    r.body["error"].clone()
}

/// How many `runner_work` rows exist.
async fn work_rows(env: &TestApp) -> i64 {
    let client = env.db.pool().get().await.unwrap();
    client
        .query_one("SELECT count(*) FROM runner_work", &[])
        .await
        .unwrap()
        .get(0)
}

/// Every regular file under `root` (outside `.git`) with its content.
fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if entry.file_name() == ".git" {
                continue;
            }
            if kind.is_dir() {
                dirs.push(entry.path());
            } else if kind.is_file() {
                out.push((entry.path(), std::fs::read(entry.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn paths_that_lead_nowhere_readable_are_refused_typed_with_their_status() {
    let env = start().await;
    let root = env.root();
    let fifo = Command::new("mkfifo")
        .arg(root.join("pipe"))
        .status()
        .unwrap();
    assert!(fifo.success());
    // (tool, arguments, kind, HTTP status)
    let cases = [
        (
            "read_files",
            json!({"project": P, "files": [{"path": "escape/passwd"}]}),
            "path_outside_root",
            400,
        ),
        (
            "list_project_files",
            json!({"project": P, "path": "escape"}),
            "path_outside_root",
            400,
        ),
        (
            "apply_text_edits",
            json!({"project": P, "path": "escape/hostname", "edits": [{"old_text": "a", "new_text": "b"}]}),
            "path_outside_root",
            400,
        ),
        (
            "read_files",
            json!({"project": P, "files": [{"path": "src/lib.rs"}, {"path": "src/nope.rs"}]}),
            "path_not_found",
            404,
        ),
        (
            "apply_text_edits",
            json!({"project": P, "path": "src/nope.rs", "edits": [{"old_text": "a", "new_text": "b"}]}),
            "path_not_found",
            404,
        ),
        (
            "read_files",
            json!({"project": P, "files": [{"path": "src/util"}]}),
            "not_a_file",
            400,
        ),
        (
            "apply_text_edits",
            json!({"project": P, "path": "src", "edits": [{"old_text": "a", "new_text": "b"}]}),
            "not_a_file",
            400,
        ),
        (
            "read_files",
            json!({"project": P, "files": [{"path": "pipe"}]}),
            "special_file",
            400,
        ),
        (
            "apply_text_edits",
            json!({"project": P, "path": "pipe", "edits": [{"old_text": "a", "new_text": "b"}]}),
            "special_file",
            400,
        ),
    ];
    for (tool, args, want, status) in cases {
        let r = rest_call(&env.st, &env.key, tool, args.clone()).await;
        refused_as(&r, tool, want, status);
    }
    // Nothing beyond the root was written, and the refused edits changed nothing inside it.
    assert_eq!(
        std::fs::read_to_string(root.join("src/lib.rs")).unwrap(),
        "pub mod util;\n\npub fn answer() -> u32 {\n    42\n}\n"
    );
    assert!(!root.join("src/nope.rs").exists());
}

#[tokio::test]
async fn malformed_paths_patterns_globs_and_cursors_are_invalid_arguments() {
    let env = start().await;
    // `..` and absolute paths: refused by the argument types, before anything is queued.
    // (tool, arguments, pointer)
    let early = [
        (
            "read_files",
            json!({"project": P, "files": [{"path": "../outside"}]}),
            "/files/0/path",
        ),
        (
            "read_files",
            json!({"project": P, "files": [{"path": "src/lib.rs"}, {"path": "/etc/passwd"}]}),
            "/files/1/path",
        ),
        (
            "list_project_files",
            json!({"project": P, "path": "src/../.."}),
            "/path",
        ),
        (
            "search_project_texts",
            json!({"project": P, "pattern": "x", "path": "/etc"}),
            "/path",
        ),
        (
            "apply_text_edits",
            json!({"project": P, "path": "../x.rs", "edits": [{"old_text": "a", "new_text": "b"}]}),
            "/path",
        ),
        (
            "git_diff",
            json!({"project": P, "paths": ["src", "/etc"]}),
            "/paths/1",
        ),
        (
            "git_commit",
            json!({"project": P, "message": "m", "paths": ["../x"]}),
            "/paths/0",
        ),
        ("git_log", json!({"project": P, "path": "/"}), "/path"),
    ];
    for (tool, args, pointer) in early {
        let r = rest_call(&env.st, &env.key, tool, args.clone()).await;
        let error = refused_as(&r, tool, "invalid_arguments", 400);
        assert_eq!(error["pointer"], pointer, "{tool} {args}: {error}");
    }
    assert_eq!(work_rows(&env).await, 0, "a malformed path was queued");

    // Syntax the runner judges: refused typed, naming the argument.
    let judged = [
        (
            "search_project_texts",
            json!({"project": P, "pattern": "a{2,1}"}),
            "/pattern",
        ),
        (
            "search_project_texts",
            json!({"project": P, "pattern": "answer", "glob": "src/[a-"}),
            "/glob",
        ),
        (
            "list_project_files",
            json!({"project": P, "glob": "**/[z-a].rs"}),
            "/glob",
        ),
    ];
    for (tool, args, pointer) in judged {
        let r = rest_call(&env.st, &env.key, tool, args.clone()).await;
        let error = refused_as(&r, tool, "invalid_arguments", 400);
        assert_eq!(error["pointer"], pointer, "{tool} {args}: {error}");
    }

    // A cursor this runner never handed out, in the right alphabet, is invalid_cursor.
    for (tool, args) in [
        (
            "list_project_files",
            json!({"project": P, "cursor": "bm90LWEtY3Vyc29y"}),
        ),
        (
            "search_project_texts",
            json!({"project": P, "pattern": "answer", "cursor": "bm90LWEtY3Vyc29y"}),
        ),
        (
            "list_project_tracked_files",
            json!({"project": P, "cursor": "bm90LWEtY3Vyc29y"}),
        ),
    ] {
        let r = rest_call(&env.st, &env.key, tool, args).await;
        refused_as(&r, tool, "invalid_cursor", 400);
    }
    // A real cursor works, and one handed out for other arguments does not.
    let r = rest_checked(
        &env.st,
        &env.key,
        "list_project_files",
        json!({"project": P, "limit": 1}),
    )
    .await;
    let cursor = output(&r)["next_cursor"].as_str().unwrap().to_owned();
    let r = rest_checked(
        &env.st,
        &env.key,
        "list_project_files",
        json!({"project": P, "limit": 1, "cursor": cursor}),
    )
    .await;
    assert_eq!(output(&r)["files"].as_array().unwrap().len(), 1, "{r}");
    let r = rest_call(
        &env.st,
        &env.key,
        "search_project_texts",
        json!({"project": P, "pattern": "answer", "cursor": cursor}),
    )
    .await;
    refused_as(&r, "search_project_texts", "invalid_cursor", 400);
}

#[tokio::test]
async fn refused_patches_and_edits_change_no_file() {
    let env = start().await;
    let root = env.root();
    std::os::unix::fs::symlink("src/lib.rs", root.join("lib_link.rs")).unwrap();
    let before = snapshot(&root);

    // The first file's hunk applies, the second's does not: neither file is written.
    let patch = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -3,3 +3,3 @@\n pub fn answer() -> u32 {\n-    42\n+    43\n }\n\
                 --- a/src/util/mod.rs\n+++ b/src/util/mod.rs\n@@ -1,3 +1,3 @@\n pub fn double(x: u32) -> u32 {\n-    x * 3\n+    x * 4\n }\n";
    let r = action(
        &env.st,
        &env.key,
        "apply_patch",
        json!({"project": P, "patch": patch}),
    )
    .await;
    let error = refused_as(&r, "apply_patch", "patch_does_not_apply", 409);
    assert_eq!(error["path"], "src/util/mod.rs", "{error}");
    assert_eq!(error["hunk"], 1, "{error}");
    assert_eq!(snapshot(&root), before, "a refused patch wrote");

    // Text that is not a unified diff names its line.
    let r = action(
        &env.st,
        &env.key,
        "apply_patch",
        json!({"project": P, "patch": "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ nonsense @@\n-    42\n+    43\n"}),
    )
    .await;
    let error = refused_as(&r, "apply_patch", "invalid_arguments", 400);
    assert_eq!(error["pointer"], "/patch", "{error}");
    let r = action(
        &env.st,
        &env.key,
        "apply_patch",
        json!({"project": P, "patch": "this is no patch\n"}),
    )
    .await;
    let error = refused_as(&r, "apply_patch", "invalid_arguments", 400);
    assert_eq!(error["pointer"], "/patch", "{error}");

    // (tool, arguments, kind, HTTP status)
    let cases = [
        (
            "apply_text_edits",
            json!({"project": P, "path": "Cargo.toml", "create": true,
                   "edits": [{"old_text": "", "new_text": "[package]\n"}]}),
            "already_exists",
            409,
        ),
        (
            "apply_patch",
            json!({"project": P, "patch": "--- /dev/null\n+++ b/AGENTS.md\n@@ -0,0 +1 @@\n+# Replaced\n"}),
            "already_exists",
            409,
        ),
        (
            "apply_text_edits",
            json!({"project": P, "path": "assets/logo.bin",
                   "edits": [{"old_text": "binary answer", "new_text": "text answer"}]}),
            "not_text",
            400,
        ),
        (
            "apply_text_edits",
            json!({"project": P, "path": "lib_link.rs",
                   "edits": [{"old_text": "    42\n", "new_text": "    43\n"}]}),
            "path_is_symlink",
            400,
        ),
        (
            "apply_patch",
            json!({"project": P, "patch": "--- a/lib_link.rs\n+++ b/lib_link.rs\n@@ -4 +4 @@\n-    42\n+    43\n"}),
            "path_is_symlink",
            400,
        ),
    ];
    for (tool, args, want, status) in cases {
        let r = rest_call(&env.st, &env.key, tool, args.clone()).await;
        refused_as(&r, tool, want, status);
    }
    assert_eq!(snapshot(&root), before, "a refused edit wrote");
    assert_eq!(
        std::fs::read_link(root.join("lib_link.rs")).unwrap(),
        Path::new("src/lib.rs"),
        "the symlink was replaced"
    );
}

#[tokio::test]
async fn git_tools_outside_a_repository_are_refused_not_a_repository() {
    // A project root that is no Git work tree (nor inside one).
    let env = RunnerApp::start("alpha").await;
    std::fs::write(env.root().join("notes.txt"), "plain\n").unwrap();
    for (tool, args) in [
        ("git_status", json!({"project": P})),
        ("git_diff", json!({"project": P})),
        ("git_log", json!({"project": P})),
        ("git_commit", json!({"project": P, "message": "m"})),
    ] {
        let r = rest_call(&env.st, &env.key, tool, args).await;
        refused_as(&r, tool, "not_a_repository", 409);
    }
    assert!(!env.root().join(".git").exists());
    // The overview tells it as a state, not a refusal.
    let r = rest_checked(&env.st, &env.key, "project_overview", json!({"project": P})).await;
    assert_eq!(
        output(&r)["git"],
        json!({"status": "not_a_repository"}),
        "{r}"
    );
}

#[tokio::test]
async fn a_runner_that_does_not_announce_edits_gets_none_queued() {
    let app = TestApp::with_projects(&[P]).await;
    {
        let client = app.db.pool().get().await.unwrap();
        runners::create(&client, "local", None, &[7u8; 32], true)
            .await
            .unwrap()
            .unwrap();
    }
    runners::register(
        app.db.pool(),
        &Registration {
            client_id: "local",
            instance_id: uuid::Uuid::now_v7(),
            agent_version: "test",
            queue: "api_poll",
            max_concurrency: 4,
            projects: &["alpha".to_owned()],
            work_kinds: &[
                "process".to_owned(),
                "shell".to_owned(),
                "script".to_owned(),
                "explore".to_owned(),
                "git".to_owned(),
            ],
        },
        &wc_store::testing::runner_work::NoEvidence,
    )
    .await
    .unwrap();
    for (tool, args) in [
        (
            "apply_text_edits",
            json!({"project": P, "path": "src/lib.rs", "edits": [{"old_text": "42", "new_text": "43"}]}),
        ),
        (
            "apply_patch",
            json!({"project": P, "patch": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"}),
        ),
    ] {
        let r = rest_call(&app.st, &app.key, tool, args).await;
        let error = refused_as(&r, tool, "unsupported", 400);
        assert_eq!(error["work_kind"], "edit", "{error}");
        assert_eq!(error["project"], P, "{error}");
    }
    assert_eq!(work_rows(&app).await, 0, "edit work was queued");
}
