//! Command lines read as a person reads them. A secret is often not one word but two: a flag
//! that names a secret and the word after it (`--password X`, `-storepass X`), a tool's own
//! password flag (`sshpass -p X`, `mysql -pX`, `curl -u user:pw`), or a setting named in one
//! word and given in the next (`aws configure set aws_secret_access_key X`). The same analysis
//! serves argv elements and shell text split into words.

use std::sync::LazyLock;

use regex::Regex;

use super::{MARK, SECRET_KEY};

/// The secret part of one word: bytes `from..to` of word `word`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Hide {
    pub word: usize,
    pub from: usize,
    pub to: usize,
}

/// How a tool takes its password.
#[derive(Debug, Clone, Copy)]
enum Takes {
    /// `-p X`: the next word.
    Next(&'static str),
    /// `-pX`: the rest of the word only.
    Attached(&'static str),
    /// `-p X` or `-pX`.
    NextOrAttached(&'static str),
    /// `-p X`, only in a `login` command (`docker login -p X`, not `docker run -p 8080:80`).
    NextInLogin(&'static str),
    /// `-u user:pw` / `--user user:pw` / `-uuser:pw`: what follows the first `:`.
    UserColon(&'static str),
    /// `-U user%pw`: what follows the first `%` (Samba tools).
    UserPercent(&'static str),
    /// `/p:X` (FreeRDP).
    SlashColon(&'static str),
    /// `user/pw@db` as a positional word (Oracle tools): between `/` and `@`.
    Connect,
    /// With a batch flag (`-b`, `-nb`, `-bc`), the last positional word (`htpasswd -b f u pw`).
    LastPositionalInBatch,
    /// The first positional word after `login` without a `=` (`vault login TOKEN`).
    AfterLogin,
    /// `-b X` / `--body X` in `gh secret set`.
    BodyOfSecretSet,
}

struct Tool {
    names: &'static [&'static str],
    takes: &'static [Takes],
}

const TOOLS: &[Tool] = &[
    Tool {
        names: &[
            "mysql",
            "mysqldump",
            "mysqladmin",
            "mysqlimport",
            "mysqlshow",
            "mysqlcheck",
            "mysqlpump",
            "mysqlbinlog",
            "mysqlsh",
            "mariadb",
            "mariadb-dump",
            "mariadb-admin",
        ],
        // `-p X` makes the client prompt and take X for a database, but people write it
        // meaning the password: the word is hidden either way.
        takes: &[Takes::NextOrAttached("-p")],
    },
    Tool {
        names: &["7z", "7za", "7zr", "rar", "unrar"],
        takes: &[Takes::Attached("-p")],
    },
    Tool {
        names: &["sshpass"],
        takes: &[Takes::NextOrAttached("-p")],
    },
    Tool {
        names: &[
            "docker", "podman", "nerdctl", "buildah", "skopeo", "helm", "oras", "crane", "az",
        ],
        takes: &[Takes::NextInLogin("-p")],
    },
    Tool {
        names: &[
            "mongo",
            "mongosh",
            "mongodump",
            "mongorestore",
            "mongoexport",
            "mongoimport",
            "mongostat",
            "mongotop",
            "mongofiles",
        ],
        takes: &[Takes::Next("-p")],
    },
    Tool {
        names: &["redis-cli", "valkey-cli", "keydb-cli"],
        takes: &[Takes::NextOrAttached("-a")],
    },
    Tool {
        names: &[
            "ldapsearch",
            "ldapadd",
            "ldapmodify",
            "ldapdelete",
            "ldapwhoami",
            "ldappasswd",
            "ldapcompare",
            "ldapmodrdn",
            "ldapexop",
        ],
        takes: &[Takes::NextOrAttached("-w")],
    },
    Tool {
        names: &["sqlcmd", "bcp", "osql"],
        takes: &[Takes::NextOrAttached("-P")],
    },
    Tool {
        names: &["zip", "unzip", "zipcloak"],
        takes: &[Takes::Next("-P")],
    },
    Tool {
        names: &["ssh-keygen"],
        takes: &[Takes::Next("-N"), Takes::Next("-P")],
    },
    Tool {
        names: &["security"],
        takes: &[Takes::Next("-w")],
    },
    Tool {
        names: &["openssl"],
        takes: &[Takes::Next("-k")],
    },
    Tool {
        names: &["curl"],
        takes: &[
            Takes::UserColon("-u"),
            Takes::UserColon("--user"),
            Takes::UserColon("-U"),
            Takes::UserColon("--proxy-user"),
        ],
    },
    Tool {
        names: &["smbclient", "rpcclient", "smbcacls", "smbget"],
        takes: &[Takes::UserPercent("-U"), Takes::UserPercent("--user")],
    },
    Tool {
        names: &["xfreerdp", "xfreerdp3", "wlfreerdp", "sdl-freerdp"],
        takes: &[Takes::SlashColon("/p:")],
    },
    Tool {
        names: &["sqlplus", "sqlldr", "expdp", "impdp", "rman"],
        takes: &[Takes::Connect],
    },
    Tool {
        names: &["htpasswd"],
        takes: &[Takes::LastPositionalInBatch],
    },
    Tool {
        names: &["vault"],
        takes: &[Takes::AfterLogin],
    },
    Tool {
        names: &["gh"],
        takes: &[Takes::BodyOfSecretSet],
    },
];

fn tool(word: &str) -> Option<&'static Tool> {
    let base = word.rsplit(['/', '\\']).next().unwrap_or(word);
    let base = base.strip_suffix(".exe").unwrap_or(base);
    TOOLS
        .iter()
        .find(|t| t.names.iter().any(|n| n.eq_ignore_ascii_case(base)))
}

/// A pattern that matches wherever [`secret_words`] could hide anything (a secret-naming flag,
/// a known tool's name, a `set`/`config` command), so text without a match skips the analysis.
pub(super) fn trigger_patterns() -> Vec<String> {
    let names: Vec<String> = TOOLS
        .iter()
        .flat_map(|t| t.names.iter().map(|n| regex::escape(n)))
        .collect();
    vec![
        format!(r"(?i)-[A-Za-z0-9_.-]*{SECRET_KEY}"),
        format!(r"(?i)(?-u:\b)(?:{})(?-u:\b)", names.join("|")),
        r"(?i)(?-u:\b)(?:set|config)(?-u:\b)".to_owned(),
    ]
}

/// Whether a word separates commands (`;`, `|`, `&&`, a newline, …): a tool's flags end there.
pub(super) fn is_separator(word: &str) -> bool {
    !word.is_empty()
        && word
            .bytes()
            .all(|b| matches!(b, b';' | b'|' | b'&' | b'(' | b')' | b'`' | b'\n'))
}

/// Whether a flag or setting name, though it names a secret, holds none: where the secret is
/// (`--password-file`, `--token-env`), a boolean (`--no-password`, `--password-stdin`), an
/// identifier (`--secret-id`), or a count (`--max-tokens`).
pub(super) fn innocent_key(name: &str) -> bool {
    let lower = name.trim_start_matches('-').to_ascii_lowercase();
    let parts: Vec<&str> = lower
        .split(['-', '_', '.'])
        .filter(|p| !p.is_empty())
        .collect();
    const LAST: &[&str] = &[
        "file", "files", "path", "dir", "stdin", "fd", "env", "var", "id", "ids", "name", "arn",
        "ttl", "length", "len", "prompt", "command", "cmd", "helper", "type", "policy", "expiry",
        "expires", "count", "limit", "url", "uri", "endpoint", "source", "mode", "auth",
    ];
    const FIRST: &[&str] = &[
        "no", "ask", "prompt", "max", "min", "num", "has", "is", "show", "require", "use",
    ];
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    // `SharedAccessKeyName`, `passwordFile`: the suffix of a run-together name counts too.
    const SUFFIX: &[&str] = &[
        "name", "file", "path", "stdin", "env", "arn", "url", "uri", "ttl", "type", "helper",
        "prompt", "policy", "expiry", "length", "count", "limit", "id",
    ];
    if LAST.contains(last) || FIRST.contains(first) || SUFFIX.iter().any(|x| last.ends_with(x)) {
        return true;
    }
    // Words that only contain a secret's name (`max_tokens`, `tokenizer`, `--bypass-cache`,
    // `passthrough`): without them, does the name still name a secret (`tokenizer_secret`)?
    static KEY: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(&format!("(?i){SECRET_KEY}")).expect("valid key rule"));
    const NOT_SECRETS: &[&str] = &[
        "tokens",
        "tokeniz",
        "bypass",
        "passthrough",
        "passenger",
        "passive",
        "compass",
        "passage",
        "surpass",
        "passport",
        // Test counts (`passed`, `passed_delta`) and verdicts name no password.
        "passed",
        "passes",
    ];
    if !NOT_SECRETS.iter().any(|w| lower.contains(w)) {
        return false;
    }
    let mut rest = lower.clone();
    for w in NOT_SECRETS {
        rest = rest.replace(w, " ");
    }
    !KEY.is_match(&rest)
}

/// Where a value given to a secret-naming flag or key is itself a secret: `None` when it only
/// points at one (`$VAR`, `${VAR}`, `env:VAR`, `file:path`, `stdin`); `Some(n)` when the secret
/// starts at byte `n` (`pass:X` hides `X`).
pub(super) fn secret_start(value: &str) -> Option<usize> {
    static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$\{\{.*\}\}|\$\(.*\)|%[A-Za-z_][A-Za-z0-9_]*%|env:\S+|file:\S+|fd:\d+|stdin|-)$")
            .expect("valid reference rule")
    });
    if value.is_empty() || value == MARK || REFERENCE.is_match(value) {
        return None;
    }
    if let Some(rest) = value.strip_prefix("pass:") {
        return (!rest.is_empty() && rest != MARK).then_some(5);
    }
    Some(0)
}

fn secret_flag(word: &str) -> bool {
    static FLAG: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(&format!(
            r"(?i)^-{{1,2}}[A-Za-z0-9_.-]*{SECRET_KEY}[A-Za-z0-9_.-]*$"
        ))
        .expect("valid flag rule")
    });
    FLAG.is_match(word) && !innocent_key(word)
}

