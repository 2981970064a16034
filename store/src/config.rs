//! Typed database configuration.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::config::{Host, SslMode};

/// Why a database configuration was refused: what was wrong, in words an operator can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// A PostgreSQL connection URL. It may carry a password, so it never prints.
#[derive(Clone)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// Parses and validates a `postgres://` or `postgresql://` URL (or key=value string).
    pub fn parse(raw: &str) -> Result<Self, ConfigError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(ConfigError("database url is empty".into()));
        }
        tokio_postgres::Config::from_str(raw)
            .map_err(|e| ConfigError(format!("database url does not parse: {e}")))?;
        Ok(Self(raw.to_owned()))
    }

    /// The URL text, for handing to a driver. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The parsed driver configuration.
    pub fn pg_config(&self) -> tokio_postgres::Config {
        // `parse` validated the text, so this cannot fail.
        tokio_postgres::Config::from_str(&self.0).expect("validated database url")
    }

    /// The same server with another database name.
    pub fn with_database(&self, name: &str) -> DatabaseUrl {
        let mut cfg = self.pg_config();
        cfg.dbname(name);
        DatabaseUrl(config_to_url(&cfg))
    }
}

/// Renders a driver configuration back into a URL (host, port, user, password, dbname and a
/// `sslmode` other than the default `prefer`).
fn config_to_url(cfg: &tokio_postgres::Config) -> String {
    let host = match cfg.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(Host::Unix(p)) => percent_encode(&p.to_string_lossy()),
        None => "localhost".into(),
    };
    let port = cfg.get_ports().first().copied().unwrap_or(5432);
    let user = cfg.get_user().unwrap_or("postgres");
    let auth = match cfg.get_password() {
        Some(p) => format!(
            "{}:{}",
            percent_encode(user),
            percent_encode(&String::from_utf8_lossy(p))
        ),
        None => percent_encode(user),
    };
    let db = cfg.get_dbname().unwrap_or("postgres");
    let ssl = match cfg.get_ssl_mode() {
        SslMode::Disable => "?sslmode=disable",
        SslMode::Require => "?sslmode=require",
        _ => "",
    };
    format!(
        "postgres://{auth}@{host}:{port}/{}{ssl}",
        percent_encode(db)
    )
}

/// Percent-encodes everything but the RFC 3986 unreserved characters (as SigV4 wants too).
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cfg = self.pg_config();
        let host = match cfg.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            #[cfg(unix)]
            Some(Host::Unix(p)) => p.display().to_string(),
            None => "?".into(),
        };
        write!(
            f,
            "DatabaseUrl({}@{}:{}/{}, password: {})",
            cfg.get_user().unwrap_or("?"),
            host,
            cfg.get_ports().first().copied().unwrap_or(5432),
            cfg.get_dbname().unwrap_or("?"),
            if cfg.get_password().is_some() {
                "<redacted>"
            } else {
                "none"
            }
        )
    }
}

/// How connections prove who they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseAuth {
    /// The password in the URL, if any (or none at all, for trust and peer authentication).
    UrlPassword,
    /// A fresh RDS IAM auth token per connection, signed for `region` with the credentials of the
    /// default AWS chain. The URL then carries no password and TLS is required.
    IamToken {
        /// AWS region of the database (or its RDS Proxy).
        region: String,
    },
}

/// How server certificates are checked when a connection uses TLS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// A PEM bundle of the certificate authorities to trust (`WC_DB_SSLROOTCERT`, e.g. the AWS RDS
    /// global bundle). Without one, the webpki roots are trusted.
    pub root_cert: Option<PathBuf>,
}

impl TlsSettings {
    /// Reads `WC_DB_SSLROOTCERT`.
    pub fn from_env() -> Self {
        Self::from_vars(&|name: &str| std::env::var(name).ok())
    }

    fn from_vars(var: &impl Fn(&str) -> Option<String>) -> Self {
        Self {
            root_cert: var("WC_DB_SSLROOTCERT")
                .filter(|v| !v.trim().is_empty())
                .map(PathBuf::from),
        }
    }
}

/// How a process talks to the database.
#[derive(Clone, Debug)]
pub struct DatabaseConfig {
    /// Where the database is. Its `sslmode` (`disable`, `prefer`, `require`) decides TLS.
    pub url: DatabaseUrl,
    /// How connections authenticate.
    pub auth: DatabaseAuth,
    /// How server certificates are checked.
    pub tls: TlsSettings,
    /// Upper bound on pooled connections held by this process.
    pub max_connections: usize,
    /// How long to wait for a pooled connection (or a new one) before failing the request.
    pub acquire_timeout: Duration,
}

impl DatabaseConfig {
    /// Default pool size: enough to keep two cores busy without crowding a small database.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 16;

    /// A configuration for `url` with its own password (if any), webpki roots and default pool
    /// limits.
    pub fn new(url: DatabaseUrl) -> Self {
        Self {
            url,
            auth: DatabaseAuth::UrlPassword,
            tls: TlsSettings::default(),
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            acquire_timeout: Duration::from_secs(10),
        }
    }

