//! Which program a job starts: the one `argv[0]` resolution shared by the job spawn and the
//! sandbox's own lookup of `bwrap`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The program to start for `argv[0]`: a relative path with a `/` is taken relative to the
/// work's cwd (where the work would find it), a bare name is looked up on the child's `PATH`
/// (`search_path`), and anything not found is left as given (starting it then fails with the
/// system's error). Handing the spawn an absolute path also lets the standard library start the
/// child with `posix_spawn` instead of copying this process with `fork`, which costs
/// milliseconds in a large process.
pub fn program_path(argv0: &str, cwd: &Path, search_path: Option<&std::ffi::OsStr>) -> OsString {
    let path = Path::new(argv0);
    if argv0.contains('/') {
        return if path.is_relative() {
            cwd.join(path).into_os_string()
        } else {
            argv0.into()
        };
    }
    search_path
        .into_iter()
        .flat_map(std::env::split_paths)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(argv0))
        .find(|candidate| is_executable_file(candidate))
        .map_or_else(|| argv0.into(), PathBuf::into_os_string)
}

/// Whether `path` is a regular file with an execute bit.
pub fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_program_paths_are_taken_from_the_cwd_and_names_from_the_path() {
        let cwd = Path::new("/srv/web");
        assert_eq!(program_path("./build.sh", cwd, None), "/srv/web/./build.sh");
        assert_eq!(program_path("bin/tool", cwd, None), "/srv/web/bin/tool");
        assert_eq!(program_path("/usr/bin/env", cwd, None), "/usr/bin/env");
        let sh = program_path(
            "sh",
            cwd,
            Some("relative/dir:/nonexistent:/bin:/usr/bin".as_ref()),
        );
        assert!(
            Path::new(&sh).is_absolute() && Path::new(&sh).ends_with("sh"),
            "{sh:?}"
        );
        assert_eq!(
            program_path("no-such-program-here", cwd, Some("/bin:/usr/bin".as_ref())),
            "no-such-program-here",
            "left as given: starting it fails with the system's error"
        );
    }
}
