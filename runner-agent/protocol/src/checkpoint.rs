//! Checkpoints: the state of a project's working tree (tracked files and untracked files Git
//! does not ignore) kept as a commit under a private ref of its Git work tree
//! (`refs/worktree/wc/checkpoints/<id>`), without moving HEAD, the index or any branch. A
//! checkpoint is restored only over the state the caller expects, and the state it replaces
//! is kept as a checkpoint first. They are [`crate::GitOp`]s: the runner answers them with Git
//! run as jobs.

use serde::{Deserialize, Serialize};

use crate::{
    ChangeKind, MAX_CHECKPOINT_LABEL_BYTES, MAX_CHECKPOINTS, ProtocolError, RelativePath, refuse,
};

/// Characters of a checkpoint id at most.
pub const MAX_CHECKPOINT_ID_CHARS: usize = 64;

/// Why a checkpoint was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CheckpointKind {
    /// Asked for by name (`create_checkpoint`).
    Manual,
    /// Taken by a session's first change to the project's files.
    Automatic,
    /// The state a restore replaced.
    BeforeRestore,
}

impl CheckpointKind {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointKind::Manual => "manual",
            CheckpointKind::Automatic => "automatic",
            CheckpointKind::BeforeRestore => "before_restore",
        }
    }

    /// The kind a wire string names.
    pub fn parse(s: &str) -> Option<Self> {
        [
            CheckpointKind::Manual,
            CheckpointKind::Automatic,
            CheckpointKind::BeforeRestore,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }

    /// Whether the runner may remove it on its own to stay within [`MAX_CHECKPOINTS`]: every
    /// kind but one a caller named.
    pub fn prunable(self) -> bool {
        self != CheckpointKind::Manual
    }
}

/// A new checkpoint of the working tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateCheckpointOp {
    /// What it is for, one line (at most [`MAX_CHECKPOINT_LABEL_BYTES`]); may be empty.
    #[serde(default)]
    pub label: String,
    /// Why it is taken (not `kind`: the work spec's tag is).
    pub checkpoint_kind: CheckpointKind,
    /// The Workflow Session it was taken for.
    #[serde(default)]
    pub session_id: Option<String>,
    /// An automatic checkpoint is taken only when this session has none yet.
    #[serde(default)]
    pub once_per_session: bool,
}

/// The checkpoints of the work tree, newest first, and its current state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListCheckpointsOp {
    /// Checkpoints returned (1..=[`MAX_CHECKPOINTS`]).
    pub limit: u32,
}

/// What changed from a checkpoint to the working tree now, as `git_diff` shows changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffCheckpointOp {
    /// The checkpoint.
    pub checkpoint: String,
    /// Only these files or directories; empty is the whole project.
    #[serde(default)]
    pub paths: Vec<RelativePath>,
    /// Lines of context around each change.
    pub context_lines: u32,
    /// Bytes of diff text returned.
    pub limit_bytes: u32,
}

/// The working tree put back to a checkpoint's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreCheckpointOp {
    /// The checkpoint.
    pub checkpoint: String,
    /// The state the caller expects the working tree to be in now (a `state` as checkpoints
    /// and listings report it); another is refused `state_changed`, naming what changed.
    pub expected_state: String,
    /// The Workflow Session restoring it (recorded on the checkpoint of the replaced state).
    #[serde(default)]
    pub session_id: Option<String>,
}

/// Checkpoints removed, all of them or none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteCheckpointsOp {
    /// The checkpoints (1..=[`MAX_CHECKPOINTS`], distinct).
    pub checkpoints: Vec<String>,
}

/// One checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// Its id (`ck-` and hex digits).
    pub id: String,
    /// What it is for.
    pub label: String,
    /// Why it was taken.
    pub kind: CheckpointKind,
    /// The state of the project's files it holds: a Git tree id, equal for equal content.
    pub state: String,
    /// The commit HEAD named when it was taken; `None` before the first commit.
    pub head: Option<String>,
    /// When it was taken (RFC 3339).
    pub created_at: String,
    /// The Workflow Session it was taken for.
    pub session_id: Option<String>,
}