    /// Reads the configuration from the environment.
    ///
    /// The database is `DATABASE_URL` when set; otherwise it is assembled from `WC_DB_HOST`,
    /// `WC_DB_PORT` (default 5432), `WC_DB_NAME` and `WC_DB_USER`. `WC_DB_IAM_AUTH=1` switches
    /// to IAM database authentication in `AWS_REGION` and forces `sslmode=require`.
    /// `WC_DB_SSLROOTCERT` names the CA bundle to trust and `WC_DB_MAX_CONNECTIONS` bounds the
    /// pool.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`DatabaseConfig::from_env`] over any source of variables.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let url = match (set("DATABASE_URL"), set("WC_DB_HOST")) {
            (Some(url), _) => DatabaseUrl::parse(&url)?,
            (None, Some(host)) => url_from_parts(&host, &set)?,
            (None, None) => {
                return Err(ConfigError(
                    "neither DATABASE_URL nor WC_DB_HOST is set".into(),
                ));
            }
        };
        let iam = match set("WC_DB_IAM_AUTH").as_deref().map(str::trim) {
            None | Some("0") | Some("false") => false,
            Some("1") | Some("true") => true,
            Some(_) => {
                return Err(ConfigError("WC_DB_IAM_AUTH must be 1 or 0".into()));
            }
        };
        let mut cfg = Self::new(url);
        if iam {
            let region = set("AWS_REGION")
                .ok_or_else(|| ConfigError("WC_DB_IAM_AUTH=1 needs AWS_REGION".into()))?;
            cfg = cfg.with_iam_auth(region.trim())?;
        }
        cfg.tls = TlsSettings::from_vars(&var);
        if let Some(n) = set("WC_DB_MAX_CONNECTIONS") {
            cfg.max_connections = n.trim().parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                ConfigError("WC_DB_MAX_CONNECTIONS must be a positive integer".into())
            })?;
        }
        Ok(cfg)
    }

    /// Switches to IAM database authentication in `region`: the URL must carry no password and
    /// must not disable TLS; `sslmode=require` is forced, since the token is a bearer credential.
    pub fn with_iam_auth(mut self, region: &str) -> Result<Self, ConfigError> {
        let mut pg = self.url.pg_config();
        if pg.get_password().is_some() {
            return Err(ConfigError(
                "IAM auth is on but the database url carries a password: remove one of them".into(),
            ));
        }
        if pg.get_ssl_mode() == SslMode::Disable {
            return Err(ConfigError(
                "IAM auth needs TLS, but the database url says sslmode=disable".into(),
            ));
        }
        if region.is_empty() {
            return Err(ConfigError("IAM auth needs an AWS region".into()));
        }
        if !matches!(pg.get_hosts().first(), Some(Host::Tcp(_))) {
            return Err(ConfigError(
                "IAM auth needs a TCP host name in the database url".into(),
            ));
        }
        pg.ssl_mode(SslMode::Require);
        self.url = DatabaseUrl(config_to_url(&pg));
        self.auth = DatabaseAuth::IamToken {
            region: region.to_owned(),
        };
        Ok(self)
    }
}

