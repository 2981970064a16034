//! Secret redaction: everything headed for the ledger, the audit store or a log passes through
//! here first. It removes credentials (bearer tokens, `token=`/`password=`/`secret=` style
//! assignments, client secrets, cloud and forge tokens, webhook URLs, SAS signatures, JWTs,
//! private key blocks, credentials in URLs, bare cloud secret keys, "my password is …" prose)
//! and reads command lines as a person does ([`command`]: `--password X`, `mysql -pX`,
//! `curl -u user:pw`, `aws configure set aws_secret_access_key X`, in argv arrays and in shell
//! text alike). Paths, commands, code and prose stay readable, and so do the look-alikes a
//! person would not take for a secret (a git SHA, `--password-file path`, `-p 8080`).

mod command;

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
const SECRET_KEY: &str = r"(?:pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|account[_-]?key|master[_-]?key|encryption[_-]?key|signing[_-]?key|client[_-]?secret|credentials?|auth[_-]?key|session[_-]?key|signature)";

/// A bare 40-character secret (AWS secret access keys): base64 characters, both cases, and
/// digits or `/`/`+`; a git SHA (lowercase hex), an uppercase fingerprint, a path or a long
/// identifier is not one.
fn bare_secret(c: &Captures<'_>) -> String {
    let s = &c[0];
    let count = |f: fn(&u8) -> bool| s.as_bytes().iter().filter(|b| f(b)).count();
    let upper = count(u8::is_ascii_uppercase);
    let lower = count(u8::is_ascii_lowercase);
    let slashes = count(|b| *b == b'/');
    let pluses = count(|b| *b == b'+');
    let marks = count(u8::is_ascii_digit) + slashes + pluses;
    let secret = s.len() == 40
        && !s.starts_with('/')
        && !s.contains("//")
        && !s.contains('=')
        && upper >= 3
        && lower >= 3
        && marks >= 3
        && slashes <= 3
        && pluses <= 3;
    if secret {
        MARK.to_owned()
    } else {
        s.to_owned()
    }
}

/// "my password is X": the value when it reads as a secret (quoted, or with a digit, a capital
/// after the first letter or a symbol), not as a word ("the token is expired").
fn prose_secret(c: &Captures<'_>) -> String {
    let value = &c[2];
    let quoted = value.starts_with('"') || value.starts_with('\'');
    let bare = value.trim_end_matches(['.', ',', ';', ':', '!', '?', ')']);
    let tail = &value[bare.len()..];
    let secretish = bare.len() >= 4
        && bare != MARK
        && (bare.bytes().any(|b| b.is_ascii_digit())
            || bare.bytes().skip(1).any(|b| b.is_ascii_uppercase())
            || bare.bytes().any(|b| b"!@#$%^&*+/=_~".contains(&b)));
    if quoted {
        let q = &value[..1];
        if value.len() > 2 && value.trim_matches(['"', '\'']) != MARK {
            return format!("{}{q}{MARK}{q}", &c[1]);
        }
        return c[0].to_owned();
    }
    if secretish {
        format!("{}{MARK}{tail}", &c[1])
    } else {
        c[0].to_owned()
    }
}

