//! Edit operations: changes to a project's files that the runner makes in its own process (no
//! job is started), and their typed answers.
//!
//! Every path is a [`RelativePath`] under the project root. An edit is all-or-nothing: every
//! check passes before the first byte is written, and each file is replaced atomically. A
//! refusal is an [`crate::OpErrorKind`] with words in the outcome's `error`, and, where the
//! refusal is about a file's content, an [`EditConflict`] telling which edit or hunk failed and
//! the file's current SHA-256.

use serde::{Deserialize, Serialize};

use crate::{MAX_EDIT_TEXT_BYTES, MAX_EDITS, MAX_PATCH_BYTES, ProtocolError, RelativePath, refuse};

/// One edit operation, tagged by `op` inside the work spec:
/// `{"kind": "edit", "op": "text_edits", "path": "src/lib.rs", "edits": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum EditOp {
    /// Exact-text replacements in one file (or the creation of one file).
    TextEdits(TextEditsOp),
    /// A unified diff over one or more files.
    Patch(PatchOp),
    /// The whole content of one file, created or replaced.
    WriteFile(WriteFileOp),
    /// Regular files removed, all of them or none.
    DeleteFiles(DeleteFilesOp),
    /// One regular file moved to a new path.
    MoveFile(MoveFileOp),
}

/// Exact-text replacements in one file, applied all-or-nothing against its current content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextEditsOp {
    /// The file.
    pub path: RelativePath,
    /// The SHA-256 (64 lowercase hex) the caller last saw; a different current content is
    /// refused `sha256_mismatch`.
    #[serde(default)]
    pub expected_sha256: Option<String>,
    /// The replacements, each located in the content as it was before any of them.
    pub edits: Vec<TextEdit>,
    /// Create the file: `edits` is exactly one edit with an empty `old_text`, whose `new_text`
    /// is the new file's content. The file must not exist.
    #[serde(default)]
    pub create: bool,
}

/// One exact-text replacement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextEdit {
    /// The text to replace, matched byte for byte (not empty, except to create a file).
    pub old_text: String,
    /// What replaces it.
    pub new_text: String,
    /// Which match to replace (1-based, among the non-overlapping matches from the start).
    /// `None`: `old_text` must match exactly once.
    #[serde(default)]
    pub occurrence: Option<u32>,
}

/// The whole content of one text file: created (with its parent directories) when nothing is
/// there, else replaced, keeping the file's mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteFileOp {
    /// The file.
    pub path: RelativePath,
    /// Its new content (UTF-8 text, no NUL byte, at most [`MAX_EDIT_TEXT_BYTES`]).
    pub content: String,
    /// The SHA-256 (64 lowercase hex) the caller last saw: the file must exist with that
    /// content, else the write is refused (`sha256_mismatch`, or `not_found`).
    #[serde(default)]
    pub expected_sha256: Option<String>,
}

/// Regular files removed, all of them or none: every one is found and locked before the first
/// is removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteFilesOp {
    /// The files (1-[`MAX_EDITS`], distinct).
    pub paths: Vec<RelativePath>,
}

/// One regular file moved (renamed) to a path where nothing is, its directories made; never a
/// directory or a symbolic link, never over an existing entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveFileOp {
    /// The file.
    pub from: RelativePath,
    /// Its new path (not `from`).
    pub to: RelativePath,
}

/// A unified diff (as `git diff` or `diff -u` write it) applied all-or-nothing across its files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchOp {
    /// The diff text.
    pub patch: String,
}

