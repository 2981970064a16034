//! Bearer token text: generation, shape checks and digests.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};

use wc_store::credentials::CredentialKind;

/// Longest token accepted in a header; longer ones are refused without a lookup.
pub const MAX_TOKEN_LEN: usize = 512;
/// Shortest caller-chosen token (`WC_LOCAL_TOKEN` or `wc-local --token-file`) accepted.
pub const MIN_TOKEN_LEN: usize = 20;

/// Prefix of generated tokens of each kind; it makes them recognisable to secret scanners
/// and to redaction.
pub fn prefix(kind: CredentialKind) -> &'static str {
    match kind {
        CredentialKind::SharedKey => "wcsk_",
        CredentialKind::Project => "wcpk_",
    }
}

/// A fresh token: the kind's prefix and 256 random bits in unpadded base64url.
pub fn generate(kind: CredentialKind) -> String {
    generate_with_prefix(prefix(kind))
}

/// A fresh token with `prefix` and 256 random bits in unpadded base64url.
pub fn generate_with_prefix(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{prefix}{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// Whether `token` could be a token at all: visible ASCII, bounded length. Anything else is
/// refused before touching the database.
pub fn is_plausible(token: &str) -> bool {
    (MIN_TOKEN_LEN..=MAX_TOKEN_LEN).contains(&token.len())
        && token.bytes().all(|b| b.is_ascii_graphic())
}

/// SHA-256 of the token text: the only form in which a secret is stored.
pub fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_are_distinct_prefixed_and_plausible() {
        let a = generate(CredentialKind::SharedKey);
        let b = generate(CredentialKind::SharedKey);
        assert_ne!(a, b);
        assert!(a.starts_with("wcsk_") && a.len() == 5 + 43, "{a}");
        assert!(generate(CredentialKind::Project).starts_with("wcpk_"));
        assert!(is_plausible(&a));
    }

    #[test]
    fn implausible_tokens_are_refused() {
        assert!(!is_plausible("short"));
        assert!(!is_plausible(&"x".repeat(MAX_TOKEN_LEN + 1)));
        assert!(!is_plausible("has a space in it, which is not allowed"));
        assert!(!is_plausible("unicode-é-is-not-a-token-char"));
    }

    #[test]
    fn digest_is_sha256_of_the_text() {
        assert_eq!(
            hex::encode(digest("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