/// Azure shared access signatures: the `sig=` of a query that also has the SAS version `sv=`
/// (a `sig=` elsewhere is just a parameter).
fn sas_signature(c: &Captures<'_>) -> String {
    let text = &c[0];
    let lower = text.to_ascii_lowercase();
    if !(lower.contains("sv=") && (lower.contains("se=") || lower.contains("sp="))) {
        return text.to_owned();
    }
    static SIG: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)((?-u:\b)sig=)[^&\s\x22'<>#;]+").expect("valid sig rule")
    });
    SIG.replace_all(text, |s: &Captures<'_>| {
        if &s[0][4..] == MARK {
            s[0].to_owned()
        } else {
            format!("{}{MARK}", &s[1])
        }
    })
    .into_owned()
}

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
        r(r"(?-u:\b)AGE-SECRET-KEY-1[0-9A-Z]{50,}(?-u:\b)", whole),
        // Credentials inside URLs: scheme://user:password@host → keep user, drop password.
        r(
            r"(?i)(?-u:\b)([a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s@/]+(@)",
            |c| format!("{}{MARK}{}", &c[1], &c[2]),
        ),
        // A key as a URL's user (Sentry DSNs): scheme://<32 hex>@host.
        r(r"(?i)(?-u:\b)([a-z][a-z0-9+.-]*://)[0-9a-f]{32}(@)", |c| {
            format!("{}{MARK}{}", &c[1], &c[2])
        }),
        // Webhook URLs are their own credential: keep the host and the kind, drop the rest.
        r(
            r"(?i)(?-u:\b)(hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/)[A-Za-z0-9_/-]{8,}",
            keep_first,
        ),
        r(
            r"(?i)(?-u:\b)((?:discord|discordapp)\.com/api/webhooks/\d+/)[A-Za-z0-9_-]{20,}",
            keep_first,
        ),
        r(
            r"(?i)(?-u:\b)(outlook\.office(?:365)?\.com/webhook(?:b2)?/)[A-Za-z0-9@/_-]{20,}",
            keep_first,
        ),
        // Azure SAS tokens (their `sig=`), in URLs and connection strings.
        r(r"[^\s\x22'<>]*(?-u:\b)sig=[^\s\x22'<>]+", sas_signature),
        // Authorization headers and bare bearer/basic credentials.
        r(
            r"(?i)(?-u:\b)((?:authorization|proxy-authorization)\s*[:=]\s*(?:bearer|basic|token|digest)?\s*)[^\s,;]+",
            keep_first,
        ),
        r(
            r"(?i)(?-u:\b)((?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}",
            keep_first,
        ),
        // JSON Web Tokens.
        r(
            r"(?-u:\b)eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+",
            whole,
        ),
        // Well-known token shapes.
        r(
            r"(?-u:\b)(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}(?-u:\b)",
            whole,
        ),
        r(r"(?-u:\b)gh[pousr]_[A-Za-z0-9]{30,}(?-u:\b)", whole),
        r(r"(?-u:\b)github_pat_[A-Za-z0-9_]{20,}(?-u:\b)", whole),
        r(r"(?-u:\b)glpat-[A-Za-z0-9_-]{20,}(?-u:\b)", whole),
        r(
            r"(?-u:\b)gl(?:dt|rt|ptt|cbt|imt|agent|oas|sa|c)[-_][A-Za-z0-9_-]{20,}(?-u:\b)",
            whole,
        ),
        r(r"(?-u:\b)xox[abposre]-[A-Za-z0-9-]{10,}(?-u:\b)", whole),
        r(r"(?-u:\b)xapp-[0-9]-[A-Za-z0-9-]{10,}(?-u:\b)", whole),
        r(
            r"(?-u:\b)(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}(?-u:\b)",
            whole,
        ),
        r(r"(?-u:\b)whsec_[A-Za-z0-9+/=]{20,}", whole),
        r(
            r"(?-u:\b)sk-(?:proj-|ant-(?:api\d\d-)?|svcacct-)?[A-Za-z0-9_-]{20,}(?-u:\b)",
            whole,
        ),
        r(r"(?-u:\b)AIza[0-9A-Za-z_-]{35}(?-u:\b)", whole),
        // Google OAuth access and refresh tokens.
        r(r"(?-u:\b)ya29\.[0-9A-Za-z_-]{20,}", whole),
        r(r"(?-u:\b)1//0[0-9A-Za-z_-]{20,}", whole),
        r(r"(?-u:\b)npm_[A-Za-z0-9]{36}(?-u:\b)", whole),
        r(r"(?-u:\b)pypi-[A-Za-z0-9_-]{40,}(?-u:\b)", whole),
        r(r"(?-u:\b)hf_[A-Za-z0-9]{30,}(?-u:\b)", whole),
        r(r"(?-u:\b)wc[spr]k_[A-Za-z0-9_-]{20,}(?-u:\b)", whole),
        r(
            r"(?-u:\b)SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}(?-u:\b)",
            whole,
        ),
        r(r"(?-u:\b)shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}(?-u:\b)", whole),
        r(r"(?-u:\b)do[opr]_v1_[a-f0-9]{64}(?-u:\b)", whole),
        r(r"(?-u:\b)dapi[a-f0-9]{32}(?:-\d)?(?-u:\b)", whole),
        r(r"(?-u:\b)sq0(?:atp|csp)-[0-9A-Za-z_-]{22,}(?-u:\b)", whole),
        r(r"(?-u:\b)SK[0-9a-f]{32}(?-u:\b)", whole),
        r(r"(?-u:\b)key-[0-9a-f]{32}(?-u:\b)", whole),
        r(r"(?-u:\b)lin_api_[A-Za-z0-9]{40}(?-u:\b)", whole),
        r(r"(?-u:\b)PMAK-[0-9a-f]{24}-[0-9a-f]{34}(?-u:\b)", whole),
        r(r"(?-u:\b)ntn_[A-Za-z0-9]{40,}(?-u:\b)", whole),
        r(r"(?-u:\b)sntry[su]_[A-Za-z0-9+/=_-]{40,}", whole),
        r(r"(?-u:\b)pul-[a-f0-9]{40}(?-u:\b)", whole),
        r(
            r"(?-u:\b)[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_-]{60,}",
            whole,
        ),
        r(
            r"(?-u:\b)dp\.(?:st|ct|sa|scim|audit)\.[A-Za-z0-9_.-]{40,}",
            whole,
        ),
        r(r"(?-u:\b)ATATT3[A-Za-z0-9_=-]{40,}", whole),
        r(r"(?-u:\b)sbp_[a-f0-9]{40}(?-u:\b)", whole),
        r(r"(?-u:\b)LTAI[A-Za-z0-9]{12,20}(?-u:\b)", whole),
        r(
            r"(?-u:\b)(?:fo1_[A-Za-z0-9_-]{43}|fm1[ar]_[A-Za-z0-9+/]{100,}={0,3}|fm2_[A-Za-z0-9+/]{100,}={0,3})",
            whole,
        ),
        r(r"(?-u:\b)EAA[A-Za-z0-9]{90,}", whole),
        r(
            r"(?i)(?-u:\b)((?:AccountKey|SharedAccessKey|SharedSecret)=)[A-Za-z0-9+/=]{20,}",
            keep_first,
        ),
        // key=value / key: value / "key": "value" assignments whose key names a secret. A value
        // that looks like code (a call, an expression) or only points at a secret (`$VAR`) is
        // left alone, and so is a key that holds none (`password_file`, `max_tokens`).
        r(
            &format!(
                r#"(?i)((["']?([A-Za-z0-9_.-]*{SECRET_KEY}[A-Za-z0-9_.-]*)["']?)\s*(?:=|:|:=|=>)\s*)("[^"\n]{{1,}}"|'[^'\n]{{1,}}'|[^\s"',;&)(\]\[{{}}]{{3,}})(\()?"#
            ),
            |c| {
                let value = &c[4];
                // `password = read_password(…)` is code, not a secret.
                if c.get(5).is_some() || command::innocent_key(&c[3]) {
                    return c[0].to_owned();
                }
                let quoted = value.starts_with('"') || value.starts_with('\'');
                let inner = if quoted {
                    &value[1..value.len() - 1]
                } else {
                    value
                };
                match command::secret_start(inner) {
                    None => c[0].to_owned(),
                    Some(from) => {
                        let (q, keep) = if quoted {
                            (&value[..1], &inner[..from])
                        } else {
                            ("", &inner[..from])
                        };
                        format!("{}{q}{keep}{MARK}{q}", &c[1])
                    }
                }
            },
        ),
        // <password>X</password>: an element whose name names a secret.
        r(
            &format!(
                r"(?i)(<([A-Za-z0-9_.:-]*{SECRET_KEY}[A-Za-z0-9_.:-]*)>)([^<\n]+)(</[A-Za-z0-9_.:-]+>)"
            ),
            |c| {
                if command::innocent_key(&c[2]) || &c[3] == MARK {
                    return c[0].to_owned();
                }
                format!("{}{MARK}{}", &c[1], &c[4])
            },
        ),
        // "my api key is X", "the password was X".
        r(
            r#"(?i)(?-u:\b)((?:api[ _-]?key|password|passphrase|passwd|passcode|secret(?: key)?|token|access[ _-]?key|pin|credentials?)\s+(?:is|was|are)\s+)("[^"\n]+"|'[^'\n]+'|[^\s"'<>]+)"#,
            prose_secret,
        ),
        // Bare 40-character secret keys (judged by [`bare_secret`]).
        r(r"[A-Za-z0-9/+=]{40,}", bare_secret),
    ]
});