impl EditOp {
    /// The operation's name on the wire (`text_edits`, `patch`).
    pub fn name(&self) -> &'static str {
        match self {
            EditOp::TextEdits(_) => "text_edits",
            EditOp::Patch(_) => "patch",
            EditOp::WriteFile(_) => "write_file",
            EditOp::DeleteFiles(_) => "delete_files",
            EditOp::MoveFile(_) => "move_file",
        }
    }

    /// Checks every bound and form of the operation. The patch's syntax and everything about
    /// the files themselves are checked by the runner, which refuses them typed.
    pub fn validate(&self) -> Result<(), ProtocolError> {
        match self {
            EditOp::TextEdits(op) => op.validate(),
            EditOp::Patch(op) => {
                if op.patch.is_empty() || op.patch.len() > MAX_PATCH_BYTES {
                    return refuse(format!("patch must be 1-{MAX_PATCH_BYTES} bytes"));
                }
                if op.patch.contains('\0') {
                    return refuse("patch contains a NUL byte");
                }
                Ok(())
            }
            EditOp::WriteFile(op) => {
                if op.path.is_root() {
                    return refuse("path must name a file, not the project root");
                }
                if let Some(sha) = &op.expected_sha256 {
                    check_sha256("expected_sha256", sha)?;
                }
                if op.content.len() > MAX_EDIT_TEXT_BYTES {
                    return refuse(format!("content is over {MAX_EDIT_TEXT_BYTES} bytes"));
                }
                if op.content.contains('\0') {
                    return refuse("content contains a NUL byte");
                }
                Ok(())
            }
            EditOp::MoveFile(op) => {
                if op.from.is_root() || op.to.is_root() {
                    return refuse("from and to must name files, not the project root");
                }
                if op.from == op.to {
                    return refuse("to is from: a move needs a new path");
                }
                if op.to.as_str().starts_with(&format!("{}/", op.from)) {
                    return refuse("to lies beneath from, which is a file");
                }
                Ok(())
            }
            EditOp::DeleteFiles(op) => {
                if op.paths.is_empty() || op.paths.len() > MAX_EDITS {
                    return refuse(format!("paths must hold 1-{MAX_EDITS} files"));
                }
                for (i, path) in op.paths.iter().enumerate() {
                    if path.is_root() {
                        return refuse(format!("paths[{i}] names the project root, not a file"));
                    }
                    if op.paths[..i].contains(path) {
                        return refuse(format!("paths[{i}] repeats {path}"));
                    }
                }
                Ok(())
            }
        }
    }
}

impl TextEditsOp {
    fn validate(&self) -> Result<(), ProtocolError> {
        if self.path.is_root() {
            return refuse("path must name a file, not the project root");
        }
        if let Some(sha) = &self.expected_sha256 {
            check_sha256("expected_sha256", sha)?;
        }
        if self.edits.is_empty() || self.edits.len() > MAX_EDITS {
            return refuse(format!("edits must hold 1-{MAX_EDITS} edits"));
        }
        let mut text_bytes = 0usize;
        for (i, edit) in self.edits.iter().enumerate() {
            if edit.old_text.contains('\0') || edit.new_text.contains('\0') {
                return refuse(format!("edits[{i}] contains a NUL byte"));
            }
            if edit.occurrence == Some(0) {
                return refuse(format!(
                    "edits[{i}].occurrence is 1-based; 0 names no match"
                ));
            }
            if edit.old_text.is_empty() && !self.create {
                return refuse(format!(
                    "edits[{i}].old_text is empty; only a create takes an empty old_text"
                ));
            }
            text_bytes += edit.old_text.len() + edit.new_text.len();
        }
        if text_bytes > MAX_EDIT_TEXT_BYTES {
            return refuse(format!(
                "the edits' old_text and new_text are over {MAX_EDIT_TEXT_BYTES} bytes together"
            ));
        }
        if self.create {
            if self.expected_sha256.is_some() {
                return refuse("a create takes no expected_sha256: the file must not exist");
            }
            let [edit] = self.edits.as_slice() else {
                return refuse("a create takes exactly one edit, whose new_text is the content");
            };
            if !edit.old_text.is_empty() || edit.occurrence.is_some() {
                return refuse("a create's edit has an empty old_text and no occurrence");
            }
        }
        Ok(())
    }
}

