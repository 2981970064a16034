//! Explore operations: read-only questions about a project's files that the runner answers in
//! its own process (no job is started), and their typed answers.
//!
//! Every path is a [`RelativePath`] under the project root; every page, text and list is
//! bounded by the constants of `bounds.rs`, and an answer's JSON never exceeds
//! [`MAX_ANSWER_BYTES`]. A refusal is a [`OpErrorKind`] with words in the outcome's `error`.

use serde::{Deserialize, Serialize};

use crate::{
    DEFAULT_LIST_FILES, DEFAULT_SEARCH_MATCHES, MAX_CONTEXT_LINES, MAX_CURSOR_BYTES,
    MAX_GLOB_BYTES, MAX_LIST_FILES, MAX_PATTERN_BYTES, MAX_READ_FILES, MAX_SEARCH_MATCHES,
    ProtocolError, RelativePath, refuse,
};

/// One explore operation, tagged by `op` inside the work spec:
/// `{"kind": "explore", "op": "read_files", "files": [{"path": "src/lib.rs"}]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ExploreOp {
    /// What the project is.
    Overview(OverviewOp),
    /// Files under a directory, recursively.
    ListFiles(ListFilesOp),
    /// Files in Git's index.
    TrackedFiles(TrackedFilesOp),
    /// Line ranges of files.
    ReadFiles(ReadFilesOp),
    /// Lines matching a pattern.
    Search(SearchOp),
}

/// What the project is: its name, languages, manifests, instruction files, the top two levels
/// of its tree and its Git state. It takes no arguments (and refuses unknown ones).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverviewOp {}

/// Files under `path` (recursively), ignore-aware, in stable path order, one page at a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListFilesOp {
    /// The directory to list; `None` is the project root.
    #[serde(default)]
    pub path: Option<RelativePath>,
    /// Only files matching this glob (gitignore syntax, relative to the root; a leading `!`
    /// excludes instead).
    #[serde(default)]
    pub glob: Option<String>,
    /// Include hidden files and directories (names starting with `.`).
    #[serde(default)]
    pub hidden: bool,
    /// Files in this page (1..=[`MAX_LIST_FILES`]).
    #[serde(default = "default_list_files")]
    pub limit: u32,
    /// Where the previous page ended (its `next_cursor`).
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Files in Git's index under `path`, in index order, one page at a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackedFilesOp {
    /// The directory (or file) to list; `None` is the project root.
    #[serde(default)]
    pub path: Option<RelativePath>,
    /// Files in this page (1..=[`MAX_LIST_FILES`]).
    #[serde(default = "default_list_files")]
    pub limit: u32,
    /// Where the previous page ended (its `next_cursor`).
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Text of up to [`MAX_READ_FILES`] files, each a line range, with sizes and hashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFilesOp {
    /// The files, answered in this order.
    pub files: Vec<FileRange>,
}

/// Lines matching a pattern, ignore-aware, in stable order, one page at a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchOp {
    /// A regular expression (Rust `regex` syntax), or literal text when `literal`.
    pub pattern: String,
    /// Match `pattern` as literal text.
    #[serde(default)]
    pub literal: bool,
    /// Match case exactly (the default).
    #[serde(default = "yes")]
    pub case_sensitive: bool,
    /// Only files matching this glob (as for `list_files`).
    #[serde(default)]
    pub glob: Option<String>,
    /// The directory or file to search; `None` is the project root.
    #[serde(default)]
    pub path: Option<RelativePath>,
    /// Include hidden files and directories.
    #[serde(default)]
    pub hidden: bool,
    /// Lines of context before and after each match (0..=[`MAX_CONTEXT_LINES`]).
    #[serde(default)]
    pub context_lines: u32,
    /// Matches in this page (1..=[`MAX_SEARCH_MATCHES`]).
    #[serde(default = "default_search_matches")]
    pub limit: u32,
    /// Where the previous page ended (its `next_cursor`).
    #[serde(default)]
    pub cursor: Option<String>,
}

impl SearchOp {
    /// A case-sensitive regex search of the whole project, first page, default limit.
    pub fn new(pattern: impl Into<String>) -> Self {
        SearchOp {
            pattern: pattern.into(),
            literal: false,
            case_sensitive: true,
            glob: None,
            path: None,
            hidden: false,
            context_lines: 0,
            limit: DEFAULT_SEARCH_MATCHES,
            cursor: None,
        }
    }
}