/// Every rule's pattern, and every pattern under which [`command`] could find a secret, in one
/// set: most text holds no secret, and one pass of the set tells so, where asking the rules one
/// by one is a pass (and a per-thread matcher cache fetch) per rule.
static ANY_RULE: LazyLock<RegexSet> = LazyLock::new(|| {
    let patterns = RULES
        .iter()
        .map(|rule| rule.re.as_str().to_owned())
        .chain(command::trigger_patterns());
    RegexSet::new(patterns).expect("valid redaction rules")
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

/// Applies every rule in order, each to the text the rules before it left, then reads what is
/// left as command lines.
fn apply_rules(text: &str) -> Cow<'_, str> {
    let mut out: Cow<'_, str> = Cow::Borrowed(text);
    for rule in RULES.iter() {
        if rule.re.is_match(&out) {
            let replaced = rule
                .re
                .replace_all(&out, |c: &Captures<'_>| (rule.replace)(c))
                .into_owned();
            if replaced != *out {
                out = Cow::Owned(replaced);
            }
        }
    }
    match redact_command_text(&out) {
        Some(done) => Cow::Owned(done),
        None => out,
    }
}

/// Shell text (or prose) split into words: each word's byte span without its quotes, and the
/// separators `;`, `|`, `&`, `(`, `)`, `` ` `` and newlines as words of their own.
fn words(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\n' || matches!(b, b';' | b'|' | b'&' | b'(' | b')' | b'`') {
            let start = i;
            while i < bytes.len()
                && matches!(bytes[i], b';' | b'|' | b'&' | b'(' | b')' | b'`' | b'\n')
            {
                i += 1;
            }
            spans.push((start, i));
        } else if b.is_ascii_whitespace() {
            i += 1;
        } else if (b == b'"' || b == b'\'')
            && let Some(close) = text[i + 1..].find(b as char)
        {
            spans.push((i + 1, i + 1 + close));
            i += close + 2;
        } else {
            let start = i;
            while i < bytes.len()
                && !bytes[i].is_ascii_whitespace()
                && !matches!(bytes[i], b';' | b'|' | b'&' | b'(' | b')' | b'`')
            {
                i += 1;
            }
            spans.push((start, i));
        }
    }
    spans
}

