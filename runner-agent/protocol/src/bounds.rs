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
