//! Observation tokens and assignment fences: small opaque strings the server hands out and later
//! takes back, tamper-evident with an HMAC-SHA-256 tag (128 bits kept) under a server secret.
//!
//! Both bind the exact session (a digest of its id) and its incarnation (the session row's
//! creation time, the "ledger generation"), so a token of another session, or of a session
//! restored from an older copy, fails closed. What they carry:
//!
//! - observation token `wco1_…`: the message observation revision the caller has seen;
//! - assignment fence `wcf1_…`: one todo and the assignment revision of the snapshot.
//!
//! The secret is `WC_TOKEN_SECRET` when configured, else one generated on first use and kept in
//! the database (`server_secrets`), so tokens stay valid across restarts and instances.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};
use wc_domain::{MessageId, SessionId};

type HmacSha256 = hmac::Hmac<Sha256>;

/// Longest token accepted (longer ones are refused as oversized before decoding).
pub const MAX_TOKEN_CHARS: usize = 256;

const OBSERVATION_PREFIX: &str = "wco1_";
const FENCE_PREFIX: &str = "wcf1_";
const TAG_BYTES: usize = 16;
const VERSION: u8 = 1;
/// Length of the random part of a message id (`wc_msg_` + 22 base64url characters).
const TODO_ID_CHARS: usize = 22;

/// The keys derived from the server secret, one per purpose.
#[derive(Clone)]
pub struct TokenKeys {
    observation: [u8; 32],
    fence: [u8; 32],
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKeys(..)")
    }
}

fn derive(secret: &[u8], purpose: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"wc.token-key.v1\0");
    h.update(purpose.as_bytes());
    h.update([0]);
    h.update(secret);
    h.finalize().into()
}

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenProblem {
    /// Longer than [`MAX_TOKEN_CHARS`].
    Oversized,
    /// Not a token of this kind, or altered (the tag does not verify).
    Malformed,
    /// Issued for another session.
    WrongSession,
    /// Issued for an earlier incarnation of the session.
    WrongGeneration,
    /// Claims a revision the session has not reached.
    FutureRevision,
    /// A fence for another message.
    WrongMessage,
}

impl TokenProblem {
    /// Stable reason string.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenProblem::Oversized => "oversized",
            TokenProblem::Malformed => "malformed",
            TokenProblem::WrongSession => "wrong_session",
            TokenProblem::WrongGeneration => "wrong_generation",
            TokenProblem::FutureRevision => "future_revision",
            TokenProblem::WrongMessage => "wrong_message",
        }
    }
}

/// The session a token is checked against.
#[derive(Debug, Clone, Copy)]
pub struct SessionBinding<'a> {
    /// Session id.
    pub id: &'a SessionId,
    /// Incarnation: creation time of the session row, in microseconds.
    pub generation: i64,
}

fn session_digest(id: &str) -> [u8; 8] {
    let d = Sha256::new()
        .chain_update(b"wc.board-session.v1\0")
        .chain_update(id.as_bytes())
        .finalize();
    d[..8].try_into().expect("8 bytes")
}

impl TokenKeys {
    /// Keys derived from `secret` (at least 32 bytes).
    pub fn new(secret: &[u8]) -> TokenKeys {
        TokenKeys {
            observation: derive(secret, "observation"),
            fence: derive(secret, "assignment-fence"),
        }
    }

