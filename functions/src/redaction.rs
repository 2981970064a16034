//! Secret redaction: everything headed for the ledger, the audit store or a log passes through
//! here first. It removes credentials (bearer tokens, `token=`/`password=`/`secret=` style
//! assignments, client secrets, cloud and forge tokens, JWTs, private key blocks, credentials in
//! URLs) and leaves paths, commands, code and prose readable.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex, RegexSet};
use serde_json::Value;

/// What replaces a secret.
pub const MARK: &str = "[REDACTED]";

struct Rule {
    re: Regex,
    replace: fn(&Captures<'_>) -> String,
}

fn whole(_: &Captures<'_>) -> String {
    MARK.to_owned()
}

fn keep_first(c: &Captures<'_>) -> String {
    format!("{}{MARK}", &c[1])
}

/// Key names whose values are secrets (matched case-insensitively as part of a key).
const SECRET_KEY: &str = r"(?:pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|client[_-]?secret|credentials?|auth[_-]?key|session[_-]?key|signature)";

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let r = |re: &str, replace: fn(&Captures<'_>) -> String| Rule {
        re: Regex::new(re).expect("valid redaction rule"),
        replace,
    };
    vec![
        // Private key blocks, terminated or not.
        r(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
            whole,
        ),
        // Credentials inside URLs: scheme://user:password@host → keep user, drop password.
        r(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s@/]+(@)", |c| {
            format!("{}{MARK}{}", &c[1], &c[2])
        }),
        // Authorization headers and bare bearer/basic credentials.
        r(
            r"(?i)\b((?:authorization|proxy-authorization)\s*[:=]\s*(?:bearer|basic|token|digest)?\s*)[^\s,;]+",
            keep_first,
        ),
        r(
            r"(?i)\b((?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}",
            keep_first,
        ),
        // JSON Web Tokens.
        r(
            r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+",
            whole,
        ),
        // Well-known token shapes.
        r(
            r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b",
            whole,
        ),
        r(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b", whole),
        r(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b", whole),
        r(r"\bglpat-[A-Za-z0-9_-]{20,}\b", whole),
        r(
            r"\bgl(?:dt|rt|ptt|cbt|imt|agent|oas)-[A-Za-z0-9_-]{20,}\b",
            whole,
        ),
        r(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b", whole),
        r(r"\bxapp-[0-9]-[A-Za-z0-9-]{10,}\b", whole),
        r(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b", whole),
        r(
            r"\bsk-(?:proj-|ant-(?:api\d\d-)?|svcacct-)?[A-Za-z0-9_-]{20,}\b",
            whole,
        ),
        r(r"\bAIza[0-9A-Za-z_-]{35}\b", whole),
        r(r"\bnpm_[A-Za-z0-9]{36}\b", whole),
        r(r"\bpypi-[A-Za-z0-9_-]{40,}\b", whole),
        r(r"\bhf_[A-Za-z0-9]{30,}\b", whole),
        r(r"\bwc[spr]k_[A-Za-z0-9_-]{20,}\b", whole),
        r(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}\b", whole),
        r(r"(?i)\bAccountKey=[A-Za-z0-9+/=]{20,}", |_| {
            format!("AccountKey={MARK}")
        }),
        // key=value / key: value / "key": "value" assignments whose key names a secret. A value
        // that looks like code (a call, an expression) is left alone.
        r(
            &format!(
                r#"(?i)((?:["']?[A-Za-z0-9_.-]*{SECRET_KEY}[A-Za-z0-9_.-]*["']?)\s*(?:=|:|:=|=>)\s*)("[^"\n]{{1,}}"|'[^'\n]{{1,}}'|[^\s"',;&)(\]\[{{}}]{{3,}})(\()?"#
            ),
            |c| {
                let value = &c[2];
                // `password = read_password(…)` is code, not a secret.
                if c.get(3).is_some() {
                    return c[0].to_owned();
                }
                if value == MARK || value.trim_matches(['"', '\'']) == MARK {
                    return c[0].to_owned();
                }
                let quoted = value.starts_with('"') || value.starts_with('\'');
                if quoted {
                    let q = &value[..1];
                    format!("{}{q}{MARK}{q}", &c[1])
                } else {
                    format!("{}{MARK}", &c[1])
                }
            },
        ),
        // Command-line flags that carry secrets: --password x, --token=x.
        r(
            &format!(r"(?i)(--?[A-Za-z0-9-]*{SECRET_KEY}[A-Za-z0-9-]*(?:=|\s+))[^\s-][^\s]*"),
            keep_first,
        ),
    ]
});

/// Every rule's pattern in one set: most text holds no secret, and one pass of the set tells
/// so, where asking the rules one by one is a pass (and a per-thread matcher cache fetch) per
/// rule.
static ANY_RULE: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(RULES.iter().map(|rule| rule.re.as_str())).expect("valid redaction rules")
});

