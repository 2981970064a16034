//! Two server instances over one database take turns on one project's files: a hash read
//! through one fences an edit sent to the other, and concurrent edits from both, each naming
//! the same hash, let exactly one through. What either instance knows of the other's calls
//! comes only from the database and the files.

use super::*;

/// The fixture's `src/lib.rs` with its answer replaced by `n`.
fn lib_answering(n: u32) -> String {
    format!("pub mod util;\n\npub fn answer() -> u32 {{\n    {n}\n}}\n")
}

#[tokio::test]
async fn instances_take_turns_reading_editing_and_committing_one_file() {
    let env = start().await;
    let (a, b, key) = (&env.st, &env.second(), env.key.as_str());
    let path = env.root().join("src/lib.rs");

    // A reads; B edits with the hash A handed out.
    let read = rest_checked(
        a,
        key,
        "read_files",
        json!({"project": P, "files": [{"path": "src/lib.rs"}]}),
    )
    .await;
    let first = output(&read)["files"][0]["sha256"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(first, file_sha(&path), "{read}");
    let r = mcp_tool(
        b,
        key,
        "apply_text_edits",
        json!({"project": P, "path": "src/lib.rs", "expected_sha256": first,
               "edits": [{"old_text": "    42\n", "new_text": "    43\n"}]}),
    )
    .await;
    let edited = output(&r);
    assert_eq!(edited["previous_sha256"], first.as_str(), "{r}");
    assert_eq!(edited["changed"], true, "{r}");
    assert_eq!(edited["edits_applied"], 1, "{r}");
    let second = edited["sha256"].as_str().unwrap().to_owned();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), lib_answering(43));
    assert_eq!(second, file_sha(&path));

    // A sees the change B made: one modified file, nothing else.
    let r = rest_checked(a, key, "git_status", json!({"project": P})).await;
    let status = output(&r);
    assert_eq!(status["dirty"], true, "{r}");
    assert_eq!(
        (
            &status["unstaged"],
            &status["staged"],
            &status["untracked"],
            &status["conflicts"]
        ),
        (&json!(1), &json!(0), &json!(0), &json!(0)),
        "{r}"
    );
    assert_eq!(status["entries"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(status["entries"][0]["path"], "src/lib.rs", "{r}");
    assert_eq!(status["entries"][0]["worktree"], "modified", "{r}");
    assert_eq!(status["entries"][0]["index"], Value::Null, "{r}");

    // An edit on B that still names the hash from before the first edit is refused with the
    // current one, and writes nothing.
    let r = rest_checked(
        b,
        key,
        "apply_text_edits",
        json!({"project": P, "path": "src/lib.rs", "expected_sha256": first,
               "edits": [{"old_text": "    43\n", "new_text": "    44\n"}]}),
    )
    .await;
    assert_eq!(kind(&r), "sha256_mismatch", "{r}");
    assert_eq!(r["error"]["current_sha256"], second.as_str(), "{r}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), lib_answering(43));

    // A commits what B wrote; B's log shows it, and B's status is clean again.
    let r = mcp_tool(
        a,
        key,
        "git_commit",
        json!({"project": P, "message": "answer: forty-three"}),
    )
    .await;
    let commit = output(&r)["commit"].as_str().unwrap().to_owned();
    assert_eq!(output(&r)["files_changed"], 1, "{r}");
    assert_eq!(
        (
            output(&r)["insertions"].as_u64(),
            output(&r)["deletions"].as_u64()
        ),
        (Some(1), Some(1)),
        "{r}"
    );
    assert_eq!(git(&env.root(), &["rev-parse", "HEAD"]).trim(), commit);
    let r = rest_checked(b, key, "git_log", json!({"project": P, "limit": 2})).await;
    let commits = output(&r)["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 2, "{r}");
    assert_eq!(commits[0]["commit"], commit.as_str(), "{r}");
    assert_eq!(commits[0]["subject"], "answer: forty-three", "{r}");
    assert_eq!(commits[1]["subject"], "initial", "{r}");
    assert_eq!(commits[0]["parents"], json!([commits[1]["commit"]]), "{r}");
    let r = rest_checked(b, key, "git_status", json!({"project": P})).await;
    assert_eq!(output(&r)["dirty"], false, "{r}");
    assert_eq!(output(&r)["head"], commit.as_str(), "{r}");
}

#[tokio::test]
async fn concurrent_edits_naming_one_hash_from_both_instances_let_exactly_one_through() {
    let env = start().await;
    let b = env.second();
    let path = env.root().join("src/lib.rs");
    let seen = file_sha(&path);

    // Eight edits, alternating between the instances, each naming the hash every one of
    // them read and each writing its own answer.
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..8u32 {
        let st = if i % 2 == 0 {
            env.st.clone()
        } else {
            b.clone()
        };
        let (key, seen) = (env.key.clone(), seen.clone());
        calls.spawn(async move {
            let r = rest_call(
                &st,
                &key,
                "apply_text_edits",
                json!({"project": P, "path": "src/lib.rs", "expected_sha256": seen,
                       "edits": [{"old_text": "    42\n", "new_text": format!("    {}\n", 100 + i)}]}),
            )
            .await;
            (100 + i, r.status.as_u16(), r.body)
        });
    }
    let mut winners = Vec::new();
    let mut refused = Vec::new();
    while let Some(joined) = calls.join_next().await {
        let (answer, status, body) = joined.unwrap();
        if body["success"] == true {
            assert_eq!(status, 200, "{body}");
            winners.push((answer, body));
        } else {
            refused.push((answer, status, body));
        }
    }
    assert_eq!(
        winners.len(),
        1,
        "exactly one edit naming the hash applies: {winners:?}"
    );
    let (answer, won) = &winners[0];
    let now = std::fs::read_to_string(&path).unwrap();
    assert_eq!(now, lib_answering(*answer), "the file is the winner's");
    assert_eq!(won["output"]["previous_sha256"], seen.as_str(), "{won}");
    assert_eq!(won["output"]["sha256"], sha(now.as_bytes()), "{won}");
    assert_eq!(refused.len(), 7);
    for (_, status, body) in &refused {
        assert_eq!(kind(body), "sha256_mismatch", "{body}");
        assert_eq!(*status, 409, "{body}");
        assert_eq!(
            body["error"]["current_sha256"],
            sha(now.as_bytes()),
            "a refused edit saw another content than the winner's: {body}"
        );
    }
}
