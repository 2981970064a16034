//! Bounds of the runner protocol. Both sides enforce them; docs/RUNNER_PROTOCOL.md lists them.

/// Model-authored raw shell text (`run_shell`, raw `run_job`).
pub const MAX_SHELL_TEXT_BYTES: usize = 16_000;
/// The internal command wire envelope (argv bytes or shell text), revalidated by the runner.
pub const MAX_WIRE_COMMAND_BYTES: usize = 64 * 1024;
/// Script bodies (`run_script`).
pub const MAX_SCRIPT_BYTES: usize = 256 * 1024;
/// Standard input given to a process.
pub const MAX_STDIN_BYTES: usize = 256 * 1024;
/// argv items.
pub const MAX_ARGV_ITEMS: usize = 1024;
/// Environment additions.
pub const MAX_ENV_VARS: usize = 64;
/// A project-relative path.
pub const MAX_RELATIVE_PATH_BYTES: usize = 1024;
/// Wall-clock limit of one work item (1 hour).
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;
/// Kept output per stream of one work item.
pub const MAX_OUTPUT_BYTES_PER_STREAM: u64 = 8 * 1024 * 1024;
/// Raw bytes in one output chunk.
pub const MAX_CHUNK_BYTES: usize = 64 * 1024;
/// Chunks in one output or result request.
pub const MAX_CHUNKS_PER_REQUEST: usize = 16;
/// Long-poll wait of `poll`.
pub const MAX_POLL_WAIT_MS: u64 = 20_000;
/// Items claimed by one `poll`.
pub const MAX_POLL_ITEMS: u32 = 16;
/// Leases named in one heartbeat or inventory.
pub const MAX_HELD_LEASES: usize = 256;
/// How far a registering instance id's UUIDv7 time may run ahead of the server's clock
/// (clock skew between hosts); a later one is refused.
pub const MAX_INSTANCE_CLOCK_AHEAD_MS: u64 = 120_000;
/// Runner-local projects announced by one runner.
pub const MAX_PROJECTS: usize = 256;
/// Largest SQS message body (a [`crate::QueueEnvelope`]) either side sends or accepts.
pub const MAX_ENVELOPE_BYTES: usize = 64 * 1024;

/// Files named by one `read_files` operation.
pub const MAX_READ_FILES: usize = 8;
/// Bytes of text one file contributes to a `read_files` answer; the rest is flagged `truncated`.
pub const MAX_READ_BYTES_PER_FILE: usize = 64 * 1024;
/// Bytes of text all files of one `read_files` answer contribute together.
pub const MAX_READ_BYTES_PER_CALL: usize = 256 * 1024;
/// Largest file `read_files` reads (it hashes the whole file); a larger one is refused
/// `file_too_large`.
pub const MAX_READ_FILE_SIZE: u64 = 64 * 1024 * 1024;
/// Bytes at the start of a file in which a NUL makes it binary.
pub const BINARY_PROBE_BYTES: usize = 8 * 1024;
/// Matches one `search` page holds at most (its `limit`).
pub const MAX_SEARCH_MATCHES: u32 = 500;
/// Matches of a `search` page when the caller names no limit.
pub const DEFAULT_SEARCH_MATCHES: u32 = 50;
/// Lines of context before and after each match.
pub const MAX_CONTEXT_LINES: u32 = 10;
/// Bytes kept of one matched or context line; a longer line is cut and flagged.
pub const MAX_SEARCH_LINE_BYTES: usize = 1024;
/// A search pattern (regex or literal text).
pub const MAX_PATTERN_BYTES: usize = 1024;
/// A glob restricting which files a listing or search covers.
pub const MAX_GLOB_BYTES: usize = 256;
/// Files one `list_files` or `tracked_files` page holds at most (its `limit`).
pub const MAX_LIST_FILES: u32 = 2000;
/// Files of a listing page when the caller names no limit.
pub const DEFAULT_LIST_FILES: u32 = 200;
/// A page cursor, as the runner handed it out.
pub const MAX_CURSOR_BYTES: usize = 8 * 1024;
/// The JSON of one explore answer. Every page ends early (with a cursor) or cuts its text
/// (flagged) rather than pass it.
pub const MAX_ANSWER_BYTES: usize = 2 * 1024 * 1024;
/// Entries of the tree an overview shows (its top two levels).
pub const MAX_OVERVIEW_ENTRIES: usize = 300;
/// Files an overview looks at to tell languages and manifests.
pub const MAX_OVERVIEW_SCAN_FILES: usize = 20_000;
/// Manifests an overview names.
pub const MAX_OVERVIEW_MANIFESTS: usize = 64;
/// Work kinds one registration may name (unknown ones included).
pub const MAX_WORK_KINDS: usize = 32;