fn default_list_files() -> u32 {
    DEFAULT_LIST_FILES
}

fn default_search_matches() -> u32 {
    DEFAULT_SEARCH_MATCHES
}

fn yes() -> bool {
    true
}

/// One file of a `read_files` operation and the lines wanted (1-based, inclusive).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRange {
    /// The file.
    pub path: RelativePath,
    /// First line; `None` is line 1.
    #[serde(default)]
    pub start_line: Option<u64>,
    /// Last line; `None` is the end of the file.
    #[serde(default)]
    pub end_line: Option<u64>,
}

impl ExploreOp {
    /// The operation's name on the wire (`read_files`, …).
    pub fn name(&self) -> &'static str {
        match self {
            ExploreOp::Overview(_) => "overview",
            ExploreOp::ListFiles(_) => "list_files",
            ExploreOp::TrackedFiles(_) => "tracked_files",
            ExploreOp::ReadFiles(_) => "read_files",
            ExploreOp::Search(_) => "search",
        }
    }

    /// Checks every bound of the operation. Syntax the runner's libraries judge (the regex, the
    /// glob) and the cursor's content are checked by the runner, which refuses them typed.
    pub fn validate(&self) -> Result<(), ProtocolError> {
        match self {
            ExploreOp::Overview(_) => Ok(()),
            ExploreOp::ListFiles(op) => {
                check_glob(op.glob.as_deref())?;
                check_limit(op.limit, MAX_LIST_FILES)?;
                check_cursor(op.cursor.as_deref())
            }
            ExploreOp::TrackedFiles(op) => {
                check_limit(op.limit, MAX_LIST_FILES)?;
                check_cursor(op.cursor.as_deref())
            }
            ExploreOp::ReadFiles(op) => {
                if op.files.is_empty() || op.files.len() > MAX_READ_FILES {
                    return refuse(format!("read_files names 1-{MAX_READ_FILES} files"));
                }
                for (i, f) in op.files.iter().enumerate() {
                    let start = f.start_line.unwrap_or(1);
                    if start == 0 {
                        return refuse(format!("files[{i}].start_line must be at least 1"));
                    }
                    if f.end_line.is_some_and(|end| end < start) {
                        return refuse(format!(
                            "files[{i}].end_line must not be before start_line"
                        ));
                    }
                }
                Ok(())
            }
            ExploreOp::Search(op) => {
                if op.pattern.is_empty() || op.pattern.len() > MAX_PATTERN_BYTES {
                    return refuse(format!("pattern must be 1-{MAX_PATTERN_BYTES} bytes"));
                }
                if op.pattern.contains('\0') {
                    return refuse("pattern contains a NUL byte");
                }
                check_glob(op.glob.as_deref())?;
                if op.context_lines > MAX_CONTEXT_LINES {
                    return refuse(format!("context_lines must be 0-{MAX_CONTEXT_LINES}"));
                }
                check_limit(op.limit, MAX_SEARCH_MATCHES)?;
                check_cursor(op.cursor.as_deref())
            }
        }
    }
}

fn check_glob(glob: Option<&str>) -> Result<(), ProtocolError> {
    match glob {
        Some(g) if g.is_empty() || g.len() > MAX_GLOB_BYTES => {
            refuse(format!("glob must be 1-{MAX_GLOB_BYTES} bytes"))
        }
        Some(g) if g.chars().any(char::is_control) => refuse("glob contains a control character"),
        _ => Ok(()),
    }
}

fn check_limit(limit: u32, max: u32) -> Result<(), ProtocolError> {
    if limit == 0 || limit > max {
        return refuse(format!("limit must be 1-{max}"));
    }
    Ok(())
}

fn check_cursor(cursor: Option<&str>) -> Result<(), ProtocolError> {
    match cursor {
        Some(c)
            if c.is_empty()
                || c.len() > MAX_CURSOR_BYTES
                || !c
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            refuse(format!(
                "cursor must be a next_cursor this runner handed out (1-{MAX_CURSOR_BYTES} of A-Z a-z 0-9 - _)"
            ))
        }
        _ => Ok(()),
    }
}