/// `text` with the secret words of its command lines replaced, or `None` when it has none.
fn redact_command_text(text: &str) -> Option<String> {
    let spans = words(text);
    let list: Vec<&str> = spans.iter().map(|&(a, b)| &text[a..b]).collect();
    let mut hides = command::secret_words(&list);
    if hides.is_empty() {
        return None;
    }
    hides.sort_by_key(|h| (h.word, h.from));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for h in hides {
        let from = spans[h.word].0 + h.from;
        let to = spans[h.word].0 + h.to;
        if from < at {
            continue;
        }
        out.push_str(&text[at..from]);
        out.push_str(MARK);
        at = to;
    }
    out.push_str(&text[at..]);
    Some(out)
}

/// Redacts an argv-like list of words: each word on its own, then the list as one command line
/// (`["mysql", "--password", "X"]` hides `X`).
fn redact_words(items: &mut [Value]) {
    items.iter_mut().for_each(redact_json);
    if items.len() < 2 || !items.iter().all(Value::is_string) {
        return;
    }
    // Each way [`command::secret_words`] can hide a word needs some word to match one of its
    // triggers (a secret-naming flag, a known tool, `set`/`config`).
    static TRIGGER: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(&command::trigger_patterns().join("|")).expect("valid trigger rules")
    });
    if !items
        .iter()
        .any(|v| v.as_str().is_some_and(|s| TRIGGER.is_match(s)))
    {
        return;
    }
    let list: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
    let hides = command::secret_words(&list);
    let mut changed: Vec<(usize, String)> = Vec::new();
    for h in hides {
        let word = list[h.word];
        changed.push((
            h.word,
            format!("{}{MARK}{}", &word[..h.from], &word[h.to..]),
        ));
    }
    for (i, text) in changed {
        items[i] = Value::String(text);
    }
}