    fn tag(key: &[u8; 32], payload: &[u8]) -> [u8; TAG_BYTES] {
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).expect("any key length");
        mac.update(payload);
        mac.finalize().into_bytes()[..TAG_BYTES]
            .try_into()
            .expect("tag bytes")
    }

    fn seal(key: &[u8; 32], prefix: &str, payload: &[u8]) -> String {
        let mut bytes = payload.to_vec();
        bytes.extend_from_slice(&Self::tag(key, payload));
        format!("{prefix}{}", URL_SAFE_NO_PAD.encode(bytes))
    }

    fn open(
        key: &[u8; 32],
        prefix: &str,
        token: &str,
        payload_len: usize,
    ) -> Result<Vec<u8>, TokenProblem> {
        if token.len() > MAX_TOKEN_CHARS {
            return Err(TokenProblem::Oversized);
        }
        let body = token.strip_prefix(prefix).ok_or(TokenProblem::Malformed)?;
        let bytes = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| TokenProblem::Malformed)?;
        if bytes.len() != payload_len + TAG_BYTES {
            return Err(TokenProblem::Malformed);
        }
        let (payload, tag) = bytes.split_at(payload_len);
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).expect("any key length");
        mac.update(payload);
        // Constant-time comparison of the truncated tag.
        mac.verify_truncated_left(tag)
            .map_err(|_| TokenProblem::Malformed)?;
        if payload[0] != VERSION {
            return Err(TokenProblem::Malformed);
        }
        Ok(payload.to_vec())
    }

    /// An observation token for `session` at `revision`.
    pub fn observation_token(&self, session: SessionBinding<'_>, revision: i64) -> String {
        let mut p = vec![VERSION];
        p.extend_from_slice(&session_digest(session.id.as_str()));
        p.extend_from_slice(&session.generation.to_be_bytes());
        p.extend_from_slice(&revision.to_be_bytes());
        Self::seal(&self.observation, OBSERVATION_PREFIX, &p)
    }

    /// The revision in `token`, if it is a valid observation token of `session` for a
    /// revision the session has reached (`current`).
    pub fn open_observation_token(
        &self,
        session: SessionBinding<'_>,
        current: i64,
        token: &str,
    ) -> Result<i64, TokenProblem> {
        let p = Self::open(&self.observation, OBSERVATION_PREFIX, token, 1 + 8 + 8 + 8)?;
        if p[1..9] != session_digest(session.id.as_str()) {
            return Err(TokenProblem::WrongSession);
        }
        let generation = i64::from_be_bytes(p[9..17].try_into().expect("8 bytes"));
        if generation != session.generation {
            return Err(TokenProblem::WrongGeneration);
        }
        let revision = i64::from_be_bytes(p[17..25].try_into().expect("8 bytes"));
        if revision < 0 {
            return Err(TokenProblem::Malformed);
        }
        if revision > current {
            return Err(TokenProblem::FutureRevision);
        }
        Ok(revision)
    }

    /// An assignment fence for todo `todo_id` of `session` at `assignment_revision`.
    pub fn fence(
        &self,
        session: SessionBinding<'_>,
        todo_id: &MessageId,
        assignment_revision: i64,
    ) -> String {
        let mut p = vec![VERSION];
        p.extend_from_slice(&session_digest(session.id.as_str()));
        p.extend_from_slice(&todo_suffix(todo_id));
        p.extend_from_slice(&session.generation.to_be_bytes());
        p.extend_from_slice(&assignment_revision.to_be_bytes());
        Self::seal(&self.fence, FENCE_PREFIX, &p)
    }

    /// The assignment revision in `fence`, if it is a valid fence of todo `todo_id` of
    /// `session`.
    pub fn open_fence(
        &self,
        session: SessionBinding<'_>,
        todo_id: &MessageId,
        fence: &str,
    ) -> Result<i64, TokenProblem> {
        let p = Self::open(
            &self.fence,
            FENCE_PREFIX,
            fence,
            1 + 8 + TODO_ID_CHARS + 8 + 8,
        )?;
        if p[1..9] != session_digest(session.id.as_str()) {
            return Err(TokenProblem::WrongSession);
        }
        if p[9..9 + TODO_ID_CHARS] != todo_suffix(todo_id) {
            return Err(TokenProblem::WrongMessage);
        }
        let rest = &p[9 + TODO_ID_CHARS..];
        let generation = i64::from_be_bytes(rest[..8].try_into().expect("8 bytes"));
        if generation != session.generation {
            return Err(TokenProblem::WrongGeneration);
        }
        Ok(i64::from_be_bytes(rest[8..16].try_into().expect("8 bytes")))
    }
}

