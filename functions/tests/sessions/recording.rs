//! The uniform recorder: one recorder pair per listed tool on every surface, nesting with the business session, and refusals that write nothing.

use super::*;

/// Arguments that make `tool` succeed, creating (unrecorded) whatever session it targets, and
/// that business session.
/// `root` is project P's checkout on the runner's host.
async fn working_args(
    st: &AppState,
    key: &str,
    tool: &str,
    root: &std::path::Path,
) -> (Value, Option<String>) {
    let fresh = |i: &'static str| start(st, key, P, i);
    match tool {
        "list_tools" | "runtime_status" | "list_projects" | "list_managed_worktrees" => {
            (json!({}), None)
        }
        "work_on_project" | "start_session" => (
            json!({ "project": P, "instruction": "recorded start" }),
            None,
        ),
        "session_summary" | "session_handoff_summary" | "validation_summary" => {
            let c = fresh("read me").await;
            (json!({ "session_id": c }), Some(c))
        }
        "update_session_context" => {
            let c = fresh("configure me").await;
            (json!({ "session_id": c, "default_shell": "bash" }), Some(c))
        }
        "finish_coding_task" => {
            let c = fresh("finish me").await;
            (json!({ "session_id": c, "summary": "done" }), Some(c))
        }
        "close_session" => {
            let c = fresh("close me").await;
            (json!({ "session_id": c }), Some(c))
        }
        "run_process" => (json!({ "project": P, "argv": ["true"] }), None),
        // Each in its own passing project under the root (see the test's setup).
        "cargo_check" | "cargo_test" | "cargo_fmt" | "cargo_clippy" | "go_test" | "pytest" => {
            let c = fresh("validate in me").await;
            let cwd = match tool {
                "go_test" => "go",
                "pytest" => "py",
                _ => "rust",
            };
            (json!({ "session_id": c, "cwd": cwd }), Some(c))
        }
        "run_shell" => {
            let c = fresh("run in me").await;
            (json!({ "session_id": c, "command": "true" }), Some(c))
        }
        "open_session_shell" => {
            let c = fresh("open a shell in me").await;
            (json!({ "session_id": c }), Some(c))
        }
        "session_shell_exec" | "session_shell_status" | "close_session_shell" => {
            let c = fresh("run in my shell").await;
            let open = call(st, key, "open_session_shell", json!({ "session_id": c })).await;
            let id = output(&open)["shell_id"].clone();
            let mut args = json!({ "session_id": c, "shell_id": id });
            if tool == "session_shell_exec" {
                args["command"] = json!("true");
            }
            (args, Some(c))
        }
        "run_script" => (json!({ "project": P, "script": "exit 0" }), None),
        "run_job" => (json!({ "project": P, "argv": ["true"] }), None),
        "job_status" | "job_log" | "stop_job" => {
            let job = call(
                st,
                key,
                "run_job",
                json!({ "project": P, "argv": ["true"] }),
            )
            .await;
            (json!({ "job_id": output(&job)["job_id"] }), None)
        }
        "list_jobs" | "list_runners" => (json!({}), None),
        "post_session_message" => {
            let c = fresh("board").await;
            (
                json!({ "session_id": c, "kind": "note", "body": "recorded post" }),
                Some(c),
            )
        }
        "list_session_messages" | "observe_session_messages" => {
            let c = fresh("board").await;
            (json!({ "session_id": c }), Some(c))
        }
        "resolve_session_message" | "get_session_assignment" | "complete_session_message" => {
            let c = fresh("board").await;
            let todo = call(
                st,
                key,
                "post_session_message",
                json!({ "session_id": c, "kind": "todo", "body": "work" }),
            )
            .await;
            let todo = output(&todo)["message_id"].clone();
            let mut args = json!({ "session_id": c, "message_id": todo });
            if tool == "complete_session_message" {
                let a = call(st, key, "get_session_assignment", args.clone()).await;
                args["expected_assignment_fence"] = output(&a)["assignment_fence"].clone();
                args["completion_key"] = json!("recorded");
                args["answer"] = json!("done");
            }
            (args, Some(c))
        }
        "project_overview"
        | "list_project_files"
        | "list_project_tracked_files"
        | "git_status"
        | "git_diff"
        | "git_diff_summary"
        | "git_log" => {
            let c = fresh("look in me").await;
            (json!({ "session_id": c }), Some(c))
        }
        "read_files" => {
            let c = fresh("read in me").await;
            (
                json!({ "session_id": c, "files": [{"path": "a.txt"}] }),
                Some(c),
            )
        }
        "search_project_texts" => {
            let c = fresh("search in me").await;
            (json!({ "session_id": c, "pattern": "hello" }), Some(c))
        }
        "apply_text_edits" | "git_commit" => {
            let c = fresh("edit in me").await;
            let path = format!("new-{}.txt", uuid::Uuid::new_v4().simple());
            let create = json!({ "session_id": c, "path": path, "create": true,
                                 "edits": [{"old_text": "", "new_text": "x\n"}] });
            if tool == "apply_text_edits" {
                return (create, Some(c));
            }
            output(&call(st, key, "apply_text_edits", create).await);
            (
                json!({ "session_id": c, "message": "recorded", "paths": [path] }),
                Some(c),
            )
        }
        "write_project_file" | "delete_project_files" | "move_project_file" => {
            let c = fresh("write in me").await;
            let path = format!("w-{}.txt", uuid::Uuid::new_v4().simple());
            let write = json!({ "session_id": c, "path": path, "content": "x\n" });
            if tool == "write_project_file" {
                return (write, Some(c));
            }
            output(&call(st, key, "write_project_file", write).await);
            if tool == "move_project_file" {
                let to = format!("moved/{path}");
                return (json!({ "session_id": c, "from": path, "to": to }), Some(c));
            }
            (json!({ "session_id": c, "paths": [path] }), Some(c))
        }
        "git_restore_paths" => {
            let c = fresh("restore in me").await;
            (json!({ "session_id": c, "paths": ["a.txt"] }), Some(c))
        }
        "discard_untracked" => {
            let c = fresh("discard in me").await;
            (json!({ "session_id": c }), Some(c))
        }
        "create_checkpoint" | "list_checkpoints" => {
            let c = fresh("checkpoint in me").await;
            (json!({ "session_id": c }), Some(c))
        }
        "diff_checkpoint" | "restore_checkpoint" | "delete_checkpoint" => {
            let c = fresh("restore in me").await;
            let taken = call(st, key, "create_checkpoint", json!({ "session_id": c })).await;
            let id = output(&taken)["checkpoint"]["id"].clone();
            let args = match tool {
                "diff_checkpoint" => json!({ "session_id": c, "checkpoint": id }),
                "delete_checkpoint" => json!({ "session_id": c, "checkpoints": [id] }),
                _ => {
                    let listed =
                        call(st, key, "list_checkpoints", json!({ "session_id": c })).await;
                    let state = output(&listed)["current_state"].clone();
                    json!({ "session_id": c, "checkpoint": id, "expected_state": state })
                }
            };
            (args, Some(c))
        }
        "remove_managed_worktree" => {
            // A session on a new managed worktree of the project's checkout.
            let root = root.canonicalize().unwrap().display().to_string();
            let opened = call(
                st,
                key,
                "work_on_project",
                json!({ "client_id": "local", "path": root, "mode": "worktree",
                        "instruction": "remove me" }),
            )
            .await;
            let c = output(&opened)["session_id"].as_str().unwrap().to_owned();
            let project = output(&opened)["project"].clone();
            (json!({ "session_id": c, "project": project }), Some(c))
        }
        "apply_patch" => {
            let c = fresh("patch in me").await;
            let path = format!("p-{}.txt", uuid::Uuid::new_v4().simple());
            let patch = format!("--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n");
            (json!({ "session_id": c, "patch": patch }), Some(c))
        }
        other => panic!(
            "{other} is model-visible but this test has no arguments for it: add them, so its recording is checked"
        ),
    }
}