fn secret_setting(word: &str) -> bool {
    static SETTING: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(&format!(
            r"(?i)^[A-Za-z0-9_.:/@-]*{SECRET_KEY}[A-Za-z0-9_.-]*$"
        ))
        .expect("valid setting rule")
    });
    !word.starts_with('-') && SETTING.is_match(word) && !innocent_key(word)
}

/// A word that reads as the next flag rather than as a value (`--verbose`, `-v`).
fn looks_like_flag(word: &str) -> bool {
    word.starts_with("--") || (word.len() == 2 && word.starts_with('-') && word != "--")
}

/// The secret parts of `words`, a command line split into words (argv, or shell text with
/// separators as words of their own).
pub(super) fn secret_words(words: &[&str]) -> Vec<Hide> {
    let mut hides = Vec::new();
    let mut start = 0;
    while start < words.len() {
        let end = words[start..]
            .iter()
            .position(|w| is_separator(w))
            .map_or(words.len(), |p| start + p);
        segment(words, start, end, &mut hides);
        start = end + 1;
    }
    hides
}

/// One command: `words[start..end]`.
fn segment(words: &[&str], start: usize, end: usize, hides: &mut Vec<Hide>) {
    let hide_value = |hides: &mut Vec<Hide>, i: usize| {
        if let Some(w) = words.get(i).filter(|_| i < end)
            && !looks_like_flag(w)
            && let Some(from) = secret_start(w)
        {
            hides.push(Hide {
                word: i,
                from,
                to: w.len(),
            });
        }
    };
    let mut current: Option<(usize, &'static Tool)> = None;
    let mut i = start;
    while i < end {
        let w = words[i];
        if !w.starts_with('-')
            && let Some(t) = tool(w)
        {
            if let Some((at, prev)) = current {
                finish_tool(words, at, i, prev, hides);
            }
            current = Some((i, t));
            i += 1;
            continue;
        }
        if secret_flag(w) {
            hide_value(hides, i + 1);
            i += past_value(words, i, end);
            continue;
        }
        let before = &words[start..i];
        if secret_setting(w) && before.iter().any(|b| matches!(*b, "set" | "config")) {
            hide_value(hides, i + 1);
            i += past_value(words, i, end);
            continue;
        }
        if let Some((at, t)) = current {
            let in_login = words[at..i].contains(&"login");
            if let Some(skip) = tool_word(words, i, end, t, in_login, hides) {
                i += skip;
                continue;
            }
        }
        i += 1;
    }
    if let Some((at, t)) = current {
        finish_tool(words, at, end, t, hides);
    }
}

/// How many words a flag at `words[i]` and its value take: one when the next word is itself a
/// flag (the value was left out), so that flag is read too.
fn past_value(words: &[&str], i: usize, end: usize) -> usize {
    if i + 1 < end && looks_like_flag(words[i + 1]) {
        1
    } else {
        2
    }
}

/// A tool's own password flag at `words[i]`: how many words it used, when it was one.
fn tool_word(
    words: &[&str],
    i: usize,
    end: usize,
    t: &Tool,
    in_login: bool,
    hides: &mut Vec<Hide>,
) -> Option<usize> {
    let w = words[i];
    let next = words.get(i + 1).copied().filter(|_| i + 1 < end);
    let hide_next = |hides: &mut Vec<Hide>, from: usize, to: usize| {
        if let Some(n) = next
            && n != MARK
            && from < to
        {
            hides.push(Hide {
                word: i + 1,
                from,
                to,
            });
        }
    };
    for takes in t.takes {
        match *takes {
            Takes::Next(flag) | Takes::NextOrAttached(flag) if w == flag => {
                if let Some(n) = next
                    && !looks_like_flag(n)
                {
                    hide_next(hides, 0, n.len());
                }
                return Some(past_value(words, i, end));
            }
            Takes::NextInLogin(flag) if in_login && w == flag => {
                if let Some(n) = next
                    && !looks_like_flag(n)
                {
                    hide_next(hides, 0, n.len());
                }
                return Some(past_value(words, i, end));
            }
            Takes::Attached(flag) | Takes::NextOrAttached(flag)
                if w.len() > flag.len() && w.starts_with(flag) && !w.starts_with("--") =>
            {
                if &w[flag.len()..] != MARK {
                    hides.push(Hide {
                        word: i,
                        from: flag.len(),
                        to: w.len(),
                    });
                }
                return Some(1);
            }
            Takes::UserColon(flag) | Takes::UserPercent(flag) => {
                let sep = if matches!(takes, Takes::UserColon(_)) {
                    ':'
                } else {
                    '%'
                };
                if w == flag {
                    if let Some(n) = next
                        && let Some(at) = n.find(sep)
                        && &n[at + 1..] != MARK
                    {
                        hide_next(hides, at + 1, n.len());
                    }
                    return Some(past_value(words, i, end));
                }
                let attached = if flag.starts_with("--") {
                    w.strip_prefix(flag).and_then(|r| r.strip_prefix('='))
                } else {
                    w.strip_prefix(flag)
                };
                if let Some(rest) = attached.filter(|r| !r.is_empty())
                    && let Some(at) = rest.find(sep)
                    && &rest[at + 1..] != MARK
                    && at + 1 < rest.len()
                {
                    let offset = w.len() - rest.len();
                    hides.push(Hide {
                        word: i,
                        from: offset + at + 1,
                        to: w.len(),
                    });
                    return Some(1);
                }
            }
            Takes::SlashColon(prefix) if w.len() > prefix.len() && w.starts_with(prefix) => {
                if &w[prefix.len()..] != MARK {
                    hides.push(Hide {
                        word: i,
                        from: prefix.len(),
                        to: w.len(),
                    });
                }
                return Some(1);
            }
            Takes::BodyOfSecretSet
                if matches!(w, "-b" | "--body") && {
                    // This command's words only, not an earlier command's.
                    let from = words[..i].iter().rposition(|w| is_separator(w));
                    let own = &words[from.map_or(0, |p| p + 1)..i];
                    own.contains(&"secret") && own.contains(&"set")
                } =>
            {
                if let Some(n) = next {
                    hide_next(hides, 0, n.len());
                }
                return Some(past_value(words, i, end));
            }
            _ => {}
        }
    }
    None
}

/// What a tool hides once its whole command is known: `words[at]` is the tool, `end` the end
/// of its words.
fn finish_tool(words: &[&str], at: usize, end: usize, t: &Tool, hides: &mut Vec<Hide>) {
    let args = &words[at + 1..end];
    for takes in t.takes {
        match takes {
            Takes::LastPositionalInBatch => {
                let batch = args.iter().any(|a| {
                    a.starts_with('-')
                        && !a.starts_with("--")
                        && a[1..].bytes().all(|b| b.is_ascii_alphabetic())
                        && a.contains('b')
                });
                let last = args.iter().rposition(|a| !a.starts_with('-'));
                if batch
                    && let Some(p) = last
                    && args[p] != MARK
                    && args.iter().filter(|a| !a.starts_with('-')).count() >= 2
                {
                    hides.push(Hide {
                        word: at + 1 + p,
                        from: 0,
                        to: args[p].len(),
                    });
                }
            }
            Takes::Connect => {
                // Only the first positional word is a connect string (`scott/tiger@db`); a
                // later one is a script (`@scripts/run.sql`).
                if let Some(p) = args.iter().position(|a| !a.starts_with('-'))
                    && !args[p].starts_with(['/', '@', '.'])
                    && let Some(slash) = args[p].find('/')
                {
                    let w = args[p];
                    let to = w[slash..].find('@').map_or(w.len(), |a| slash + a);
                    if slash + 1 < to && &w[slash + 1..to] != MARK && !w.contains("://") {
                        hides.push(Hide {
                            word: at + 1 + p,
                            from: slash + 1,
                            to,
                        });
                    }
                }
            }
            Takes::AfterLogin => {
                if let Some(l) = args.iter().position(|a| *a == "login")
                    && let Some(p) = args[l + 1..]
                        .iter()
                        .position(|a| !a.starts_with('-') && !a.contains('='))
                    && args[l + 1 + p] != MARK
                {
                    let word = at + 2 + l + p;
                    hides.push(Hide {
                        word,
                        from: 0,
                        to: words[word].len(),
                    });
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hidden(words: &[&str]) -> Vec<String> {
        secret_words(words)
            .into_iter()
            .map(|h| words[h.word][h.from..h.to].to_owned())
            .collect()
    }

    #[test]
    fn a_flag_naming_a_secret_hides_the_next_word() {
        assert_eq!(hidden(&["redis-cli", "--pass", "pw0"]), ["pw0"]);
        assert_eq!(
            hidden(&["tool", "--bypass-cache", "--passthrough", "x"]),
            Vec::<String>::new()
        );
        assert_eq!(hidden(&["tool", "--password", "pw1"]), ["pw1"]);
        assert_eq!(hidden(&["tool", "-storepass", "pw2"]), ["pw2"]);
        assert_eq!(
            hidden(&["tool", "--password-file", "/run/secrets/db"]),
            Vec::<String>::new()
        );
        assert_eq!(
            hidden(&["tool", "--password", "$DB_PASSWORD"]),
            Vec::<String>::new()
        );
        assert_eq!(hidden(&["openssl", "-passin", "pass:pw3"]), ["pw3"]);
        assert_eq!(
            hidden(&["openssl", "-passin", "env:PW"]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn tools_hide_their_own_password_flags() {
        assert_eq!(hidden(&["mysql", "-uroot", "-pHunter2"]), ["Hunter2"]);
        assert_eq!(hidden(&["mysql", "-p", "appdb"]), ["appdb"]);
        assert_eq!(
            hidden(&["mysqladmin", "-u", "root", "-p", "pw9", "status"]),
            ["pw9"]
        );
        assert_eq!(hidden(&["sshpass", "-p", "pw4", "ssh", "h"]), ["pw4"]);
        assert_eq!(hidden(&["docker", "login", "-p", "pw5"]), ["pw5"]);
        assert_eq!(
            hidden(&["docker", "run", "-p", "8080:80", "img"]),
            Vec::<String>::new()
        );
        assert_eq!(hidden(&["curl", "-u", "al:pw6", "https://x"]), ["pw6"]);
        assert_eq!(
            hidden(&["curl", "-u", "alice", "https://x"]),
            Vec::<String>::new()
        );
        assert_eq!(hidden(&["htpasswd", "-bc", "f", "u", "pw7"]), ["pw7"]);
        assert_eq!(hidden(&["vault", "login", "s.tok8"]), ["s.tok8"]);
        assert_eq!(hidden(&["sqlplus", "scott/tiger9@db"]), ["tiger9"]);
        assert_eq!(
            hidden(&["sqlplus", "-s", "/nolog", "@scripts/run.sql"]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_setting_named_in_one_word_hides_the_next() {
        assert_eq!(
            hidden(&["aws", "configure", "set", "aws_secret_access_key", "k10"]),
            ["k10"]
        );
        assert_eq!(
            hidden(&["aws", "configure", "get", "aws_secret_access_key"]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_flag_left_without_its_value_does_not_hide_the_next_flags_value() {
        assert_eq!(hidden(&["tool", "--password", "--token", "t12"]), ["t12"]);
        assert_eq!(hidden(&["sshpass", "-p", "--password", "p13"]), ["p13"]);
    }

    #[test]
    fn a_secret_set_command_does_not_make_the_next_commands_body_a_secret() {
        assert_eq!(
            hidden(&[
                "gh", "secret", "set", "K", "--body", "b1", "\n", "gh", "issue", "create",
                "--body", "notes"
            ]),
            ["b1"]
        );
    }

    #[test]
    fn separators_end_a_tools_flags() {
        assert_eq!(
            hidden(&["sshpass", "-p", "pw11", "&&", "ls", "-p", "dir"]),
            ["pw11"]
        );
    }
}
