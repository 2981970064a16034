//! `worktree_vs_git`: a managed worktree made by `work_on_project` (`client_id` + `path`,
//! `mode=worktree`) of the 20,000-file tree of [`super::search::generate`], committed as a
//! checkout the runner may open, against `git worktree add --detach` of the same commit run by
//! this benchmark. Each side's worktree is removed after it is timed (unmeasured); the sides
//! alternate round by round.
//!
//! wc does more than the floor: the call is authenticated and recorded, the runner checks the
//! path against its policy and resolves the base in a sandboxed job, Git makes the worktree as
//! a sandboxed job, the project is registered and recorded, and a Workflow Session is started
//! on it. The ratio is that cost.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use super::checkpoint::{call, git};
use super::{median, round};
use crate::client::Client;

/// `worktree_vs_git` on the checkout `source` (committed, beneath a directory the server's
/// runner `local` may open), `repetitions` rounds; the floor's worktrees go in `scratch`.
pub async fn against_git(
    base: &str,
    token: &str,
    source: &Path,
    scratch: &Path,
    files: usize,
    repetitions: usize,
) -> anyhow::Result<Value> {
    let client = Client::new();
    let url = format!("{base}/mcp");
    let (mut wc, mut floor) = (Vec::new(), Vec::new());
    let head = git(source, &["rev-parse", "HEAD"], &[])?;
    for round_no in 0..repetitions + 1 {
        let order = if round_no % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for wc_side in order {
            if wc_side {
                let t = Instant::now();
                let opened = call(
                    &client,
                    &url,
                    token,
                    "work_on_project",
                    json!({ "client_id": "local", "path": source.display().to_string(),
                            "mode": "worktree", "instruction": "benchmark",
                            "include_workflow_guidance": false,
                            "include_project_instructions": false }),
                )
                .await?;
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                anyhow::ensure!(
                    opened["workspace"]["base_commit"] == head.as_str(),
                    "the worktree is not at HEAD: {opened}"
                );
                call(
                    &client,
                    &url,
                    token,
                    "remove_managed_worktree",
                    json!({ "project": opened["project"], "force": true }),
                )
                .await?;
                if round_no > 0 {
                    wc.push(ms);
                }
            } else {
                let dir = scratch.join(format!("wt-{round_no}"));
                let dir = dir.display().to_string();
                let t = Instant::now();
                git(source, &["worktree", "add", "--detach", &dir, &head], &[])?;
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                git(source, &["worktree", "remove", "--force", &dir], &[])?;
                if round_no > 0 {
                    floor.push(ms);
                }
            }
        }
    }
    let ratios: Vec<f64> = wc.iter().zip(&floor).map(|(x, y)| x / y).collect();
    Ok(json!({
        "scenario": "worktree_vs_git",
        "repetitions": repetitions,
        "files": files,
        "wc_work_on_project_worktree_median_ms": round(median(&wc)),
        "git_worktree_add_median_ms": round(median(&floor)),
        "ratio": round(median(&ratios)),
    }))
}