/// The tool names a surface lists.
async fn listed(st: &AppState, via: Via, key: &str) -> Vec<String> {
    match via {
        Via::Mcp(version) => tool_names(tools_list(st, version, Some(key)).await.result()),
        Via::Action | Via::ToolsCall => {
            let r = rest(st, "/api/tools/list", Some(key), json!({})).await;
            output(&r.body)["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect()
        }
    }
}

/// The tools whose calls land in the session their `session_id` names (they act on the
/// project in it); for every other tool `session_id` is a target.
const WORK_IN_THEIR_SESSION: [&str; 37] = [
    "run_shell",
    "open_session_shell",
    "session_shell_exec",
    "close_session_shell",
    "run_process",
    "run_script",
    "run_job",
    "work_on_project",
    "project_overview",
    "list_project_files",
    "list_project_tracked_files",
    "read_files",
    "search_project_texts",
    "apply_text_edits",
    "apply_patch",
    "write_project_file",
    "delete_project_files",
    "move_project_file",
    "git_status",
    "git_diff",
    "git_diff_summary",
    "git_log",
    "git_commit",
    "git_restore_paths",
    "discard_untracked",
    "create_checkpoint",
    "list_checkpoints",
    "diff_checkpoint",
    "restore_checkpoint",
    "delete_checkpoint",
    "remove_managed_worktree",
    "cargo_check",
    "cargo_test",
    "cargo_fmt",
    "cargo_clippy",
    "go_test",
    "pytest",
];

#[test]
fn each_tool_declares_whether_its_calls_land_in_its_business_session() {
    use wc_functions::kernel::spec::BusinessPair;
    for spec in wc_functions::tools::all() {
        let name = spec.meta.name;
        let want = if WORK_IN_THEIR_SESSION.contains(&name) {
            BusinessPair::Always
        } else if name == "session_handoff_summary" {
            BusinessPair::UnlessRecorded
        } else {
            BusinessPair::Never
        };
        assert_eq!(spec.business_pair, want, "{name}");
    }
}

#[tokio::test]
async fn every_listed_tool_records_exactly_one_recorder_pair_on_every_surface() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    // Beside the build: wherever the checkout is, its jobs see the toolchains scripts/test
    // installed there (pytest), as a project under /tmp sees only its own surroundings.
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // A repository with one file, for the file and Git tools.
    std::fs::write(root.path().join("a.txt"), "hello\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "a.txt"],
        &[
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-qm",
            "a",
        ],
    ] {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(root.path())
            .status()
            .unwrap();
        assert!(ok.success(), "git {args:?}");
    }
    // A passing Rust crate, Go module and pytest project, for the validation tools.
    for (path, text) in [
        (
            "rust/Cargo.toml",
            // A workspace of its own, not a part of the one it lies in.
            "[package]\nname = \"rec\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
        ),
        (
            "rust/src/lib.rs",
            "#[cfg(test)]\nmod tests {\n    #[test]\n    fn ok() {}\n}\n",
        ),
        ("go/go.mod", "module example.com/rec\n\ngo 1.18\n"),
        (
            "go/ok_test.go",
            "package rec\n\nimport \"testing\"\n\nfunc TestOk(t *testing.T) {}\n",
        ),
        ("py/test_ok.py", "def test_ok():\n    pass\n"),
    ] {
        let p = root.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let store = tempfile::tempdir().unwrap();
    let _runner = TestRunner::start_opening(
        &db,
        &st,
        "local",
        &[("alpha", root.path())],
        root.path(),
        store.path(),
    )
    .await;
    for via in SURFACES {
        let w = start(&st, &key, P, "the recording session").await;
        let names = listed(&st, via, &key).await;
        for required in [
            "session_handoff_summary",
            "work_on_project",
            "start_session",
            "runtime_status",
        ] {
            assert!(names.iter().any(|n| n == required), "{via:?}: {names:?}");
        }
        for tool in &names {
            let (args, business) = working_args(&st, &key, tool, root.path()).await;
            // A tool working on another project than P (a managed worktree) is recorded by a
            // session of that project: the recorder's project fence.
            let w = match args.get("project").and_then(Value::as_str) {
                Some(other) if other != P => start(&st, &key, other, "the recording session").await,
                _ => w.clone(),
            };
            let w_before = last_seq(&db, &w).await;
            let b_before = match &business {
                Some(c) => last_seq(&db, c).await,
                None => 0,
            };
            let sessions_before = workflow_totals(&db).await.0;
            let r = call_via(&st, via, &key, tool, args, Some(&w)).await;
            let out = output(&r).clone();

            // W: exactly one recorder pair, nothing else.
            assert_eq!(last_seq(&db, &w).await, w_before + 2, "{via:?} {tool}");
            let w_rows = ledger_after(&db, &w, w_before).await;
            let (w_call, invocation) = one_recorder_pair(&w_rows, tool);

            // The business session: a tool that works in it (execution) keeps exactly one
            // business pair of the same invocation; for every other tool session_id is a
            // target, which holds the tool's own effect (if any) and no pair.
            if let Some(c) = &business {
                let c_rows = ledger_after(&db, c, b_before).await;
                assert!(
                    c_rows
                        .iter()
                        .all(|e| e.invocation_id == invocation && e.role == "business"),
                    "{via:?} {tool}: {c_rows:#?}"
                );
                let pair: Vec<&LedgerRow> = c_rows
                    .iter()
                    .filter(|e| e.kind.starts_with("tool_call_"))
                    .collect();
                if WORK_IN_THEIR_SESSION.contains(&tool.as_str()) {
                    assert_eq!(pair.len(), 2, "{via:?} {tool}: {c_rows:#?}");
                    assert_eq!(pair[0].kind, "tool_call_started");
                    assert_eq!(pair[1].kind, "tool_call_finished");
                    assert_eq!(pair[0].call_id, pair[1].call_id);
                    assert_ne!(
                        pair[0].call_id, w_call,
                        "{via:?} {tool}: pairs share a call id"
                    );
                } else {
                    assert!(pair.is_empty(), "{via:?} {tool}: {c_rows:#?}");
                }
            }
            // work_on_project and start_session made a new session whose only event is its
            // instruction.
            if tool == "work_on_project" || tool == "start_session" {
                let n = out["session_id"].as_str().unwrap();
                let rows = ledger(&db, n).await;
                assert_eq!(shape(&rows), [("task_instruction", "business")], "{via:?}");
                assert_eq!(rows[0].invocation_id, invocation);
                assert_eq!(workflow_totals(&db).await.0, sessions_before + 1);
            }
        }
    }
}

#[tokio::test]
async fn a_recorder_and_a_business_session_keep_their_own_pairs_of_one_invocation() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let root = tempfile::tempdir().unwrap();
    let _runner = TestRunner::start(&db, &st, "local", &[("alpha", root.path())]).await;
    let w = start(&st, &key, P, "recorder").await;
    for (tool, extra, own) in [
        ("run_shell", json!({ "command": "true" }), None),
        (
            "work_on_project",
            json!({ "instruction": "go on" }),
            Some("task_instruction"),
        ),
    ] {
        let c = start(&st, &key, P, "business").await;
        let mut args = extra.clone();
        args["session_id"] = json!(c);
        let (w0, c0) = (last_seq(&db, &w).await, last_seq(&db, &c).await);
        output(&rec(&st, &key, tool, args, &w).await);
        let w_rows = ledger_after(&db, &w, w0).await;
        let c_rows = ledger_after(&db, &c, c0).await;
        let (w_call, invocation) = one_recorder_pair(&w_rows, tool);
        let c_pair: Vec<&LedgerRow> = c_rows
            .iter()
            .filter(|e| e.kind.starts_with("tool_call_"))
            .collect();
        assert_eq!(
            c_pair
                .iter()
                .map(|e| (e.kind.as_str(), e.role.as_str()))
                .collect::<Vec<_>>(),
            [
                ("tool_call_started", "business"),
                ("tool_call_finished", "business")
            ],
            "{tool}: {c_rows:#?}"
        );
        assert_eq!(c_pair[0].call_id, c_pair[1].call_id, "{tool}");
        assert_ne!(c_pair[0].call_id, w_call, "{tool}");
        if let Some(own) = own {
            assert!(c_rows.iter().any(|e| e.kind == own), "{tool}: {c_rows:#?}");
        }
        // Four call events, two call ids, one invocation.
        let all: Vec<&LedgerRow> = w_rows.iter().chain(c_pair.iter().copied()).collect();
        assert_eq!(all.len(), 4);
        assert_eq!(
            all.iter().map(|e| e.call_id).collect::<BTreeSet<_>>().len(),
            2
        );
        assert!(all.iter().all(|e| e.invocation_id == invocation), "{tool}");
        assert!(
            c_rows.iter().all(|e| e.role == "business"),
            "{tool}: {c_rows:#?}"
        );
    }
}