/// What a path in a listing is. Symlinks are reported, never followed by a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A device, FIFO or socket.
    Special,
}

/// Answer to [`ExploreOp::Overview`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct OverviewAnswer {
    /// The root directory's name.
    pub root_name: String,
    /// Languages by the extensions of the files looked at, most files first.
    pub languages: Vec<LanguageCount>,
    /// Build manifests found (`Cargo.toml`, `package.json`, …), in path order.
    pub manifests: Vec<Manifest>,
    /// Instruction files for coding agents that exist (`AGENTS.md`, `CLAUDE.md`,
    /// `.github/copilot-instructions.md`).
    pub instruction_files: Vec<RelativePath>,
    /// The top two levels of the tree, ignore-aware, without hidden entries, in path order.
    pub tree: Vec<TreeEntry>,
    /// The tree had more than [`crate::MAX_OVERVIEW_ENTRIES`] entries; the rest is left out.
    pub tree_truncated: bool,
    /// More than [`crate::MAX_OVERVIEW_SCAN_FILES`] files: languages and manifests come from
    /// the first ones in path order.
    pub scan_truncated: bool,
    /// The Git state of the root.
    pub git: GitSummary,
}

/// Files of one language.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LanguageCount {
    /// The language (`Rust`, `Python`, …).
    pub language: String,
    /// Files with one of its extensions.
    pub files: u64,
}

/// A build manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Where it is.
    pub path: RelativePath,
    /// Its ecosystem (`cargo`, `npm`, `python`, `go`, …).
    pub ecosystem: String,
}

/// One entry of an overview's tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TreeEntry {
    /// The path.
    pub path: RelativePath,
    /// What it is.
    pub kind: EntryKind,
}

/// The Git state of a project root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum GitSummary {
    /// The root is inside a Git work tree.
    Repository {
        /// The checked-out branch; `None` when HEAD is detached.
        branch: Option<String>,
        /// The commit HEAD names (hex); `None` before the first commit.
        head: Option<String>,
        /// Tracked files differ from HEAD or the index, or untracked files exist.
        dirty: bool,
    },
    /// The root is not inside a Git work tree.
    NotARepository,
    /// Git could not tell.
    Unavailable {
        /// Why, in words.
        reason: String,
    },
}

/// Answer to [`ExploreOp::ListFiles`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct FileListAnswer {
    /// The files of this page (directories are implied by their paths), in path order.
    pub files: Vec<ListedFile>,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<String>,
    /// Names met in this page's stretch that no project path can name (not UTF-8, or holding
    /// `:`, `\` or a control character): counted, not listed.
    pub unlisted: u64,
}

/// One listed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ListedFile {
    /// The path.
    pub path: RelativePath,
    /// What it is (never [`EntryKind::Directory`]).
    pub kind: EntryKind,
    /// Its size in bytes (a symlink's is the length of its target).
    pub size: u64,
}

/// Answer to [`ExploreOp::TrackedFiles`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TrackedFilesAnswer {
    /// The tracked paths of this page, relative to the project root, in Git's order.
    pub files: Vec<RelativePath>,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<String>,
    /// Tracked names in this page's stretch that no project path can name: counted, not listed.
    pub unlisted: u64,
    /// Git's listing was longer than the runner reads ([`crate::MAX_OUTPUT_BYTES_PER_STREAM`]):
    /// files after its end are missing from every page.
    pub truncated: bool,
}

/// Answer to [`ExploreOp::ReadFiles`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ReadFilesAnswer {
    /// One entry per requested file, in request order.
    pub files: Vec<FileRead>,
}

/// One file read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct FileRead {
    /// The path as requested.
    pub path: RelativePath,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the whole file, lowercase hex.
    pub sha256: String,
    /// Lines in the whole file (a last line without a newline counts).
    pub lines: u64,
    /// The text of the requested lines, or why there is none.
    pub content: FileContent,
}

