//! Opening a checkout from the chat: `work_on_project` with `client_id` + `path`, as itself
//! or as managed worktrees; two sessions editing and committing in two worktrees of one
//! checkout at once; resume that checks the base; the explicit lifecycle (listed, removed
//! only when nothing would be lost, unless forced); and every refusal before anything opens.

use std::path::PathBuf;

use super::*;

/// A runner `host1` that opens checkouts beneath `allowed/`, where `allowed/app` is a
/// repository on `main` with a branch `first` one commit behind.
struct Opening {
    app: TestApp,
    _tmp: tempfile::TempDir,
    base: PathBuf,
    repo: PathBuf,
    _runner: TestRunner,
}

async fn opening() -> Opening {
    let app = TestApp::new().await;
    // Not under /tmp: jobs get a private /tmp.
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let repo = base.join("allowed/app");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("src/lib.txt"), "one\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    git(&repo, &["branch", "first"]);
    std::fs::write(repo.join("src/lib.txt"), "two\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "second"]);
    std::fs::create_dir_all(base.join("elsewhere")).unwrap();
    let runner = TestRunner::start_opening(
        &app.db,
        &app.st,
        "host1",
        &[],
        &base.join("allowed"),
        &base.join("store"),
    )
    .await;
    Opening {
        app,
        _tmp: tmp,
        base,
        repo,
        _runner: runner,
    }
}

fn rev(dir: &Path, name: &str) -> String {
    git(dir, &["rev-parse", name]).trim().to_owned()
}

#[tokio::test]
async fn two_sessions_work_in_two_worktrees_of_one_checkout_at_once() {
    let o = opening().await;
    let main = rev(&o.repo, "main");
    let open = |task: &'static str| {
        o.app.mcp_ok(
            "work_on_project",
            json!({"client_id": "host1", "path": o.repo.display().to_string(),
                   "mode": "worktree", "instruction": task}),
        )
    };
    let (a, b) = tokio::join!(open("fix the parser"), open("write the docs"));
    let mut roots = Vec::new();
    for started in [&a, &b] {
        let w = &started["workspace"];
        assert_eq!(started["started"], "created", "{started}");
        assert_eq!(started["mode"], "normal", "{started}");
        assert!(
            started["project"]
                .as_str()
                .unwrap()
                .starts_with("agent:host1:wt-"),
            "{started}"
        );
        assert_eq!(w["origin"], "worktree", "{started}");
        assert_eq!(w["base_commit"], main.as_str(), "{started}");
        assert_eq!(w["head"], main.as_str(), "{started}");
        assert_eq!(w["created"], true, "{started}");
        assert_eq!(w["source"], o.repo.display().to_string(), "{started}");
        roots.push(PathBuf::from(w["root"].as_str().unwrap()));
    }
    assert_ne!(a["project"], b["project"]);
    assert_ne!(roots[0], roots[1]);
    let (sa, sb) = (a["session_id"].clone(), b["session_id"].clone());

    // Both edit the same file and commit, at the same time, each in its own worktree.
    let work = |sid: Value, text: &'static str| {
        let app = &o.app;
        async move {
            app.mcp_ok(
                "write_project_file",
                json!({"session_id": sid, "path": "src/lib.txt", "content": text}),
            )
            .await;
            app.mcp_ok(
                "git_commit",
                json!({"session_id": sid, "message": format!("session: {}", text.trim())}),
            )
            .await
        }
    };
    let (ca, cb) = tokio::join!(work(sa.clone(), "from a\n"), work(sb.clone(), "from b\n"));
    assert_ne!(ca["commit"], cb["commit"], "{ca} {cb}");
    for (root, text) in [(&roots[0], "from a\n"), (&roots[1], "from b\n")] {
        assert_eq!(
            std::fs::read_to_string(root.join("src/lib.txt")).unwrap(),
            text
        );
        assert_eq!(rev(root, "HEAD^"), main, "each commit sits on the base");
        assert_eq!(git(root, &["status", "--porcelain"]), "");
    }
    // The source checkout did not move.
    assert_eq!(rev(&o.repo, "main"), main);
    assert_eq!(
        std::fs::read_to_string(o.repo.join("src/lib.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(git(&o.repo, &["status", "--porcelain"]), "");

    // Listed as projects and as managed worktrees, with where they came from.
    let projects = o.app.mcp_ok("list_projects", json!({})).await;
    let listed: Vec<&Value> = projects["projects"].as_array().unwrap().iter().collect();
    assert_eq!(listed.len(), 2, "{projects}");
    for p in &listed {
        assert_eq!(p["origin"], "worktree", "{projects}");
        assert_eq!(p["source"], o.repo.display().to_string(), "{projects}");
    }
    let worktrees = o.app.mcp_ok("list_managed_worktrees", json!({})).await;
    assert_eq!(worktrees["returned"], 2, "{worktrees}");
    assert_eq!(worktrees["worktrees"][0]["base_commit"], main.as_str());
    assert_eq!(worktrees["worktrees"][0]["opened_by_kind"], "shared_key");

    // Resume re-observes the worktree; a base that is not its base refuses the resume.
    let resumed = o
        .app
        .mcp_ok(
            "work_on_project",
            json!({"session_id": sa, "mode": "worktree", "base_ref": "main",
                   "instruction": "carry on"}),
        )
        .await;
    assert_eq!(resumed["started"], "resumed", "{resumed}");
    assert_eq!(resumed["workspace"]["head"], ca["commit"], "{resumed}");
    assert_eq!(resumed["workspace"]["created"], false, "{resumed}");
    let r = o
        .app
        .mcp_tool(
            "work_on_project",
            json!({"session_id": sa, "base_ref": "first", "instruction": "carry on"}),
        )
        .await;
    assert_eq!(kind(&r), "base_mismatch", "{r}");
    assert_eq!(r["error"]["base_commit"], main.as_str(), "{r}");
    assert_eq!(
        r["error"]["base_ref_commit"],
        rev(&o.repo, "first").as_str()
    );

    // The commit only A's worktree holds blocks its removal, listed; forced, it goes.
    let r = o
        .app
        .mcp_tool("remove_managed_worktree", json!({"session_id": sa}))
        .await;
    assert_eq!(kind(&r), "unsaved_work", "{r}");
    assert_eq!(r["error"]["unsaved"]["unsaved_commit_count"], 1, "{r}");
    assert_eq!(
        r["error"]["unsaved"]["unsaved_commits"][0], ca["commit"],
        "{r}"
    );
    assert!(roots[0].exists());
    let removed = o
        .app
        .mcp_ok(
            "remove_managed_worktree",
            json!({"project": a["project"], "force": true}),
        )
        .await;
    assert_eq!(removed["discarded"]["unsaved_commit_count"], 1, "{removed}");
    assert!(!roots[0].exists());
    assert!(!git(&o.repo, &["worktree", "list"]).contains(roots[0].to_str().unwrap()));
    let worktrees = o.app.mcp_ok("list_managed_worktrees", json!({})).await;
    assert_eq!(worktrees["returned"], 1, "{worktrees}");
    assert_eq!(worktrees["worktrees"][0]["project"], b["project"]);
    // The removed worktree's project is no longer one: its session cannot work there.
    let r = o
        .app
        .mcp_tool("git_status", json!({"session_id": sa}))
        .await;
    assert_eq!(kind(&r), "unknown_project", "{r}");
    // B's worktree, its commit on a branch now, is removed without force.
    git(&roots[1], &["branch", "docs"]);
    let r = rest_checked(
        &o.app.st,
        &o.app.key,
        "remove_managed_worktree",
        json!({"session_id": sb}),
    )
    .await;
    assert_eq!(r["success"], true, "{r}");
    assert!(!roots[1].exists());
    assert_eq!(rev(&o.repo, "docs"), cb["commit"].as_str().unwrap());
}

#[tokio::test]
async fn a_checkout_opened_as_itself_is_one_project() {
    let o = opening().await;
    let path = o.repo.display().to_string();
    let first = o
        .app
        .mcp_ok(
            "work_on_project",
            json!({"client_id": "host1", "path": path, "instruction": "look around"}),
        )
        .await;
    assert_eq!(first["workspace"]["origin"], "checkout", "{first}");
    assert_eq!(first["workspace"]["created"], true, "{first}");
    let again = o
        .app
        .mcp_ok(
            "work_on_project",
            json!({"client_id": "host1", "path": format!("{path}/./"), "instruction": "again",
                   "mode": "read_only"}),
        )
        .await;
    assert_eq!(again["project"], first["project"], "{again}");
    assert_eq!(again["workspace"]["created"], false, "{again}");
    assert_eq!(again["mode"], "read_only", "{again}");
    let read = o
        .app
        .mcp_ok(
            "read_files",
            json!({"session_id": first["session_id"], "files": [{"path": "src/lib.txt"}]}),
        )
        .await;
    assert_eq!(read["files"][0]["content"]["text"], "two\n", "{read}");
    // Never removed: it is the developer's own checkout.
    let r = o
        .app
        .mcp_tool(
            "remove_managed_worktree",
            json!({"project": first["project"], "force": true}),
        )
        .await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    assert!(o.repo.join("src/lib.txt").exists());
}

#[tokio::test]
async fn nothing_opens_that_the_policy_credential_or_arguments_do_not_allow() {
    let o = opening().await;
    let path = o.repo.display().to_string();
    let call = |args: Value| o.app.mcp_tool("work_on_project", args);
    let r = call(json!({"client_id": "host1", "instruction": "x",
        "path": o.base.join("elsewhere").display().to_string()}))
    .await;
    assert_eq!(kind(&r), "path_not_allowed", "{r}");
    let r = call(
        json!({"client_id": "host1", "path": path, "mode": "worktree",
        "base_ref": "no-such-branch", "instruction": "x"}),
    )
    .await;
    assert_eq!(kind(&r), "revision_not_found", "{r}");
    let r = call(json!({"client_id": "nobody", "path": path, "instruction": "x"})).await;
    assert_eq!(kind(&r), "unknown_runner", "{r}");
    let r = call(json!({"client_id": "host1", "path": "allowed/app", "instruction": "x"})).await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("absolute path"),
        "{r}"
    );
    for (args, pointer, words) in [
        (
            json!({"path": path, "instruction": "x"}),
            "/project",
            "client_id+path",
        ),
        (
            json!({"client_id": "host1", "instruction": "x", "mode": "worktree"}),
            "",
            "mode=worktree opens path",
        ),
        (
            json!({"project": "agent:host1:x", "mode": "worktree", "instruction": "x"}),
            "",
            "mode=worktree opens path",
        ),
        (
            json!({"project": "agent:host1:x", "client_id": "host1", "path": path,
                    "instruction": "x"}),
            "",
            "not both",
        ),
        (
            json!({"session_id": "wc_sess_0123456789abcdefghijkl", "path": path,
                   "instruction": "x"}),
            "",
            "give one or the other",
        ),
        (
            json!({"project": "agent:host1:x", "base_ref": "main", "instruction": "x"}),
            "",
            "give it with mode=worktree",
        ),
    ] {
        let r = call(args.clone()).await;
        assert_eq!(kind(&r), "invalid_arguments", "{args}: {r}");
        assert_eq!(r["error"]["pointer"], pointer, "{args}: {r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{args}: {r}");
    }
    // A credential that names its projects cannot make a new one.
    let narrow = o
        .app
        .token(
            wc_store::credentials::CredentialKind::Project,
            &["project:read", "project:write"],
            &["agent:host1:co-none"],
        )
        .await;
    let r = mcp_tool(
        &o.app.st,
        &narrow,
        "work_on_project",
        json!({"client_id": "host1", "path": path, "instruction": "x"}),
    )
    .await;
    assert_eq!(kind(&r), "insufficient_scope", "{r}");
    // Nothing was opened by any of it.
    let projects = o.app.mcp_ok("list_projects", json!({})).await;
    assert_eq!(projects["returned"], 0, "{projects}");
    let store: Vec<_> = std::fs::read_dir(o.base.join("store"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(store, ["projects.json"]);
}
