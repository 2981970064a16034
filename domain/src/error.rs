//! The one error of every parser here: which word, and what about it was wrong. It never
//! echoes the refused text, which may be a secret pasted into the wrong field.

/// A value refused by a domain type's parser.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {problem}")]
pub struct ParseError {
    /// The domain word (`session id`, `project-relative path`, …).
    pub what: &'static str,
    /// What was wrong, as a sentence a caller can act on.
    pub problem: String,
}

impl ParseError {
    pub(crate) fn new(what: &'static str, problem: impl Into<String>) -> ParseError {
        ParseError {
            what,
            problem: problem.into(),
        }
    }
}