/// Redacts `text`; borrowed when nothing matched.
pub fn redact(text: &str) -> Cow<'_, str> {
    // A rule can only act where one matches the text as given: later rules see earlier
    // replacements, but with no rule matching there are none.
    if !ANY_RULE.is_match(text) {
        return Cow::Borrowed(text);
    }
    apply_rules(text)
}

/// Applies every rule in order, each to the text the rules before it left.
fn apply_rules(text: &str) -> Cow<'_, str> {
    let mut out: Cow<'_, str> = Cow::Borrowed(text);
    for rule in RULES.iter() {
        if rule.re.is_match(&out) {
            let replaced = rule
                .re
                .replace_all(&out, |c: &Captures<'_>| (rule.replace)(c))
                .into_owned();
            out = Cow::Owned(replaced);
        }
    }
    out
}

fn secret_key(key: &str) -> bool {
    static KEY: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(&format!("(?i){SECRET_KEY}")).expect("valid key rule"));
    KEY.is_match(key)
}

/// Redacts every string in a JSON value, and replaces the whole value of any object member
/// whose key names a secret (`password`, `api_key`, `client_secret`, …).
pub fn redact_json(value: &mut Value) {
    match value {
        Value::String(s) => {
            if let Cow::Owned(r) = redact(s) {
                *s = r;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_json),
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if secret_key(k)
                    && !matches!(
                        v,
                        Value::Null | Value::Bool(_) | Value::Object(_) | Value::Array(_)
                    )
                {
                    *v = Value::String(MARK.to_owned());
                } else {
                    redact_json(v);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (input, the secret that must be gone). Every shape here must be removed.
    pub(crate) const CORPUS: &[(&str, &str)] = include!("../tests/data/secret_corpus.rs");

    #[test]
    fn the_corpus_loses_every_secret() {
        assert!(CORPUS.len() >= 30);
        for (input, secret) in CORPUS {
            let out = redact(input);
            assert!(!out.contains(secret), "secret survived in {out:?}");
            assert!(out.contains(MARK), "nothing marked in {out:?}");
        }
    }

    #[test]
    fn ordinary_work_stays_readable() {
        for text in [
            "cargo test -p wc-store --features testing -- cas::tests",
            "fix the bug in /home/dev/src/lib.rs and C:\\Users\\dev\\main.rs",
            "see file:///srv/repo/README.md and \\\\server\\share\\x",
            "let password = read_password_from(stdin);",
            "git log --oneline | head -20 && grep -rn 'token' src/",
            "The tokenizer splits input; passwords must be hashed with argon2.",
            "```rust\nfn main() { println!(\"hi\"); }\n```",
            "https://example.com/docs?page=2",
            "max_tokens is a parameter of the model API",
        ] {
            assert_eq!(redact(text), text, "changed ordinary text");
        }
    }

    #[test]
    fn json_values_and_secret_keys_are_redacted() {
        let mut v = serde_json::json!({
            "instruction": "use token=abcdef123456 please",
            "nested": [{"password": "pw-value-1"}, {"note": "fine"}],
            "api_key": 12345678,
            "enabled": true
        });
        redact_json(&mut v);
        let s = v.to_string();
        assert!(
            !s.contains("abcdef123456") && !s.contains("pw-value-1") && !s.contains("12345678"),
            "{s}"
        );
        assert!(s.contains("fine") && s.contains("\"enabled\":true"), "{s}");
    }

    /// The texts the tests above use, secret and ordinary.
    fn samples() -> Vec<String> {
        let mut all: Vec<String> = CORPUS
            .iter()
            .map(|(input, _)| (*input).to_owned())
            .collect();
        all.extend(
            [
                "let password = read_password_from(stdin);",
                "git log --oneline | head -20 && grep -rn 'token' src/",
                "https://example.com/docs?page=2",
                "benchmark note",
                "",
            ]
            .map(str::to_owned),
        );
        all
    }

    #[test]
    fn the_one_pass_check_never_changes_a_result() {
        for text in samples() {
            assert_eq!(redact(&text), apply_rules(&text), "for {text:?}");
        }
    }

    proptest::proptest! {
        /// Texts mixing secrets, ordinary words and arbitrary characters redact exactly as the
        /// rules applied one by one do.
        #[test]
        fn mixed_texts_redact_as_the_rules_one_by_one(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(samples()),
                    "[ -~\n]{0,24}",
                    "\\PC{0,8}",
                ],
                0..6,
            ),
            glue in proptest::sample::select(vec!["", " ", "\n", "=", ": ", "\"", "@"]),
        ) {
            let text = parts.join(glue);
            proptest::prop_assert_eq!(redact(&text), apply_rules(&text));
        }
    }

    #[test]
    fn redaction_is_idempotent() {
        for (input, _) in CORPUS {
            let once = redact(input).into_owned();
            assert_eq!(redact(&once), once);
        }
    }
}
