//! wc's domain words, each a type that owns its one definition: how it is parsed from text,
//! its serde form, its JSON Schema (the published pattern is generated from the same rule the
//! parser checks) and, with the `postgres` feature, how it is bound and read in SQL.
//!
//! Shared by the functions, the store and the runner protocol, so a value that crossed one
//! boundary is never re-validated differently at the next. No I/O lives here.
#![warn(missing_docs)]

#[macro_use]
mod macros;

pub mod board;
mod error;
pub mod ids;
pub mod memory;
pub mod path;
pub mod project;
pub mod session;
pub mod shell;
pub mod task;
pub mod text;
pub mod work;

pub use board::{MessageKind, MessageStatus, Priority};
pub use error::ParseError;
pub use ids::{MessageId, SessionId, ShellId, TaskId};
pub use memory::MemoryKey;
pub use path::RelativePath;
pub use project::{ProjectId, ProjectOrigin};
pub use session::{EventKind, EventRole, Lifecycle, Mode};
pub use shell::ShellState;
pub use task::TaskStatus;
pub use text::{
    CheckpointId, Cursor, Glob, HostPath, Key, Line, ProgramName, Revision, Sha256Hex, Text,
    TreeState,
};
pub use work::{EndReason, ResultExpectation, WorkId, WorkMode, WorkQueue, WorkState};

/// The schema of a closed set of strings: one `const` branch per value, with its description.
#[cfg(feature = "schema")]
fn enum_schema(description: &str, values: &[(&str, &str)]) -> schemars::Schema {
    let branches: Vec<serde_json::Value> = values
        .iter()
        .map(|(value, doc)| serde_json::json!({"type": "string", "const": value, "description": doc}))
        .collect();
    schemars::json_schema!({"description": description, "oneOf": branches})
}