/// What a read returns of a file's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum FileContent {
    /// UTF-8 text: lines `start_line..=end_line` exactly as in the file (newlines included).
    /// An empty range past the end has `end_line = start_line - 1`.
    Text {
        /// First line returned.
        start_line: u64,
        /// Last line returned (perhaps only its beginning, when `truncated`).
        end_line: u64,
        /// The text.
        text: String,
        /// Requested lines were left out: the per-file or per-call byte bound was reached.
        truncated: bool,
    },
    /// A NUL byte in the first [`crate::BINARY_PROBE_BYTES`]: not shown.
    Binary,
    /// Not valid UTF-8: not shown.
    NotUtf8,
}

/// Answer to [`ExploreOp::Search`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SearchAnswer {
    /// The matches of this page, in path order then line order.
    pub matches: Vec<SearchMatch>,
    /// Files searched for this page.
    pub files_searched: u64,
    /// Files met but not searched: binary, unreadable, with a line too long to hold, or with
    /// a name no project path can name.
    pub files_skipped: u64,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// One matching line and its context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SearchMatch {
    /// The file.
    pub path: RelativePath,
    /// The matching line.
    pub line: SearchLine,
    /// Context lines before it (not repeated when they belong to the previous match).
    pub before: Vec<SearchLine>,
    /// Context lines after it (not repeated as the next match's `before`).
    pub after: Vec<SearchLine>,
}

/// One line of a search answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SearchLine {
    /// 1-based line number.
    pub number: u64,
    /// The line without its line terminator; invalid UTF-8 replaced by U+FFFD.
    pub text: String,
    /// The line was longer than [`crate::MAX_SEARCH_LINE_BYTES`] and is cut.
    pub truncated: bool,
}

/// A kind of work a runner executes, announced at registration so the functions queue to it
/// only what it understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkKind {
    /// [`crate::WorkSpec::Process`].
    Process,
    /// [`crate::WorkSpec::Shell`].
    Shell,
    /// [`crate::WorkSpec::Script`].
    Script,
    /// [`crate::WorkSpec::Explore`].
    Explore,
    /// [`crate::WorkSpec::Edit`].
    Edit,
    /// [`crate::WorkSpec::Git`].
    Git,
    /// [`crate::WorkSpec::Validate`].
    Validate,
    /// [`crate::WorkSpec::PersistentShell`].
    PersistentShell,
    /// [`crate::WorkSpec::Workspace`].
    Workspace,
}

impl WorkKind {
    /// Every kind this build knows.
    pub const ALL: &'static [WorkKind] = &[
        WorkKind::Process,
        WorkKind::Shell,
        WorkKind::Script,
        WorkKind::Explore,
        WorkKind::Edit,
        WorkKind::Git,
        WorkKind::Validate,
        WorkKind::PersistentShell,
        WorkKind::Workspace,
    ];

    /// What a runner that announces no kinds executes: the kinds that existed before runners
    /// announced them.
    pub const UNANNOUNCED: &'static [WorkKind] =
        &[WorkKind::Process, WorkKind::Shell, WorkKind::Script];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkKind::Process => "process",
            WorkKind::Shell => "shell",
            WorkKind::Script => "script",
            WorkKind::Explore => "explore",
            WorkKind::Edit => "edit",
            WorkKind::Git => "git",
            WorkKind::Validate => "validate",
            WorkKind::PersistentShell => "persistent_shell",
            WorkKind::Workspace => "workspace",
        }
    }

    fn parse(s: &str) -> Option<WorkKind> {
        WorkKind::ALL.iter().copied().find(|k| k.as_str() == s)
    }
}

/// The `work_kinds` of a registration that names none.
pub(crate) fn unannounced_kinds() -> Vec<WorkKind> {
    WorkKind::UNANNOUNCED.to_vec()
}

/// Reads `work_kinds`, keeping the kinds this build knows: a newer runner's kinds are not a
/// reason to refuse its registration, only work this server would never queue to it.
pub(crate) fn known_kinds<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<WorkKind>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    if names.len() > crate::MAX_WORK_KINDS {
        return Err(serde::de::Error::custom(format!(
            "work_kinds names more than {} kinds",
            crate::MAX_WORK_KINDS
        )));
    }
    let mut kinds: Vec<WorkKind> = names.iter().filter_map(|n| WorkKind::parse(n)).collect();
    kinds.sort();
    kinds.dedup();
    Ok(kinds)
}
