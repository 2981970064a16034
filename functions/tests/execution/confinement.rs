//! Path confinement and bad input: refused before anything is queued or run.

use super::*;

#[tokio::test]
async fn cwd_outside_the_project_is_refused_and_a_symlink_escape_never_runs() {
    let env = start().await;
    for cwd in [
        "../x",
        "/etc",
        "file:x",
        "sub/../../x",
        "~/x",
        "https://example.com/x",
    ] {
        let r = env
            .call(
                "run_process",
                json!({ "project": P, "argv": ["touch", "escaped"], "cwd": cwd }),
            )
            .await;
        assert_eq!(kind(&r), "invalid_arguments", "{cwd}: {r}");
    }
    assert_eq!(work_rows(&env.db).await, 0, "a refused cwd was queued");

    // A symlink inside the root that points outside resolves outside: the runner refuses it
    // before anything starts.
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), env.root().join("link")).unwrap();
    let marker = format!("marker-{}", Uuid::new_v4());
    let r = env
        .call(
            "run_process",
            json!({ "project": P, "argv": ["touch", marker], "cwd": "link" }),
        )
        .await;
    let out = failed(&r, "execution_rejected");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("escapes the project root"),
        "{r}"
    );
    assert_eq!(out["execution_state"], "rejected", "{out}");
    assert_eq!(out["exit_code"], Value::Null);
    let error = out["error"].as_str().unwrap_or_default();
    assert!(error.contains("escapes the project root"), "{out}");
    assert_eq!(out["expectation"]["actionable"], true);
    for dir in [
        env.root(),
        outside.path().to_path_buf(),
        std::env::current_dir().unwrap(),
    ] {
        assert!(
            !dir.join(&marker).exists(),
            "the refused command ran in {}",
            dir.display()
        );
    }

    // A cwd that is a real directory inside the root is fine.
    std::fs::create_dir(env.root().join("inside")).unwrap();
    let r = env
        .call(
            "run_process",
            json!({ "project": P, "argv": ["pwd"], "cwd": "./inside/" }),
        )
        .await;
    assert_eq!(
        output(&r)["stdout"],
        format!("{}\n", env.root().join("inside").display())
    );
}

#[tokio::test]
async fn bad_input_unknown_projects_and_absent_runners_are_refused_before_anything_is_queued() {
    let env = start().await;

    // The shell text bound is in UTF-8 bytes: ASCII over it, and text under the character
    // count but over the byte count.
    let ascii = format!("#{}", "x".repeat(16_000));
    let accented = format!("#{}", "é".repeat(8_000));
    assert_eq!((ascii.len(), accented.len()), (16_001, 16_001));
    for command in [&ascii, &accented] {
        for tool in ["run_shell", "run_job"] {
            let r = env
                .call(tool, json!({ "project": P, "command": command }))
                .await;
            assert_eq!(kind(&r), "invalid_arguments", "{tool}: {r}");
            assert_eq!(r["error"]["pointer"], "/command", "{tool}: {r}");
        }
    }
    let r = env
        .call(
            "run_process",
            json!({ "project": P, "argv": ["echo", "a\u{0}b"] }),
        )
        .await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    assert_eq!(r["error"]["pointer"], "/argv/1", "{r}");
    let r = env
        .call(
            "run_process",
            json!({ "project": "agent:local:nope", "argv": ["true"] }),
        )
        .await;
    assert_eq!(kind(&r), "unknown_project", "{r}");

    // A registered project whose runner exists but has never connected.
    register_project(&env.db, "agent:ghost:beta").await;
    runner_token(&env.db, "ghost").await;
    for (tool, args) in [
        (
            "run_process",
            json!({ "project": "agent:ghost:beta", "argv": ["true"] }),
        ),
        (
            "run_job",
            json!({ "project": "agent:ghost:beta", "command": "true" }),
        ),
    ] {
        let r = env.call(tool, args).await;
        assert_eq!(kind(&r), "runner_unavailable", "{tool}: {r}");
        assert_eq!(r["error"]["runner"], "ghost", "{r}");
    }
    assert_eq!(work_rows(&env.db).await, 0, "refused work was queued");

    // Exactly the bound is accepted and runs.
    let at_bound = format!("#{}", "x".repeat(15_999));
    let r = env
        .call("run_shell", json!({ "project": P, "command": at_bound }))
        .await;
    assert_eq!(output(&r)["execution_state"], "succeeded", "{r}");
    assert_eq!(work_rows(&env.db).await, 1);
}