#[tokio::test]
async fn a_recorder_that_is_the_business_session_nests_the_business_pair() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let s = |kind: &'static str, role: &'static str| (kind, role);
    let opened = [
        s("tool_call_started", "recorder"),
        s("tool_call_started", "business"),
    ];
    let closed = [
        s("tool_call_finished", "business"),
        s("tool_call_finished", "recorder"),
    ];
    // (tool, extra arguments, its own effect, whether it works in its session)
    let cases: Vec<(&str, Value, Option<&str>, bool)> = vec![
        ("session_summary", json!({}), None, false),
        ("session_handoff_summary", json!({}), None, false),
        (
            "update_session_context",
            json!({ "default_shell": "sh" }),
            Some("session_context_updated"),
            false,
        ),
        (
            "work_on_project",
            json!({ "instruction": "go on" }),
            Some("task_instruction"),
            true,
        ),
        (
            "finish_coding_task",
            json!({ "summary": "ok" }),
            Some("session_finished"),
            false,
        ),
        ("close_session", json!({}), Some("session_closed"), false),
    ];
    for (tool, extra, own, works_in_it) in cases {
        let c = start(&st, &key, P, "self-recorded").await;
        let mut args = extra;
        args["session_id"] = json!(c);
        let before = last_seq(&db, &c).await;
        output(&rec(&st, &key, tool, args, &c).await);
        let rows = ledger_after(&db, &c, before).await;
        // A session tool's target is recorded as the recorder only: its pair wraps the
        // effect. A tool that works in the session nests its business pair in the recorder's.
        let (opened, closed) = if works_in_it {
            (opened.to_vec(), closed.to_vec())
        } else {
            (opened[..1].to_vec(), closed[1..].to_vec())
        };
        let mut want: Vec<(&str, &str)> = opened;
        if let Some(own) = own {
            want.push((own, "business"));
        }
        want.extend(closed);
        assert_eq!(shape(&rows), want, "{tool}: {rows:#?}");
        let invocation = rows[0].invocation_id;
        assert!(rows.iter().all(|e| e.invocation_id == invocation), "{tool}");
        let rec_ids: BTreeSet<Uuid> = rows
            .iter()
            .filter(|e| e.role == "recorder" && e.kind.starts_with("tool_call_"))
            .map(|e| e.call_id)
            .collect();
        let bus_ids: BTreeSet<Uuid> = rows
            .iter()
            .filter(|e| e.role == "business" && e.kind.starts_with("tool_call_"))
            .map(|e| e.call_id)
            .collect();
        assert_eq!(
            (rec_ids.len(), bus_ids.len()),
            (1, usize::from(works_in_it)),
            "{tool}"
        );
        assert!(rec_ids.is_disjoint(&bus_ids), "{tool}");
        assert!(
            rows.iter().all(|e| e.tool_name.as_deref() == Some(tool)),
            "{tool}: {rows:#?}"
        );
    }
}

