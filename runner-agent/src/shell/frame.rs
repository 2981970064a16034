//! The framing of a persistent shell: the program text the runner writes to the shell for one
//! command, and the report the shell writes back once the command has ended.
//!
//! The shell reads its program from a pipe only the runner writes (its stdin). A frame runs the
//! command with `eval` in the shell itself, at top level, so whatever the command changes (cwd,
//! variables, functions, umask) stays for the next one; then the shell writes
//! `TOKEN STATUS PROOF` to its control descriptor ([`CONTROL_FD`]), a pipe only the runner
//! reads.
//!
//! The command is code in the very process that reports on it, so the frame is written so
//! that nothing the command leaves behind can stand in for the report:
//! - the frame is one line: the shell has read all of it before the command runs, so the
//!   command cannot read the rest of the frame (its token) off the program pipe;
//! - it calls only special builtins (`eval`, `unset`, `trap`, `set`, `exit`), which no function
//!   can replace — bash is put in POSIX mode around them, where that holds too — and removes
//!   functions named like the regular builtins it uses (`command`, `printf`, `enable`) before
//!   it uses them; every word is quoted, so no alias applies; bash's builtins are enabled
//!   again and `printf` is looked up on a fixed `PATH` should they not be;
//! - traps that could run code between the command and its report (bash's DEBUG, RETURN and
//!   ERR) are cleared before the report, and echoes of input (`set -v`, `-x`, bash's history)
//!   are turned off after it, so no later command can read a frame's token;
//! - the status is kept in a variable whose name is fresh for every frame, so the command
//!   cannot have made it read-only beforehand;
//! - `PROOF` is `proven`, or `unproven` where the frame cannot rule out that something ran
//!   between the command and the report: bash with `extdebug` or `functrace` on (a DEBUG trap
//!   can then take over every later step), POSIX mode refused, or builtins that stay disabled.
//!
//! Invariants:
//! - completion is never read from the command's output: a command can print anything;
//! - the command runs with the control descriptor closed and its stdin redirected, so no
//!   program it runs inherits the control pipe or the program pipe (the shell's own copies,
//!   kept to restore them after the `eval`, are close-on-exec);
//! - every token is fresh (128 random bits), so a report is taken only from the frame that
//!   asked for it;
//! - the command text reaches `eval` as one single-quoted word, byte for byte, in `sh` (dash)
//!   and `bash` alike.

use std::fmt;
use std::io::{self, Read as _};
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use wc_runner_protocol::Shell as Dialect;

/// The shell's number for its control descriptor. A single digit: dash names no other in a
/// redirection. A command may use it too; its own use ends with the command, since the frame
/// closes and restores it around the `eval`.
pub(super) const CONTROL_FD: RawFd = 9;

/// Longest report line read before it is taken for garbage: a token, a status, a proof word,
/// two spaces and a newline fit well within it.
pub(super) const MAX_REPORT_BYTES: u64 = 64;

/// A per-command token: 128 random bits in lowercase hex.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Token(String);

impl Token {
    /// A fresh token from the kernel's random source.
    pub(super) fn generate() -> io::Result<Token> {
        let mut bits = [0u8; 16];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bits)?;
        Ok(Token(hex::encode(bits)))
    }
}

/// Tokens are secrets of their frame: never printed.
impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(…)")
    }
}

/// Appends `text` to `out` as one single-quoted word of `sh` and `bash`: every byte stands for
/// itself inside single quotes except `'`, written `'\''` (close, escaped quote, reopen). dash
/// has no `$'…'`, so this is the one quoting both shells read the same.
fn quote_into(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'\'');
    for &b in text {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
}

