//! Typed database configuration.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::config::{Host, SslMode};

use crate::StoreError;

/// A PostgreSQL connection URL. It may carry a password, so it never prints.
#[derive(Clone)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// Parses and validates a `postgres://` or `postgresql://` URL (or key=value string).
    pub fn parse(raw: &str) -> Result<Self, StoreError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(StoreError::Config("database url is empty".into()));
        }
        tokio_postgres::Config::from_str(raw)
            .map_err(|e| StoreError::Config(format!("database url does not parse: {e}")))?;
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

fn percent_encode(s: &str) -> String {
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

    /// A configuration for `url` with webpki roots and default pool limits.
    pub fn new(url: DatabaseUrl) -> Self {
        Self {
            url,
            tls: TlsSettings::default(),
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            acquire_timeout: Duration::from_secs(10),
        }
    }

    /// Reads `DATABASE_URL`, the optional `WC_DB_SSLROOTCERT` (the CA bundle to trust) and the
    /// optional `WC_DB_MAX_CONNECTIONS`.
    pub fn from_env() -> Result<Self, StoreError> {
        let url = std::env::var("DATABASE_URL")
            .map_err(|_| StoreError::Config("DATABASE_URL is not set".into()))?;
        let mut cfg = Self::new(DatabaseUrl::parse(&url)?);
        cfg.tls = TlsSettings::from_env();
        if let Ok(n) = std::env::var("WC_DB_MAX_CONNECTIONS") {
            cfg.max_connections = n.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                StoreError::Config("WC_DB_MAX_CONNECTIONS must be a positive integer".into())
            })?;
        }
        Ok(cfg)
    }
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
