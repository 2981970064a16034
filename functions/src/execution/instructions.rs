//! Project instructions — `AGENTS.md`, `CLAUDE.md`, `.github/copilot-instructions.md` at the
//! project root — read on the build host by the project's runner: the one provider behind
//! `work_on_project`'s `project_instructions` and the `project.instructions` context material.
//!
//! The text is redacted before it is bounded (a secret never survives by being cut), bounded
//! per file and in all, and flagged `truncated` when either changed it.

use serde_json::{Value, json};
use wc_domain::{ProjectId, RelativePath};
use wc_runner_protocol::{FileContent, FileRange, ReadFilesOp};

use super::operation;
use crate::kernel::context::ToolContext;
use crate::result::{ErrorKind, ToolError};
use crate::workflow::excerpt::excerpt;

/// The instruction files, in the order they are projected.
pub const INSTRUCTION_FILES: [&str; 3] =
    ["AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md"];
/// Most characters projected of one file.
pub const MAX_FILE_CHARS: usize = 8_000;
/// Most characters projected of all files together.
pub const MAX_TOTAL_CHARS: usize = 16_000;

/// The project's instructions as projected:
/// `{"status": "available", "files": [{"path", "text", "truncated"}], "truncated"}`,
/// `{"status": "absent"}` when the root holds none, or
/// `{"status": "unavailable", "reason_code"}` when the build host could not be asked.
pub async fn read(ctx: &ToolContext, project: &ProjectId) -> Value {
    let target = match super::resolve_target(ctx, project).await {
        Ok(t) => t,
        Err(e) => return unavailable(&e),
    };
    let [a, b, c] = INSTRUCTION_FILES.map(|path| {
        let target = &target;
        async move {
            let Ok(path) = RelativePath::parse(path) else {
                return Err(ToolError::internal(
                    "an instruction file name is not a path",
                ));
            };
            let op = ReadFilesOp {
                files: vec![FileRange {
                    path,
                    start_line: None,
                    end_line: None,
                }],
            };
            operation::run(ctx, target, "work_on_project", op).await
        }
    });
    let (a, b, c) = tokio::join!(a, b, c);
    let mut files = Vec::new();
    let mut left = MAX_TOTAL_CHARS;
    let mut truncated = false;
    for (path, read) in INSTRUCTION_FILES.iter().zip([a, b, c]) {
        let answer = match read {
            Ok(answer) => answer,
            // An absent file (or a directory of that name) is no instruction.
            Err(e) if matches!(e.kind, ErrorKind::PathNotFound | ErrorKind::NotAFile) => continue,
            Err(e) => return unavailable(&e),
        };
        let Some(read) = answer.files.into_iter().next() else {
            continue;
        };
        match read.content {
            FileContent::Text {
                text,
                truncated: cut,
                ..
            } => {
                let mut e = excerpt(&text, MAX_FILE_CHARS.min(left));
                e.truncated |= cut;
                left -= e.text.chars().count();
                truncated |= e.truncated;
                files.push(json!({ "path": path, "text": e.text, "truncated": e.truncated }));
            }
            FileContent::Binary | FileContent::NotUtf8 => {
                files.push(json!({ "path": path, "omitted": "not_text" }));
            }
        }
    }
    if files.is_empty() {
        return json!({ "status": "absent" });
    }
    json!({ "status": "available", "files": files, "truncated": truncated })
}

/// Instructions that could not be read, with the reason as a code.
fn unavailable(e: &ToolError) -> Value {
    let reason = match e.kind {
        ErrorKind::RunnerUnavailable | ErrorKind::UnknownProject => "runner_unavailable",
        ErrorKind::Unsupported => "unsupported",
        ErrorKind::TimedOut => "timed_out",
        ErrorKind::PathOutsideRoot => "path_outside_root",
        ErrorKind::Unreadable | ErrorKind::FileTooLarge | ErrorKind::SpecialFile => "unreadable",
        _ => "failed",
    };
    json!({ "status": "unavailable", "reason_code": reason })
}
