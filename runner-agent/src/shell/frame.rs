//! The framing of a persistent shell: the program text the runner writes to the shell for one
//! command, and the report the shell writes back once the command has ended.
//!
//! The shell reads its program from a pipe only the runner writes (its stdin). A frame runs the
//! command with `eval` in the shell itself, at top level, so whatever the command changes (cwd,
//! variables, functions, options, umask) stays for the next one; then the shell writes
//! `TOKEN STATUS` to its control descriptor ([`CONTROL_FD`]), a pipe only the runner reads.
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

/// The shell's number for its control descriptor. A single digit: dash names no other in a
/// redirection. A command may use it too; its own use ends with the command, since the frame
/// closes and restores it around the `eval`.
pub(super) const CONTROL_FD: RawFd = 9;

/// Longest report line read before it is taken for garbage: a token, a space, three digits and
/// a newline fit well within it.
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
/// `$?` set to `restore` (the previous command's status) when it starts, and `TOKEN STATUS`
/// written to the control descriptor when it has ended.
///
/// `$?` is restored with a subshell's exit, which `set -e` would turn into the shell's own
/// exit; under `set -e` the command starts with `$?` at 0 instead. Every command word is
/// written `\command …`: the backslash keeps an alias from replacing it, `command` a function
/// of the same name, and `command eval` keeps a syntax error in the text from ending a
/// non-interactive shell.
pub(super) fn command(command: &str, stdin: &Path, restore: u8, token: &Token) -> Vec<u8> {
    let mut frame = Vec::with_capacity(command.len() + 256);
    if restore != 0 {
        frame.extend_from_slice(
            format!("case $- in *e*) ;; *) (\\command exit {restore}) ;; esac\n").as_bytes(),
        );
    }
    frame.extend_from_slice(b"\\command eval ");
    quote_into(&mut frame, command.as_bytes());
    frame.extend_from_slice(b" <");
    quote_into(&mut frame, stdin.as_os_str().as_bytes());
    frame.extend_from_slice(format!(" {CONTROL_FD}>&-\n").as_bytes());
    frame.extend_from_slice(
        format!(
            "\\command printf '%s %d\\n' {} \"$?\" >&{CONTROL_FD}\n",
            token.0
        )
        .as_bytes(),
    );
    frame
}

/// Why a report line was not the one a frame asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum BadReport {
    /// The control pipe reached its end: nothing writes it any more.
    #[error("the control channel closed")]
    Closed,
    /// A line that is not `TOKEN STATUS` for this frame's token.
    #[error("the control channel carried an unexpected report")]
    Garbage,
    /// The control pipe could not be read.
    #[error("the control channel cannot be read: {0}")]
    Unreadable(String),
}

/// The command's status from `line` (with its newline), when it is `TOKEN STATUS` for `token`.
pub(super) fn report(line: &[u8], token: &Token) -> Result<u8, BadReport> {
    let text = std::str::from_utf8(line).map_err(|_| BadReport::Garbage)?;
    let body = text.strip_suffix('\n').ok_or(BadReport::Garbage)?;
    let (got, status) = body.split_once(' ').ok_or(BadReport::Garbage)?;
    if got != token.0 || status.is_empty() || !status.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BadReport::Garbage);
    }
    status.parse().map_err(|_| BadReport::Garbage)
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
    fn a_frame_closes_the_control_descriptor_for_the_command_and_reports_after_it() {
        let t = token();
        let frame = command("echo hi", Path::new("/dev/null"), 0, &t);
        let text = String::from_utf8(frame).unwrap();
        assert_eq!(
            text,
            format!(
                "\\command eval 'echo hi' <'/dev/null' 9>&-\n\
                 \\command printf '%s %d\\n' {} \"$?\" >&9\n",
                t.0
            )
        );
        let restored = command("true", Path::new("/dev/null"), 3, &t);
        assert!(restored.starts_with(b"case $- in *e*) ;; *) (\\command exit 3) ;; esac\n"));
    }

    #[test]
    fn only_this_frames_token_and_a_status_make_a_report() {
        let t = token();
        let ok = format!("{} 127\n", t.0);
        assert_eq!(report(ok.as_bytes(), &t), Ok(127));
        let other = token();
        for bad in [
            format!("{} 0\n", other.0),
            format!("{} 0", t.0),
            format!("{} \n", t.0),
            format!("{} -1\n", t.0),
            format!("{} 256\n", t.0),
            format!("{}  0\n", t.0),
            format!("x{} 0\n", t.0),
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