/// The URL for `WC_DB_HOST`, `WC_DB_PORT`, `WC_DB_NAME` and `WC_DB_USER` (no password: that
/// comes from IAM auth or, on a trusting server, is not needed).
fn url_from_parts(
    host: &str,
    set: &impl Fn(&str) -> Option<String>,
) -> Result<DatabaseUrl, ConfigError> {
    let required = |name: &str| {
        set(name).ok_or_else(|| ConfigError(format!("WC_DB_HOST is set but {name} is not")))
    };
    let port = match set("WC_DB_PORT") {
        Some(p) => p
            .trim()
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| ConfigError("WC_DB_PORT must be a port number".into()))?,
        None => 5432,
    };
    let mut pg = tokio_postgres::Config::new();
    pg.host(host.trim())
        .port(port)
        .dbname(required("WC_DB_NAME")?.trim())
        .user(required("WC_DB_USER")?.trim());
    DatabaseUrl::parse(&config_to_url(&pg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_the_password() {
        let url = DatabaseUrl::parse("postgres://alice:s3cr3t-pw@db.example:6543/wc").unwrap();
        let shown = format!("{url:?}");
        assert!(!shown.contains("s3cr3t-pw"), "{shown}");
        assert!(shown.contains("alice@db.example:6543/wc"), "{shown}");
    }

    #[test]
    fn with_database_keeps_credentials_and_host() {
        let url = DatabaseUrl::parse("postgres://alice:p%40ss@127.0.0.1:5433/postgres").unwrap();
        let other = url.with_database("t_1");
        let cfg = other.pg_config();
        assert_eq!(cfg.get_dbname(), Some("t_1"));
        assert_eq!(cfg.get_user(), Some("alice"));
        assert_eq!(cfg.get_password(), Some(&b"p@ss"[..]));
        assert_eq!(cfg.get_ports(), &[5433]);
    }

    fn from(vars: &[(&str, &str)]) -> Result<DatabaseConfig, ConfigError> {
        DatabaseConfig::from_vars(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn database_url_alone_works_as_before() {
        let cfg = from(&[("DATABASE_URL", "postgres://alice:pw@db:5433/wc")]).unwrap();
        assert_eq!(cfg.auth, DatabaseAuth::UrlPassword);
        assert_eq!(cfg.tls, TlsSettings::default());
        let pg = cfg.url.pg_config();
        assert_eq!(pg.get_password(), Some(&b"pw"[..]));
        assert_eq!(pg.get_ssl_mode(), SslMode::Prefer);
        let cfg = from(&[("DATABASE_URL", "postgres://alice@db/wc?sslmode=disable")]).unwrap();
        assert_eq!(cfg.url.pg_config().get_ssl_mode(), SslMode::Disable);
    }

    #[test]
    fn cloud_variables_with_iam_auth_require_tls() {
        let cfg = from(&[
            (
                "WC_DB_HOST",
                "wc-proxy.proxy-abc.eu-west-1.rds.amazonaws.com",
            ),
            ("WC_DB_NAME", "wc"),
            ("WC_DB_USER", "wc_app"),
            ("WC_DB_IAM_AUTH", "1"),
            ("AWS_REGION", "eu-west-1"),
            ("WC_DB_SSLROOTCERT", "/opt/rds/global-bundle.pem"),
        ])
        .unwrap();
        assert_eq!(
            cfg.auth,
            DatabaseAuth::IamToken {
                region: "eu-west-1".into()
            }
        );
        assert_eq!(
            cfg.tls.root_cert.as_deref(),
            Some(std::path::Path::new("/opt/rds/global-bundle.pem"))
        );
        let pg = cfg.url.pg_config();
        assert_eq!(pg.get_ssl_mode(), SslMode::Require);
        assert_eq!(pg.get_ports(), &[5432]);
        assert_eq!(pg.get_user(), Some("wc_app"));
        assert_eq!(pg.get_dbname(), Some("wc"));
        assert_eq!(pg.get_password(), None);
        assert_eq!(
            pg.get_hosts(),
            &[Host::Tcp(
                "wc-proxy.proxy-abc.eu-west-1.rds.amazonaws.com".into()
            )]
        );
    }

    #[test]
    fn cloud_variables_without_iam_auth_keep_prefer() {
        let cfg = from(&[
            ("WC_DB_HOST", "db.internal"),
            ("WC_DB_PORT", "6432"),
            ("WC_DB_NAME", "wc"),
            ("WC_DB_USER", "wc_app"),
        ])
        .unwrap();
        assert_eq!(cfg.auth, DatabaseAuth::UrlPassword);
        let pg = cfg.url.pg_config();
        assert_eq!(pg.get_ports(), &[6432]);
        assert_eq!(pg.get_ssl_mode(), SslMode::Prefer);
    }

    #[test]
    fn refuses_what_cannot_work() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "neither DATABASE_URL nor WC_DB_HOST"),
            (&[("WC_DB_HOST", "h"), ("WC_DB_NAME", "wc")], "WC_DB_USER"),
            (&[("WC_DB_HOST", "h"), ("WC_DB_USER", "u")], "WC_DB_NAME"),
            (
                &[
                    ("WC_DB_HOST", "h"),
                    ("WC_DB_NAME", "wc"),
                    ("WC_DB_USER", "u"),
                    ("WC_DB_PORT", "x"),
                ],
                "WC_DB_PORT",
            ),
            (
                &[
                    ("DATABASE_URL", "postgres://u@h/wc"),
                    ("WC_DB_IAM_AUTH", "1"),
                ],
                "AWS_REGION",
            ),
            (
                &[
                    ("DATABASE_URL", "postgres://u@h/wc"),
                    ("WC_DB_IAM_AUTH", "yes please"),
                ],
                "WC_DB_IAM_AUTH",
            ),
            (
                &[
                    ("DATABASE_URL", "postgres://u@h/wc?sslmode=disable"),
                    ("WC_DB_IAM_AUTH", "1"),
                    ("AWS_REGION", "eu-west-1"),
                ],
                "sslmode=disable",
            ),
            (
                &[
                    ("DATABASE_URL", "postgres://u:pw@h/wc"),
                    ("WC_DB_IAM_AUTH", "1"),
                    ("AWS_REGION", "eu-west-1"),
                ],
                "password",
            ),
        ];
        for (vars, expected) in cases {
            let err = from(vars).expect_err(expected).to_string();
            assert!(err.contains(expected), "{vars:?}: {err}");
        }
    }

    #[test]
    fn with_database_keeps_sslmode() {
        let url = DatabaseUrl::parse("postgres://u@h/wc?sslmode=require").unwrap();
        let other = url.with_database("t_1").pg_config();
        assert_eq!(other.get_ssl_mode(), SslMode::Require);
        assert_eq!(other.get_dbname(), Some("t_1"));
    }

    #[test]
    fn rejects_garbage() {
        assert!(DatabaseUrl::parse("").is_err());
        assert!(DatabaseUrl::parse("postgres://host:notaport/db").is_err());
    }
}