/// The 22 random characters of a message id.
fn todo_suffix(id: &MessageId) -> [u8; TODO_ID_CHARS] {
    let mut out = [0u8; TODO_ID_CHARS];
    let rest = &id.as_str()[MessageId::PREFIX.len()..];
    for (o, b) in out.iter_mut().zip(rest.bytes()) {
        *o = b;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::LazyLock;

    static SID: LazyLock<SessionId> =
        LazyLock::new(|| SessionId::parse("wc_sess_AAAAAAAAAAAAAAAAAAAAAA").unwrap());
    static OTHER: LazyLock<SessionId> =
        LazyLock::new(|| SessionId::parse("wc_sess_CCCCCCCCCCCCCCCCCCCCCC").unwrap());
    static TODO: LazyLock<MessageId> =
        LazyLock::new(|| MessageId::parse("wc_msg_BBBBBBBBBBBBBBBBBBBBBB").unwrap());
    static OTHER_TODO: LazyLock<MessageId> =
        LazyLock::new(|| MessageId::parse("wc_msg_DDDDDDDDDDDDDDDDDDDDDD").unwrap());

    fn s() -> SessionBinding<'static> {
        SessionBinding {
            id: &SID,
            generation: 1_700_000_000_000_000,
        }
    }

    fn keys() -> TokenKeys {
        TokenKeys::new(&[7u8; 32])
    }

    #[test]
    fn observation_tokens_round_trip_and_bind_their_session() {
        let k = keys();
        let t = k.observation_token(s(), 41);
        assert!(t.starts_with("wco1_") && t.len() <= MAX_TOKEN_CHARS, "{t}");
        assert_eq!(k.open_observation_token(s(), 41, &t), Ok(41));
        assert_eq!(k.open_observation_token(s(), 100, &t), Ok(41));
        assert_eq!(
            k.open_observation_token(s(), 40, &t),
            Err(TokenProblem::FutureRevision)
        );
        let other = SessionBinding { id: &OTHER, ..s() };
        assert_eq!(
            k.open_observation_token(other, 100, &t),
            Err(TokenProblem::WrongSession)
        );
        let reborn = SessionBinding {
            generation: s().generation + 1,
            ..s()
        };
        assert_eq!(
            k.open_observation_token(reborn, 100, &t),
            Err(TokenProblem::WrongGeneration)
        );
    }

    #[test]
    fn every_altered_character_is_refused() {
        let k = keys();
        let t = k.observation_token(s(), 7);
        for i in 5..t.len() {
            let mut b = t.clone().into_bytes();
            b[i] = if b[i] == b'A' { b'B' } else { b'A' };
            let altered = String::from_utf8(b).unwrap();
            if altered == t {
                continue;
            }
            assert!(
                k.open_observation_token(s(), 100, &altered).is_err(),
                "position {i} of {t}"
            );
        }
        for bad in [
            "",
            "wco1_",
            "wco1_!!!!",
            "wcf1_AAAA",
            "token",
            &format!("{t}A"),
        ] {
            assert_eq!(
                k.open_observation_token(s(), 100, bad),
                Err(TokenProblem::Malformed),
                "{bad}"
            );
        }
        let long = format!("wco1_{}", "A".repeat(MAX_TOKEN_CHARS));
        assert_eq!(
            k.open_observation_token(s(), 100, &long),
            Err(TokenProblem::Oversized)
        );
        // Another secret: same shape, refused.
        let other = TokenKeys::new(&[8u8; 32]).observation_token(s(), 7);
        assert_eq!(
            k.open_observation_token(s(), 100, &other),
            Err(TokenProblem::Malformed)
        );
    }

    #[test]
    fn fences_bind_session_todo_and_generation_and_are_not_tokens() {
        let k = keys();
        let f = k.fence(s(), &TODO, 3);
        assert!(f.starts_with("wcf1_") && f.len() <= MAX_TOKEN_CHARS, "{f}");
        assert_eq!(k.open_fence(s(), &TODO, &f), Ok(3));
        assert_eq!(
            k.open_fence(s(), &OTHER_TODO, &f),
            Err(TokenProblem::WrongMessage)
        );
        let other = SessionBinding { id: &OTHER, ..s() };
        assert_eq!(
            k.open_fence(other, &TODO, &f),
            Err(TokenProblem::WrongSession)
        );
        // A token is not a fence and a fence is not a token, even under the same secret.
        let t = k.observation_token(s(), 3);
        assert_eq!(k.open_fence(s(), &TODO, &t), Err(TokenProblem::Malformed));
        assert_eq!(
            k.open_observation_token(s(), 100, &f),
            Err(TokenProblem::Malformed)
        );
    }
}