/// The frame that runs `command` with its stdin read from `stdin` (a file, or `/dev/null`),
/// `$?` set to `restore` (the previous command's status) when it starts, and
/// `TOKEN STATUS PROOF` written to the control descriptor when it has ended, in `dialect`.
///
/// `$?` is restored with a subshell's exit, which `set -e` would turn into the shell's own
/// exit; under `set -e` the command starts with `$?` at 0 instead. `command eval` keeps a
/// syntax error in the text from ending a non-interactive shell.
pub(super) fn command(
    command: &str,
    stdin: &Path,
    restore: u8,
    token: &Token,
    dialect: Dialect,
) -> Vec<u8> {
    let bash = dialect == Dialect::Bash;
    // One fresh suffix for the frame's variables: the command cannot have made them
    // read-only.
    let v = &Token::generate()
        .map(|t| t.0)
        .unwrap_or_else(|_| token.0.chars().rev().collect())[..12];
    let mut f = Vec::with_capacity(command.len() + 1024);
    let mut put = |text: &str| f.extend_from_slice(text.as_bytes());
    // Before the command: nothing it defined earlier stands for the builtins used here.
    if bash {
        put(&format!(
            "_wc_x{v}=${{POSIXLY_CORRECT+x}}; POSIXLY_CORRECT=1; \\trap - DEBUG RETURN ERR; \\unset -f command printf enable; \\enable command printf 2>/dev/null; _wc_k{v}=$?; case $_wc_x{v} in x) ;; *) \\unset POSIXLY_CORRECT ;; esac; "
        ));
    } else {
        put("\\unset -f command printf; ");
    }
    if restore != 0 {
        put(&format!(
            "case $- in *e*) ;; *) (\\exit {restore}) ;; esac; "
        ));
    }
    put("\\command eval ");
    let mut quoted = Vec::new();
    quote_into(&mut quoted, command.as_bytes());
    f.extend_from_slice(&quoted);
    let mut put = |text: &str| f.extend_from_slice(text.as_bytes());
    put(" <");
    let mut quoted = Vec::new();
    quote_into(&mut quoted, stdin.as_os_str().as_bytes());
    f.extend_from_slice(&quoted);
    let mut put = |text: &str| f.extend_from_slice(text.as_bytes());
    put(&format!(" {CONTROL_FD}>&-; _wc_s{v}=$?; "));
    // After it: the same again, traps and echoes off, then the report.
    if bash {
        put(&format!(
            "POSIXLY_CORRECT=1; \\trap - DEBUG RETURN ERR; \\unset -f command printf enable; \\set +vx +o history; \\enable command printf 2>/dev/null || _wc_k{v}=1; _wc_p{v}=unproven; case $_wc_k{v}:$SHELLOPTS:$BASHOPTS: in 0:*posix*) _wc_p{v}=proven ;; esac; case :$SHELLOPTS:$BASHOPTS: in *:functrace:*|*:extdebug:*) _wc_p{v}=unproven ;; esac; PATH=/usr/bin:/bin \\command printf '%s %d %s\\n' {} \"$_wc_s{v}\" \"$_wc_p{v}\" >&{CONTROL_FD}; case $_wc_x{v} in x) ;; *) \\unset POSIXLY_CORRECT ;; esac; \\unset _wc_x{v} _wc_k{v} _wc_s{v} _wc_p{v}\n",
            token.0
        ));
    } else {
        put(&format!(
            "\\unset -f command printf; \\set +vx; \\command printf '%s %d %s\\n' {} \"$_wc_s{v}\" proven >&{CONTROL_FD}; \\unset _wc_s{v}\n",
            token.0
        ));
    }
    f
}

/// What a frame's report says: the command's status, and whether nothing can have run
/// between the command and the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Report {
    pub(super) status: u8,
    pub(super) proven: bool,
}

/// Why a report line was not the one a frame asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum BadReport {
    /// The control pipe reached its end: nothing writes it any more.
    #[error("the control channel closed")]
    Closed,
    /// A line that is not `TOKEN STATUS PROOF` for this frame's token.
    #[error("the control channel carried an unexpected report")]
    Garbage,
    /// The control pipe could not be read.
    #[error("the control channel cannot be read: {0}")]
    Unreadable(String),
}