/// Answer to [`crate::GitOp::GitCreateCheckpoint`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateCheckpointAnswer {
    /// The checkpoint: the new one, or for `once_per_session` the session's existing one.
    pub checkpoint: Checkpoint,
    /// A new checkpoint was taken.
    pub created: bool,
    /// Ids of the oldest automatic checkpoints removed to stay within the bound.
    pub pruned: Vec<String>,
}

/// Answer to [`crate::GitOp::GitListCheckpoints`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ListCheckpointsAnswer {
    /// The checkpoints, newest first.
    pub checkpoints: Vec<Checkpoint>,
    /// More checkpoints exist than `limit` returned.
    pub truncated: bool,
    /// The state of the working tree now: what `restore_checkpoint` expects.
    pub current_state: String,
}

/// One file a restore changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RestoredFile {
    /// The file.
    pub path: RelativePath,
    /// What the restore did to it: `added` (brought back), `deleted` (removed: it was not in
    /// the checkpoint), `modified`, or `type_changed`.
    pub change: ChangeKind,
}

/// Answer to [`crate::GitOp::GitRestoreCheckpoint`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RestoreCheckpointAnswer {
    /// The checkpoint restored.
    pub restored: Checkpoint,
    /// The checkpoint of the state it replaced; `None` when the tree already was in the
    /// checkpoint's state (nothing changed).
    pub replaced: Option<Checkpoint>,
    /// The files it changed, in path order.
    pub files: Vec<RestoredFile>,
    /// Files were left out of `files` (more than [`crate::MAX_DIFF_FILES`]).
    pub files_truncated: bool,
    /// Ids of the oldest automatic checkpoints removed to stay within the bound.
    pub pruned: Vec<String>,
}

/// Answer to [`crate::GitOp::GitDeleteCheckpoints`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DeleteCheckpointsAnswer {
    /// The checkpoints removed.
    pub deleted: Vec<String>,
}

/// Refuses an id that is not 1-[`MAX_CHECKPOINT_ID_CHARS`] lowercase letters, digits and `-`.
pub fn check_checkpoint_id(field: &str, id: &str) -> Result<(), ProtocolError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_CHECKPOINT_ID_CHARS
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !ok {
        return refuse(format!(
            "{field} must be a checkpoint id: 1-{MAX_CHECKPOINT_ID_CHARS} of a-z, 0-9 and `-`"
        ));
    }
    Ok(())
}

/// Refuses a session id that is not 1-100 ASCII letters, digits, `_` and `-`.
fn check_session_id(id: Option<&String>) -> Result<(), ProtocolError> {
    let Some(id) = id else { return Ok(()) };
    let ok = !id.is_empty()
        && id.len() <= 100
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !ok {
        return refuse("session_id must be 1-100 of A-Z, a-z, 0-9, `_` and `-`");
    }
    Ok(())
}

/// Refuses a state that is not a Git object id (40 or 64 lowercase hex digits).
fn check_state(state: &str) -> Result<(), ProtocolError> {
    let ok = matches!(state.len(), 40 | 64)
        && state
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !ok {
        return refuse("expected_state must be a state: 40 or 64 lowercase hex digits");
    }
    Ok(())
}

impl CreateCheckpointOp {
    pub(crate) fn validate(&self) -> Result<(), ProtocolError> {
        if self.label.len() > MAX_CHECKPOINT_LABEL_BYTES {
            return refuse(format!("label is over {MAX_CHECKPOINT_LABEL_BYTES} bytes"));
        }
        if self.label.chars().any(char::is_control) {
            return refuse("label must be one line without control characters");
        }
        if self.once_per_session && self.session_id.is_none() {
            return refuse("once_per_session needs a session_id");
        }
        check_session_id(self.session_id.as_ref())
    }
}

impl ListCheckpointsOp {
    pub(crate) fn validate(&self) -> Result<(), ProtocolError> {
        if self.limit == 0 || self.limit as usize > MAX_CHECKPOINTS {
            return refuse(format!("limit must be 1-{MAX_CHECKPOINTS}"));
        }
        Ok(())
    }
}