/// Whether `sha` is 64 lowercase hex digits, as every SHA-256 on this wire is written.
fn check_sha256(what: &str, sha: &str) -> Result<(), ProtocolError> {
    if sha.len() != 64 || !sha.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return refuse(format!("{what} must be 64 lowercase hex digits"));
    }
    Ok(())
}

/// Answer to [`EditOp::TextEdits`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TextEditsAnswer {
    /// The file, as requested.
    pub path: RelativePath,
    /// The file did not exist and was created.
    pub created: bool,
    /// SHA-256 of the content before the edits; `None` when created.
    pub previous_sha256: Option<String>,
    /// SHA-256 of the content now.
    pub sha256: String,
    /// Size of the content now, in bytes.
    pub size: u64,
    /// Edits applied (all of them: an edit is all-or-nothing).
    pub edits_applied: u32,
    /// The content changed. When it did not (every edit replaced a text by itself), the file
    /// was left untouched.
    pub changed: bool,
    /// A unified diff of the change (`--- a/<path>` / `+++ b/<path>`, 3 lines of context),
    /// at most [`crate::MAX_EDIT_DIFF_BYTES`], cut after a whole line.
    pub diff: String,
    /// The diff was longer and is cut.
    pub diff_truncated: bool,
}

/// Answer to [`EditOp::WriteFile`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WriteFileAnswer {
    /// The file, as requested.
    pub path: RelativePath,
    /// The file did not exist and was created.
    pub created: bool,
    /// SHA-256 of the content it replaced; `None` when created.
    pub previous_sha256: Option<String>,
    /// SHA-256 of the content now.
    pub sha256: String,
    /// Size of the content now, in bytes.
    pub size: u64,
    /// The content changed. When it did not (the same content was written), the file was left
    /// untouched.
    pub changed: bool,
    /// A unified diff of the change (`--- a/<path>` or `/dev/null`, `+++ b/<path>`), at most
    /// [`crate::MAX_EDIT_DIFF_BYTES`], cut after a whole line.
    pub diff: String,
    /// The diff was longer and is cut.
    pub diff_truncated: bool,
}

/// Answer to [`EditOp::DeleteFiles`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DeleteFilesAnswer {
    /// The files removed, as requested, with their sizes.
    pub deleted: Vec<DeletedFile>,
}

/// Answer to [`EditOp::MoveFile`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MoveFileAnswer {
    /// Where the file was.
    pub from: RelativePath,
    /// Where it is now.
    pub to: RelativePath,
    /// Its size, in bytes.
    pub size: u64,
}

/// A file removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DeletedFile {
    /// The file.
    pub path: RelativePath,
    /// Its size when it was removed, in bytes.
    pub size: u64,
}

/// Answer to [`EditOp::Patch`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PatchAnswer {
    /// One entry per file of the patch, in patch order.
    pub files: Vec<PatchedFile>,
    /// A unified diff of what changed (where each hunk landed), at most
    /// [`crate::MAX_EDIT_DIFF_BYTES`], cut after a whole line.
    pub diff: String,
    /// The diff was longer and is cut.
    pub diff_truncated: bool,
}

/// One file a patch changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PatchedFile {
    /// The file.
    pub path: RelativePath,
    /// What happened to it.
    pub change: FileChange,
    /// SHA-256 of its content before; `None` when added.
    pub previous_sha256: Option<String>,
    /// SHA-256 of its content now; `None` when deleted.
    pub sha256: Option<String>,
    /// Hunks applied to it.
    pub hunks: u32,
}

/// What a patch did to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FileChange {
    /// Created (`--- /dev/null`).
    Added,
    /// Changed in place.
    Modified,
    /// Removed (`+++ /dev/null`).
    Deleted,
}