#[tokio::test]
async fn recorder_refusals_write_nothing_anywhere() {
    let TestApp { db, st, key } = TestApp::with_projects(&[P, Q]).await;
    let other = credential_in_group(
        &db,
        CredentialKind::SharedKey,
        &ALL_SCOPES,
        &[],
        Some("elsewhere"),
    )
    .await;
    let w_p = start(&st, &key, P, "recorder on P").await;
    let w_q = start(&st, &key, Q, "recorder on Q").await;
    let c_p = start(&st, &key, P, "business on P").await;
    let theirs = start(&st, &other, P, "someone else's").await;
    let finished = start(&st, &key, P, "finished").await;
    output(
        &call(
            &st,
            &key,
            "finish_coding_task",
            json!({ "session_id": finished }),
        )
        .await,
    );
    let closed = start(&st, &key, P, "closed").await;
    output(&call(&st, &key, "close_session", json!({ "session_id": closed })).await);

    let cases: Vec<(&str, &str, Value, String, &str)> = vec![
        (
            "unknown",
            "runtime_status",
            json!({}),
            nobody(),
            "unknown_session_id",
        ),
        (
            "another group's",
            "list_projects",
            json!({}),
            theirs.clone(),
            "unknown_session_id",
        ),
        (
            "finished",
            "runtime_status",
            json!({}),
            finished.clone(),
            "session_closed",
        ),
        (
            "closed",
            "session_summary",
            json!({ "session_id": c_p }),
            closed.clone(),
            "session_closed",
        ),
        (
            "other project than work_on_project's",
            "work_on_project",
            json!({ "project": P, "instruction": "x" }),
            w_q.clone(),
            "project_mismatch",
        ),
        (
            "other project than the business session's",
            "update_session_context",
            json!({ "session_id": c_p, "default_cwd": "src" }),
            w_q.clone(),
            "project_mismatch",
        ),
        (
            "other project than the resumed session's",
            "work_on_project",
            json!({ "session_id": c_p, "instruction": "x" }),
            w_q.clone(),
            "project_mismatch",
        ),
        (
            "other project than the read session's",
            "session_summary",
            json!({ "session_id": c_p }),
            w_q.clone(),
            "project_mismatch",
        ),
    ];
    for via in SURFACES {
        for (what, tool, args, w, want) in &cases {
            let before = workflow_state(&db).await;
            let totals = workflow_totals(&db).await;
            let r = call_via(&st, via, &key, tool, args.clone(), Some(w)).await;
            assert_eq!(kind(&r), *want, "{via:?} {what} recorder on {tool}: {r}");
            assert_eq!(
                r["error"]["field"], "recording_session_id",
                "{via:?} {what}: {r}"
            );
            assert_eq!(
                workflow_state(&db).await,
                before,
                "{via:?} {what}: state changed"
            );
            assert_eq!(
                workflow_totals(&db).await,
                totals,
                "{via:?} {what}: rows written"
            );
        }
    }
    // The matching recorder works for the same calls.
    output(
        &rec(
            &st,
            &key,
            "work_on_project",
            json!({ "project": P, "instruction": "x" }),
            &w_p,
        )
        .await,
    );
    output(
        &rec(
            &st,
            &key,
            "update_session_context",
            json!({ "session_id": c_p, "default_cwd": "src" }),
            &w_p,
        )
        .await,
    );
}