/// The report in `line` (with its newline), when it is `TOKEN STATUS PROOF` for `token`.
pub(super) fn report(line: &[u8], token: &Token) -> Result<Report, BadReport> {
    let text = std::str::from_utf8(line).map_err(|_| BadReport::Garbage)?;
    let body = text.strip_suffix('\n').ok_or(BadReport::Garbage)?;
    let mut parts = body.split(' ');
    let (Some(got), Some(status), Some(proof), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BadReport::Garbage);
    };
    if got != token.0 || status.is_empty() || !status.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BadReport::Garbage);
    }
    let proven = match proof {
        "proven" => true,
        "unproven" => false,
        _ => return Err(BadReport::Garbage),
    };
    Ok(Report {
        status: status.parse().map_err(|_| BadReport::Garbage)?,
        proven,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> Token {
        Token::generate().unwrap()
    }

    #[test]
    fn tokens_are_fresh_128_bit_hex_and_never_printed() {
        let (a, b) = (token(), token());
        assert_ne!(a, b);
        assert_eq!(a.0.len(), 32);
        assert!(a.0.bytes().all(|c| c.is_ascii_hexdigit()));
        assert!(!format!("{a:?}").contains(&a.0));
    }

    #[test]
    fn quoting_keeps_every_byte_but_the_single_quote_literal() {
        let mut out = Vec::new();
        quote_into(&mut out, b"it's $HOME `x` \\ \"q\"\n");
        assert_eq!(out, b"'it'\\''s $HOME `x` \\ \"q\"\n'");
    }

    #[test]
    fn a_frame_is_one_line_that_closes_the_control_descriptor_and_reports_after_the_command() {
        let t = token();
        for dialect in [Dialect::Sh, Dialect::Bash] {
            let frame = command("echo hi\nsecond", Path::new("/dev/null"), 0, &t, dialect);
            let text = String::from_utf8(frame).unwrap();
            // The one newline outside the command's quotes ends the frame.
            assert_eq!(text.replace("echo hi\nsecond", "").matches('\n').count(), 1);
            assert!(text.ends_with('\n'));
            let eval = text
                .find("\\command eval 'echo hi\nsecond' <'/dev/null' 9>&-;")
                .unwrap();
            let report = text
                .find(&format!("printf '%s %d %s\\n' {} ", t.0))
                .unwrap();
            assert!(eval < report, "{text}");
            // The token appears only after the command.
            assert_eq!(
                text.find(&t.0),
                Some(report + "printf '%s %d %s\\n' ".len())
            );
            assert!(!text.contains("(\\exit"), "nothing to restore: {text}");
            let restored = command("true", Path::new("/dev/null"), 3, &t, dialect);
            let restored = String::from_utf8(restored).unwrap();
            let restore = restored
                .find("case $- in *e*) ;; *) (\\exit 3) ;; esac; \\command eval")
                .unwrap();
            assert!(
                restore < restored.find("\\command eval").unwrap() + 1,
                "{restored}"
            );
        }
        let bash =
            String::from_utf8(command(":", Path::new("/dev/null"), 0, &t, Dialect::Bash)).unwrap();
        for guard in [
            "POSIXLY_CORRECT=1",
            "\\trap - DEBUG RETURN ERR",
            "\\set +vx +o history",
            "PATH=/usr/bin:/bin",
        ] {
            assert!(bash.contains(guard), "{guard}: {bash}");
        }
        // A frame's variables are its own.
        let other =
            String::from_utf8(command(":", Path::new("/dev/null"), 0, &t, Dialect::Bash)).unwrap();
        assert_ne!(bash, other);
    }

    #[test]
    fn only_this_frames_token_a_status_and_a_proof_make_a_report() {
        let t = token();
        let ok = format!("{} 127 proven\n", t.0);
        assert_eq!(
            report(ok.as_bytes(), &t),
            Ok(Report {
                status: 127,
                proven: true
            })
        );
        let doubt = format!("{} 0 unproven\n", t.0);
        assert_eq!(report(doubt.as_bytes(), &t).map(|r| r.proven), Ok(false));
        let other = token();
        for bad in [
            format!("{} 0 proven\n", other.0),
            format!("{} 0 proven", t.0),
            format!("{} 0\n", t.0),
            format!("{}  proven\n", t.0),
            format!("{} -1 proven\n", t.0),
            format!("{} 256 proven\n", t.0),
            format!("{} 0 maybe\n", t.0),
            format!("{} 0 proven extra\n", t.0),
            format!("x{} 0 proven\n", t.0),
            "\n".to_owned(),
        ] {
            assert_eq!(
                report(bad.as_bytes(), &t),
                Err(BadReport::Garbage),
                "{bad:?}"
            );
        }
        assert_eq!(report(b"\xff\n", &t), Err(BadReport::Garbage));
    }
}
