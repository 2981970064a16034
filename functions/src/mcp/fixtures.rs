//! Fixtures of the official MCP conformance suite, registered only in the test-only
//! `--conformance-fixtures` mode (never on by default).

use crate::kernel::spec::ToolSpec;

/// Fixture tools.
pub fn tools() -> Vec<ToolSpec> {
    Vec::new()
}
