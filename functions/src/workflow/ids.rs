//! Workflow Session ids: `wc_sess_` and 128 random bits, unguessable because they grant reach.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;

/// Prefix of every Workflow Session id.
pub const PREFIX: &str = "wc_sess_";

/// A syntactically valid Workflow Session id. Validity says nothing about existence.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

impl SessionId {
    /// A fresh id: the prefix and 16 random bytes in unpadded base64url (22 characters).
    pub fn generate() -> SessionId {
        let mut bytes = [0u8; 16];
        rand::rng().fill_bytes(&mut bytes);
        SessionId(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// Accepts `wc_sess_` followed by 22-64 characters of `[A-Za-z0-9_-]` (the stored form).
    pub fn parse(raw: &str) -> Option<SessionId> {
        let rest = raw.strip_prefix(PREFIX)?;
        let ok = (22..=64).contains(&rest.len())
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        ok.then(|| SessionId(raw.to_owned()))
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_parse_and_differ() {
        let a = SessionId::generate();
        let b = SessionId::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), PREFIX.len() + 22);
        assert_eq!(SessionId::parse(a.as_str()), Some(a));
    }

    #[test]
    fn malformed_ids_are_refused() {
        for bad in [
            "",
            "wc_sess_",
            "wc_sess_short",
            "sess_aaaaaaaaaaaaaaaaaaaaaaaa",
            "wc_sess_aaaaaaaaaaaaaaaaaaaaa!",
            "wc_msg_aaaaaaaaaaaaaaaaaaaaaa",
        ] {
            assert!(SessionId::parse(bad).is_none(), "{bad}");
        }
        assert!(SessionId::parse(&format!("wc_sess_{}", "a".repeat(65))).is_none());
        // An audit session UUID is not a Workflow Session id.
        assert!(SessionId::parse("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b").is_none());
    }
}
