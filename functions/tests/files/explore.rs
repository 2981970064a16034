//! Looking at a project: overview, listings, reads and searches, confined to the root.

use super::*;

#[tokio::test]
async fn a_project_is_read_and_searched_on_both_surfaces() {
    let env = start().await;
    let r = env
        .mcp_tool(
            "read_files",
            json!({"project": P, "files": [{"path": "src/lib.rs", "start_line": 3, "end_line": 4}]}),
        )
        .await;
    let f = &output(&r)["files"][0];
    assert_eq!(f["path"], "src/lib.rs");
    assert_eq!(f["lines"], 5);
    assert_eq!(f["content"]["kind"], "text");
    assert_eq!(f["content"]["text"], "pub fn answer() -> u32 {\n    42\n");
    let whole = std::fs::read(env.root().join("src/lib.rs")).unwrap();
    use sha2::Digest;
    assert_eq!(f["sha256"], hex::encode(sha2::Sha256::digest(&whole)));

    let r = env
        .rest(
            "search_project_texts",
            json!({"project": P, "pattern": "answer"}),
        )
        .await;
    let paths: Vec<&str> = output(&r)["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    // The ignored build log and the binary file are not searched.
    assert_eq!(paths, ["src/lib.rs"], "{r}");

    let r = env
        .rest(
            "read_files",
            json!({"project": P, "files": [{"path": "escape/passwd"}]}),
        )
        .await;
    assert_eq!(kind(&r), "path_outside_root", "{r}");
    let r = env
        .rest(
            "search_project_texts",
            json!({"project": P, "pattern": "(unclosed"}),
        )
        .await;
    assert_eq!(kind(&r), "invalid_arguments", "{r}");
    assert_eq!(r["error"]["pointer"], "/pattern", "{r}");
}