/// Edits in one `text_edits` operation.
pub const MAX_EDITS: usize = 64;
/// The `old_text` and `new_text` of all edits of one `text_edits` operation, together.
pub const MAX_EDIT_TEXT_BYTES: usize = 256 * 1024;
/// The diff text of one `patch` operation.
pub const MAX_PATCH_BYTES: usize = 512 * 1024;
/// Files one `patch` operation changes.
pub const MAX_PATCH_FILES: usize = 64;
/// Largest file an edit reads or writes; a larger one is refused `file_too_large`.
pub const MAX_EDIT_FILE_SIZE: u64 = 8 * 1024 * 1024;
/// The diff an edit answers with; a longer one is cut after a whole line and flagged.
pub const MAX_EDIT_DIFF_BYTES: usize = 64 * 1024;
/// How many lines away from where its header puts it a patch hunk may be found (the file
/// changed above it since the diff was made); a hunk found nowhere within it does not apply.
pub const MAX_HUNK_OFFSET_LINES: usize = 200;
/// Paths named by one `git_diff` or `git_commit` operation.
pub const MAX_GIT_PATHS: usize = 100;
/// Bytes of the paths one Git operation names, together: they reach Git as arguments, within
/// the command wire envelope.
pub const MAX_GIT_PATHS_BYTES: usize = 32 * 1024;
/// A `git_commit` message.
pub const MAX_COMMIT_MESSAGE_BYTES: usize = 16 * 1024;
/// Lines of context around each change of a `git_diff`.
pub const MAX_DIFF_CONTEXT_LINES: u32 = 20;
/// Lines of context of a `git_diff` when the caller names none.
pub const DEFAULT_DIFF_CONTEXT_LINES: u32 = 3;
/// Bytes of diff text one `git_diff` returns at most (its `limit_bytes`).
pub const MAX_DIFF_BYTES: u32 = 1024 * 1024;
/// Bytes of diff text of a `git_diff` when the caller names no limit.
pub const DEFAULT_DIFF_BYTES: u32 = 64 * 1024;
/// Changed files one `git_diff` lists with their line counts.
pub const MAX_DIFF_FILES: usize = 1000;
/// Commits one `git_log` returns at most (its `limit`).
pub const MAX_LOG_COMMITS: u32 = 200;

/// Checkpoints one Git work tree keeps at most; past it the oldest automatic ones go.
pub const MAX_CHECKPOINTS: usize = 100;

/// Bytes of a checkpoint's label at most.
pub const MAX_CHECKPOINT_LABEL_BYTES: usize = 200;

/// Files a refused restore names as changed since the expected state, at most.
pub const MAX_CONFLICT_PATHS: usize = 50;
/// Commits of a `git_log` when the caller names no limit.
pub const DEFAULT_LOG_COMMITS: u32 = 20;
/// Files one `git_status` lists.
pub const MAX_STATUS_ENTRIES: usize = 1000;
/// A name, email, subject, branch or summary Git reports; a longer one is cut on a character
/// boundary.
pub const MAX_GIT_TEXT_BYTES: usize = 1024;