impl RestoreCheckpointOp {
    pub(crate) fn validate(&self) -> Result<(), ProtocolError> {
        check_checkpoint_id("checkpoint", &self.checkpoint)?;
        check_state(&self.expected_state)?;
        check_session_id(self.session_id.as_ref())
    }
}

impl DeleteCheckpointsOp {
    pub(crate) fn validate(&self) -> Result<(), ProtocolError> {
        if self.checkpoints.is_empty() || self.checkpoints.len() > MAX_CHECKPOINTS {
            return refuse(format!("checkpoints must hold 1-{MAX_CHECKPOINTS} ids"));
        }
        for (i, id) in self.checkpoints.iter().enumerate() {
            check_checkpoint_id(&format!("checkpoints[{i}]"), id)?;
            if self.checkpoints[..i].contains(id) {
                return refuse(format!("checkpoints[{i}] repeats {id}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_kinds_have_their_wire_names_and_only_manual_ones_are_kept() {
        for (kind, name) in [
            (CheckpointKind::Manual, "manual"),
            (CheckpointKind::Automatic, "automatic"),
            (CheckpointKind::BeforeRestore, "before_restore"),
        ] {
            assert_eq!(kind.as_str(), name);
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
            assert_eq!(CheckpointKind::parse(name), Some(kind));
            assert_eq!(kind.prunable(), kind != CheckpointKind::Manual);
        }
        assert_eq!(CheckpointKind::parse("other"), None);
    }

    #[test]
    fn each_checkpoint_bound_and_form_is_checked_naming_its_field() {
        let create = |label: &str, session: Option<&str>, once| CreateCheckpointOp {
            label: label.into(),
            checkpoint_kind: CheckpointKind::Manual,
            session_id: session.map(str::to_owned),
            once_per_session: once,
        };
        create("before the refactor", Some("ses_1-a"), true)
            .validate()
            .unwrap();
        for (op, why) in [
            (
                create(&"x".repeat(MAX_CHECKPOINT_LABEL_BYTES + 1), None, false),
                "label is over",
            ),
            (create("two\nlines", None, false), "one line"),
            (create("", None, true), "needs a session_id"),
            (create("", Some("a b"), false), "session_id"),
        ] {
            let err = op.validate().unwrap_err().to_string();
            assert!(err.contains(why), "{op:?}: {err}");
        }
        let restore = |id: &str, state: &str| RestoreCheckpointOp {
            checkpoint: id.into(),
            expected_state: state.into(),
            session_id: None,
        };
        restore("ck-0a1b", &"a".repeat(40)).validate().unwrap();
        restore("ck-0a1b", &"0".repeat(64)).validate().unwrap();
        for (op, why) in [
            (restore("CK-1", &"a".repeat(40)), "checkpoint must be"),
            (restore("", &"a".repeat(40)), "checkpoint must be"),
            (restore("ck-1", &"a".repeat(41)), "expected_state"),
            (restore("ck-1", &"A".repeat(40)), "expected_state"),
        ] {
            let err = op.validate().unwrap_err().to_string();
            assert!(err.contains(why), "{op:?}: {err}");
        }
        let delete = |ids: &[&str]| DeleteCheckpointsOp {
            checkpoints: ids.iter().map(|s| (*s).to_owned()).collect(),
        };
        delete(&["ck-1", "ck-2"]).validate().unwrap();
        for (op, why) in [
            (delete(&[]), "1-100"),
            (delete(&["ck-1", "ck-1"]), "checkpoints[1] repeats"),
            (delete(&["ck-1", "../x"]), "checkpoints[1]"),
        ] {
            let err = op.validate().unwrap_err().to_string();
            assert!(err.contains(why), "{op:?}: {err}");
        }
        for limit in [0, MAX_CHECKPOINTS as u32 + 1] {
            assert!(ListCheckpointsOp { limit }.validate().is_err());
        }
    }
}
