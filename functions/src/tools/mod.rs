//! The runtime tools. Adding a tool is one module here plus one line in [`all`].

mod list_projects;
mod list_tools;
mod runtime_status;

use crate::kernel::spec::ToolSpec;

/// Every runtime tool of this build.
pub fn all() -> Vec<ToolSpec> {
    vec![
        list_tools::spec(),
        runtime_status::spec(),
        list_projects::spec(),
    ]
}
