//! The runtime tools. Adding a tool is one module here plus one line in [`all`].

mod close_session;
mod finish_coding_task;
mod list_projects;
mod list_tools;
mod runtime_status;
mod session_handoff_summary;
mod session_summary;
mod update_session_context;
mod work_on_project;

use crate::kernel::spec::ToolSpec;

/// Every runtime tool of this build.
pub fn all() -> Vec<ToolSpec> {
    vec![
        list_tools::spec(),
        runtime_status::spec(),
        list_projects::spec(),
        work_on_project::spec(),
        session_summary::spec(),
        session_handoff_summary::spec(),
        finish_coding_task::spec(),
        close_session::spec(),
        update_session_context::spec(),
    ]
}
