//! Process-wide protections of the server binaries.

/// Makes this process non-dumpable (`PR_SET_DUMPABLE` 0): other processes of the same user —
/// a job the embedded runner started, say — can no longer read its `/proc/<pid>/environ`
/// (where `WC_LOCAL_TOKEN` and `DATABASE_URL` live), its memory or its file descriptors, nor
/// attach a debugger; no core dump is written. Only a process with `CAP_SYS_PTRACE` (root)
/// still can. Children are unaffected: `execve` resets the flag, so the servers and jobs they
/// start are ordinary processes.
pub fn forbid_inspection() -> std::io::Result<()> {
    nix::sys::prctl::set_dumpable(false).map_err(std::io::Error::from)
}
