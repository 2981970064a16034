//! The runtime tools. Adding a tool is one module here plus one line in [`all`].

mod apply_patch;
mod apply_text_edits;
mod close_session;
mod close_session_shell;
mod complete_session_message;
mod create_checkpoint;
mod delete_checkpoint;
mod delete_project_files;
mod diff_checkpoint;
mod discard_untracked;
mod finish_coding_task;
mod get_session_assignment;
mod git_commit;
mod git_diff;
mod git_diff_summary;
mod git_log;
mod git_restore_paths;
mod git_status;
mod job_log;
mod job_status;
mod list_checkpoints;
mod list_jobs;
mod list_managed_worktrees;
mod list_project_files;
mod list_project_tracked_files;
mod list_projects;
pub mod list_runners;
mod list_session_messages;
mod list_tools;
mod move_project_file;
mod observe_session_messages;
mod open_session_shell;
mod post_session_message;
mod project_overview;
mod read_files;
mod remove_managed_worktree;
mod resolve_session_message;
mod restore_checkpoint;
mod run_job;
mod run_process;
mod run_script;
mod run_shell;
mod runtime_status;
mod search_project_texts;
mod session_handoff_summary;
mod session_shell_exec;
mod session_shell_status;
mod session_summary;
mod start_session;
mod stop_job;
mod update_session_context;
mod validate;
mod validation_summary;
mod work_on_project;
mod write_project_file;

use crate::kernel::spec::ToolSpec;

/// Every runtime tool of this build.
pub fn all() -> Vec<ToolSpec> {
    vec![
        list_tools::spec(),
        runtime_status::spec(),
        list_projects::spec(),
        work_on_project::spec(),
        list_managed_worktrees::spec(),
        remove_managed_worktree::spec(),
        start_session::spec(),
        session_summary::spec(),
        session_handoff_summary::spec(),
        finish_coding_task::spec(),
        close_session::spec(),
        update_session_context::spec(),
        run_process::spec(),
        run_shell::spec(),
        run_script::spec(),
        run_job::spec(),
        job_status::spec(),
        job_log::spec(),
        stop_job::spec(),
        list_jobs::spec(),
        open_session_shell::spec(),
        session_shell_exec::spec(),
        session_shell_status::spec(),
        close_session_shell::spec(),
        project_overview::spec(),
        list_project_files::spec(),
        list_project_tracked_files::spec(),
        read_files::spec(),
        search_project_texts::spec(),
        apply_text_edits::spec(),
        apply_patch::spec(),
        write_project_file::spec(),
        delete_project_files::spec(),
        move_project_file::spec(),
        git_status::spec(),
        git_diff::spec(),
        git_diff_summary::spec(),
        git_log::spec(),
        git_commit::spec(),
        git_restore_paths::spec(),
        discard_untracked::spec(),
        create_checkpoint::spec(),
        list_checkpoints::spec(),
        diff_checkpoint::spec(),
        restore_checkpoint::spec(),
        delete_checkpoint::spec(),
        validate::cargo_check(),
        validate::cargo_test(),
        validate::cargo_fmt(),
        validate::cargo_clippy(),
        validate::go_test(),
        validate::pytest(),
        validation_summary::spec(),
        list_runners::spec(),
        post_session_message::spec(),
        list_session_messages::spec(),
        resolve_session_message::spec(),
        get_session_assignment::spec(),
        complete_session_message::spec(),
        observe_session_messages::spec(),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_input_schema_compiles() {
        // Validators compile lazily on a tool's first call; compiling them all here keeps a
        // schema that does not compile out of any build.
        // (The conformance fixtures' schemas are checked beside them, in `mcp::fixtures`.)
        for spec in &super::all() {
            let _ = spec.validator();
        }
    }
}