/// Facts about a refused edit, so the caller can say which part failed and re-read the file:
/// present only on the outcome of a refused edit operation, each field only where it applies.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditConflict {
    /// The refused edit's index in `edits` (from 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_index: Option<u32>,
    /// SHA-256 of the file's current content, whenever the refusal read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_sha256: Option<String>,
    /// How many times the edit's `old_text` matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<u64>,
    /// The file of a patch the refusal is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<RelativePath>,
    /// The refused hunk's number within its file (from 1, in patch order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hunk: Option<u32>,
    /// The line of the patch text (from 1) that could not be read or that the refusal names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_line: Option<u64>,
    /// The working tree's current state, when a restore found another than expected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_state: Option<String>,
    /// The files that differ from the expected state (at most [`crate::MAX_CONFLICT_PATHS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_paths: Option<Vec<RelativePath>>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use uuid::Uuid;

    use super::*;
    use crate::{
        MAX_ANSWER_BYTES, MAX_EDIT_DIFF_BYTES, MAX_WIRE_COMMAND_BYTES, OpErrorKind,
        PROTOCOL_VERSION, Termination, WorkAnswer, WorkItem, WorkKind, WorkLimits, WorkOutcome,
        WorkSpec,
    };

    fn path(p: &str) -> RelativePath {
        RelativePath::parse(p).unwrap()
    }

    fn item(op: EditOp) -> WorkItem {
        WorkItem {
            protocol_version: PROTOCOL_VERSION,
            work_id: Uuid::nil(),
            project: "web".into(),
            cwd: None,
            spec: WorkSpec::Edit(op),
            stdin: None,
            env: BTreeMap::new(),
            limits: WorkLimits {
                timeout_ms: 1000,
                output_bytes_per_stream: 1024,
            },
        }
    }

    fn edit(old: &str, new: &str) -> TextEdit {
        TextEdit {
            old_text: old.into(),
            new_text: new.into(),
            occurrence: None,
        }
    }

    fn edits(list: Vec<TextEdit>) -> TextEditsOp {
        TextEditsOp {
            path: path("src/lib.rs"),
            expected_sha256: None,
            edits: list,
            create: false,
        }
    }

    #[test]
    fn edit_specs_are_tagged_by_kind_then_op_and_take_defaults() {
        let spec: WorkSpec = serde_json::from_value(serde_json::json!({
            "kind": "edit", "op": "text_edits", "path": "./src//lib.rs",
            "edits": [{"old_text": "a", "new_text": "b"}]
        }))
        .unwrap();
        assert_eq!(
            spec,
            WorkSpec::Edit(EditOp::TextEdits(edits(vec![edit("a", "b")])))
        );
        assert_eq!(spec.kind(), WorkKind::Edit);
        let spec: WorkSpec =
            serde_json::from_str(r#"{"kind":"edit","op":"patch","patch":"--- a/x\n"}"#).unwrap();
        assert_eq!(
            spec,
            WorkSpec::Edit(EditOp::Patch(PatchOp {
                patch: "--- a/x\n".into()
            }))
        );
        for (bad, why) in [
            (
                r#"{"kind":"edit","op":"patch","patch":"x","y":1}"#,
                "unknown field",
            ),
            (
                r#"{"kind":"edit","op":"text_edits","path":"a","edits":[{"old_text":"a","new_text":"b","fuzz":1}]}"#,
                "unknown field",
            ),
            (
                r#"{"kind":"edit","op":"rewrite","path":"a"}"#,
                "unknown variant",
            ),
            (
                r#"{"kind":"edit","op":"text_edits","path":"../up","edits":[]}"#,
                "`..`",
            ),
            (
                r#"{"kind":"edit","op":"text_edits","path":"/etc/passwd","edits":[]}"#,
                "absolute",
            ),
            (
                r#"{"kind":"edit","op":"text_edits","path":"a"}"#,
                "missing field `edits`",
            ),
        ] {
            let err = serde_json::from_str::<WorkSpec>(bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    fn write_file_op(content: &str, expected_sha256: Option<String>) -> WriteFileOp {
        WriteFileOp {
            path: RelativePath::parse("docs/notes.md").unwrap(),
            content: content.into(),
            expected_sha256,
        }
    }

    fn write_file(content: &str, expected_sha256: Option<String>) -> EditOp {
        EditOp::WriteFile(write_file_op(content, expected_sha256))
    }

    #[test]
    fn every_edit_op_round_trips_and_validates() {
        let ops = [
            EditOp::TextEdits(TextEditsOp {
                expected_sha256: Some("ab".repeat(32)),
                ..edits(vec![
                    edit("a", "b"),
                    TextEdit {
                        occurrence: Some(3),
                        ..edit("c", "")
                    },
                ])
            }),
            EditOp::TextEdits(TextEditsOp {
                create: true,
                ..edits(vec![edit("", "fn main() {}\n")])
            }),
            EditOp::Patch(PatchOp {
                patch: "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n".into(),
            }),
            write_file("", Some("ab".repeat(32))),
            EditOp::DeleteFiles(DeleteFilesOp {
                paths: vec![RelativePath::parse("a/b.rs").unwrap()],
            }),
            EditOp::MoveFile(MoveFileOp {
                from: path("a/b.rs"),
                to: path("c/b.rs"),
            }),
        ];
        for op in ops {
            let work = item(op.clone());
            work.validate().unwrap();
            let json = serde_json::to_value(&work).unwrap();
            assert_eq!(json["spec"]["kind"], "edit");
            assert_eq!(json["spec"]["op"], op.name());
            assert_eq!(serde_json::from_value::<WorkItem>(json).unwrap(), work);
        }
    }

    #[test]
    fn each_edit_bound_and_form_is_checked_naming_its_field() {
        let text_edits = |op: TextEditsOp| EditOp::TextEdits(op);
        let sha = |s: &str| TextEditsOp {
            expected_sha256: Some(s.into()),
            ..edits(vec![edit("a", "b")])
        };
        let half = MAX_EDIT_TEXT_BYTES / 2;
        let cases: Vec<(EditOp, &str)> = vec![
            (text_edits(edits(vec![])), "1-64 edits"),
            (
                text_edits(edits(vec![edit("a", "b"); MAX_EDITS + 1])),
                "1-64 edits",
            ),
            (text_edits(sha(&"A".repeat(64))), "expected_sha256"),
            (text_edits(sha(&"a".repeat(63))), "expected_sha256"),
            (text_edits(sha(&"g".repeat(64))), "expected_sha256"),
            (
                text_edits(TextEditsOp {
                    path: RelativePath::root(),
                    ..edits(vec![edit("a", "b")])
                }),
                "project root",
            ),
            (
                text_edits(edits(vec![edit("a", "b"), edit("", "x")])),
                "edits[1].old_text",
            ),
            (text_edits(edits(vec![edit("a\0", "b")])), "NUL"),
            (text_edits(edits(vec![edit("a", "\0")])), "NUL"),
            (
                text_edits(edits(vec![TextEdit {
                    occurrence: Some(0),
                    ..edit("a", "b")
                }])),
                "occurrence",
            ),
            (
                text_edits(edits(vec![
                    edit(&"a".repeat(half), "b"),
                    edit("c", &"d".repeat(half)),
                ])),
                "bytes together",
            ),
            (
                text_edits(TextEditsOp {
                    create: true,
                    ..edits(vec![edit("", "a"), edit("", "b")])
                }),
                "exactly one edit",
            ),
            (
                text_edits(TextEditsOp {
                    create: true,
                    ..edits(vec![edit("x", "a")])
                }),
                "empty old_text",
            ),
            (
                text_edits(TextEditsOp {
                    create: true,
                    expected_sha256: Some("a".repeat(64)),
                    ..edits(vec![edit("", "a")])
                }),
                "no expected_sha256",
            ),
            (
                EditOp::Patch(PatchOp {
                    patch: String::new(),
                }),
                "patch must be",
            ),
            (
                EditOp::Patch(PatchOp {
                    patch: "x".repeat(MAX_PATCH_BYTES + 1),
                }),
                "patch must be",
            ),
            (
                EditOp::Patch(PatchOp {
                    patch: "--- a\0".into(),
                }),
                "NUL",
            ),
            (
                EditOp::WriteFile(WriteFileOp {
                    path: RelativePath::root(),
                    ..write_file_op("x", None)
                }),
                "project root",
            ),
            (write_file("a\0", None), "NUL"),
            (
                EditOp::DeleteFiles(DeleteFilesOp { paths: vec![] }),
                "1-64 files",
            ),
            (
                EditOp::DeleteFiles(DeleteFilesOp {
                    paths: vec![RelativePath::root()],
                }),
                "project root",
            ),
            (
                EditOp::DeleteFiles(DeleteFilesOp {
                    paths: vec![RelativePath::parse("a").unwrap(); 2],
                }),
                "paths[1] repeats a",
            ),
            (write_file("x", Some("A".repeat(64))), "expected_sha256"),
            (
                EditOp::MoveFile(MoveFileOp {
                    from: path("a"),
                    to: path("a"),
                }),
                "a new path",
            ),
            (
                EditOp::MoveFile(MoveFileOp {
                    from: path("a"),
                    to: path("a/b"),
                }),
                "beneath from",
            ),
            (
                EditOp::MoveFile(MoveFileOp {
                    from: RelativePath::root(),
                    to: path("a"),
                }),
                "project root",
            ),
            (
                write_file(&"x".repeat(MAX_EDIT_TEXT_BYTES + 1), None),
                "content is over",
            ),
        ];
        for (op, expect) in cases {
            let err = item(op.clone()).validate().unwrap_err().to_string();
            assert!(err.contains(expect), "{op:?}: {err}");
        }
        // Exactly at the text bound, and far over the command envelope: edits have their own.
        let at_bound = text_edits(edits(vec![
            edit(&"a".repeat(half), "b"),
            edit("c", &"d".repeat(half - 2)),
        ]));
        const { assert!(MAX_EDIT_TEXT_BYTES > MAX_WIRE_COMMAND_BYTES) };
        item(at_bound).validate().unwrap();
        item(EditOp::Patch(PatchOp {
            patch: "x".repeat(MAX_PATCH_BYTES),
        }))
        .validate()
        .unwrap();
        item(write_file(&"x".repeat(MAX_EDIT_TEXT_BYTES), None))
            .validate()
            .unwrap();
        let with_stdin = WorkItem {
            stdin: Some("x".into()),
            ..item(EditOp::Patch(PatchOp { patch: "x".into() }))
        };
        assert!(
            with_stdin
                .validate()
                .unwrap_err()
                .0
                .contains("no cwd, stdin or env")
        );
    }

    fn outcome() -> WorkOutcome {
        WorkOutcome {
            exit_code: Some(0),
            duration_ms: 2,
            ..WorkOutcome::ended(Termination::Exited)
        }
    }

    #[test]
    fn edit_answers_and_conflicts_keep_their_wire_shape() {
        let answers = [
            WorkAnswer::TextEdits(TextEditsAnswer {
                path: path("src/lib.rs"),
                created: false,
                previous_sha256: Some("0".repeat(64)),
                sha256: "1".repeat(64),
                size: 12,
                edits_applied: 2,
                changed: true,
                diff: "--- a/src/lib.rs\n+++ b/src/lib.rs\n".into(),
                diff_truncated: false,
            }),
            WorkAnswer::Patch(PatchAnswer {
                files: vec![
                    PatchedFile {
                        path: path("a"),
                        change: FileChange::Added,
                        previous_sha256: None,
                        sha256: Some("2".repeat(64)),
                        hunks: 1,
                    },
                    PatchedFile {
                        path: path("b"),
                        change: FileChange::Deleted,
                        previous_sha256: Some("3".repeat(64)),
                        sha256: None,
                        hunks: 1,
                    },
                ],
                diff: String::new(),
                diff_truncated: true,
            }),
        ];
        for answer in answers {
            answer.validate().unwrap();
            let o = WorkOutcome {
                answer: Some(answer.clone()),
                ..outcome()
            };
            let json = serde_json::to_value(&o).unwrap();
            assert_eq!(json["answer"]["op"], answer.op());
            assert!(json.get("conflict").is_none(), "absent unless refused");
            assert_eq!(serde_json::from_value::<WorkOutcome>(json).unwrap(), o);
        }
        let patched = serde_json::to_value(PatchedFile {
            path: path("x"),
            change: FileChange::Modified,
            previous_sha256: None,
            sha256: None,
            hunks: 0,
        })
        .unwrap();
        assert_eq!(patched["change"], "modified");

        let refused = WorkOutcome {
            termination: Termination::Rejected,
            exit_code: None,
            error: Some("edits[1]: old_text matches 3 times".into()),
            error_kind: Some(OpErrorKind::MultipleMatches),
            conflict: Some(EditConflict {
                edit_index: Some(1),
                current_sha256: Some("f".repeat(64)),
                matches: Some(3),
                ..EditConflict::default()
            }),
            ..outcome()
        };
        let json = serde_json::to_value(&refused).unwrap();
        assert_eq!(json["error_kind"], "multiple_matches");
        assert_eq!(
            json["conflict"],
            serde_json::json!({"edit_index": 1, "current_sha256": "f".repeat(64), "matches": 3})
        );
        assert_eq!(
            serde_json::from_value::<WorkOutcome>(json).unwrap(),
            refused
        );
        let unknown = serde_json::json!({"edit_index": 1, "guess": true});
        assert!(serde_json::from_value::<EditConflict>(unknown).is_err());
    }

    #[test]
    fn the_edit_refusal_kinds_have_their_wire_names() {
        for (kind, name) in [
            (OpErrorKind::MultipleMatches, "multiple_matches"),
            (OpErrorKind::MatchNotFound, "match_not_found"),
            (OpErrorKind::OccurrenceOutOfRange, "occurrence_out_of_range"),
            (OpErrorKind::OverlappingEdits, "overlapping_edits"),
            (OpErrorKind::Sha256Mismatch, "sha256_mismatch"),
            (OpErrorKind::PatchDoesNotApply, "patch_does_not_apply"),
            (OpErrorKind::InvalidPatch, "invalid_patch"),
            (OpErrorKind::AlreadyExists, "already_exists"),
            (OpErrorKind::NotText, "not_text"),
            (OpErrorKind::Symlink, "symlink"),
            (OpErrorKind::Unwritable, "unwritable"),
        ] {
            assert_eq!(kind.as_str(), name);
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
        }
    }

    #[test]
    fn the_largest_edit_answers_fit_the_answer_bound() {
        // A diff at its bound, every byte escaped six-fold, and a patch's most files.
        let diff = "\u{1}".repeat(MAX_EDIT_DIFF_BYTES);
        let file = PatchedFile {
            path: path(&"p".repeat(RelativePath::MAX_CHARS)),
            change: FileChange::Modified,
            previous_sha256: Some("0".repeat(64)),
            sha256: Some("1".repeat(64)),
            hunks: u32::MAX,
        };
        let answer = WorkAnswer::Patch(PatchAnswer {
            files: vec![file; crate::MAX_PATCH_FILES],
            diff,
            diff_truncated: true,
        });
        answer.validate().unwrap();
        assert!(serde_json::to_vec(&answer).unwrap().len() < MAX_ANSWER_BYTES);
    }
}