fn secret_key(key: &str) -> bool {
    static KEY: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(&format!("(?i){SECRET_KEY}")).expect("valid key rule"));
    KEY.is_match(key) && !command::innocent_key(key)
}

/// Redacts every string in a JSON value, reads arrays of strings as command lines (argv), and
/// replaces the whole value of any object member whose key names a secret (`password`,
/// `api_key`, `client_secret`, …).
pub fn redact_json(value: &mut Value) {
    match value {
        Value::String(s) => {
            if let Cow::Owned(r) = redact(s) {
                *s = r;
            }
        }
        Value::Array(items) => redact_words(items),
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
    pub(crate) const CORPUS: &[(&str, &str)] = include!("../../tests/data/secret_corpus.rs");

    #[test]
    fn the_corpus_loses_every_secret() {
        assert!(CORPUS.len() >= 30);
        for (input, secret) in CORPUS {
            let out = redact(input);
            assert!(!out.contains(secret), "secret survived in {out:?}");
            assert!(out.contains(MARK), "nothing marked in {out:?}");
        }
    }

    /// (words holding a secret, the secret, a look-alike's words, the look-alike's text).
    pub(crate) const SHAPES: &[(&[&str], &str, &[&str], &str)] =
        include!("../../tests/data/secret_shapes.rs");

    /// The words as stored: one string, or an argv array.
    fn stored(words: &[&str]) -> String {
        let mut v = if words.len() == 1 {
            Value::String(words[0].to_owned())
        } else {
            serde_json::json!(words)
        };
        redact_json(&mut v);
        match v {
            Value::String(s) => s,
            other => other.to_string(),
        }
    }

    #[test]
    fn every_secret_shape_is_hidden_and_every_look_alike_kept() {
        assert!(SHAPES.len() >= 60);
        let mut failures = Vec::new();
        for (words, secret, look, keep) in SHAPES {
            // As given (a string or an argv), and as one line of shell text.
            for text in [stored(words), redact(&words.join(" ")).into_owned()] {
                if text.contains(secret) || !text.contains(MARK) {
                    failures.push(format!("secret {secret:?} survived: {text}"));
                }
            }
            for text in [stored(look), redact(&look.join(" ")).into_owned()] {
                if !text.contains(keep) || text.contains(MARK) {
                    failures.push(format!("look-alike {keep:?} lost: {text}"));
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
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
            "enabled": true,
            "tests": {"passed": 7, "passed_delta": -1},
            "passes_password": "pw-value-2"
        });
        redact_json(&mut v);
        let s = v.to_string();
        assert!(
            !s.contains("abcdef123456") && !s.contains("pw-value-1") && !s.contains("12345678"),
            "{s}"
        );
        assert!(!s.contains("pw-value-2"), "{s}");
        assert!(s.contains("fine") && s.contains("\"enabled\":true"), "{s}");
        // A count of passed tests is not a password.
        assert_eq!(
            v["tests"],
            serde_json::json!({"passed": 7, "passed_delta": -1})
        );
    }

    /// The texts the tests above use, secret and ordinary.
    fn samples() -> Vec<String> {
        let mut all: Vec<String> = CORPUS
            .iter()
            .map(|(input, _)| (*input).to_owned())
            .collect();
        for (words, _, look, _) in SHAPES {
            all.push(words.join(" "));
            all.push(look.join(" "));
        }
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
        for text in samples() {
            let once = redact(&text).into_owned();
            assert_eq!(redact(&once), once);
        }
    }
}
