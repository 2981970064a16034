//! How every wc connection to Postgres is made: the pool's, the `LISTEN` connection's and the
//! migrator's.
//!
//! TLS follows the `sslmode` of the URL: `disable` never uses it, `require` insists on it, and
//! `prefer` (the default) uses it when the server offers it. Certificates are always verified,
//! with the server name taken from the host, against the CA bundle of [`TlsSettings`] or else
//! the webpki roots; there is no mode that accepts any certificate. Under `prefer` a server
//! whose certificate does not verify (a distribution's self-signed "snakeoil" certificate on a
//! developer's loopback server, say) is used without TLS, logged once at info; `require` fails
//! instead.
//!
//! With IAM auth ([`DatabaseAuth::IamToken`]) every new connection gets a freshly signed token as
//! its password (see [`crate::iam_auth`]).

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustls::ClientConfig;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::config::{DatabaseAuth, DatabaseConfig, TlsSettings};
use crate::iam_auth::{DefaultAwsChain, IamAuthError, IamTokenSigner, SigningContext};

/// The connection half of a client made by a [`Connector`]: drive it (spawn it) for the client
/// to make progress.
pub type PgConnection =
    tokio_postgres::Connection<Socket, <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream>;

/// Why the TLS client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// The CA bundle could not be read.
    #[error("cannot read the database CA bundle {path}: {source}")]
    ReadRootCert {
        /// The bundle's path.
        path: PathBuf,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The CA bundle is not well-formed PEM.
    #[error("the database CA bundle {path} is not valid PEM: {source}")]
    ParseRootCert {
        /// The bundle's path.
        path: PathBuf,
        /// What is wrong with it.
        source: rustls::pki_types::pem::Error,
    },
    /// The CA bundle holds no certificate at all.
    #[error("the database CA bundle {path} holds no certificates")]
    NoRootCerts {
        /// The bundle's path.
        path: PathBuf,
    },
    /// A certificate of the CA bundle cannot serve as a trust anchor.
    #[error("the database CA bundle {path} holds an unusable certificate: {source}")]
    BadRootCert {
        /// The bundle's path.
        path: PathBuf,
        /// Why it is unusable.
        source: rustls::Error,
    },
    /// rustls refused the client configuration.
    #[error("cannot configure TLS: {0}")]
    Client(#[source] rustls::Error),
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The TLS client could not be set up.
    #[error(transparent)]
    TlsSetup(#[from] TlsSetupError),
    /// TLS failed: the server's certificate is not trusted or not for this host, the server
    /// does not offer TLS where it is required, or the handshake broke down.
    #[error("TLS with the database failed: {0}")]
    Tls(#[source] tokio_postgres::Error),
    /// No IAM auth token could be made.
    #[error(transparent)]
    IamAuth(#[from] IamAuthError),
    /// The server could not be reached or refused the connection.
    #[error("cannot connect to the database: {0}")]
    Postgres(#[source] tokio_postgres::Error),
}

impl ConnectError {
    fn classify(error: tokio_postgres::Error) -> Self {
        if is_tls_failure(&error) {
            ConnectError::Tls(error)
        } else {
            ConnectError::Postgres(error)
        }
    }
}

/// True when a connection failed in TLS: rustls rejected the handshake, or tokio-postgres
/// reported a TLS error (a server without TLS under `sslmode=require`).
fn is_tls_failure(error: &tokio_postgres::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if e.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io
                .get_ref()
                .is_some_and(|inner| inner.is::<rustls::Error>())
        {
            return true;
        }
        cause = e.source();
    }
    // tokio-postgres exposes no error kind; this is the text of its TLS kind.
    error
        .to_string()
        .starts_with("error performing TLS handshake")
}

/// Makes connections to one database. Cheap to clone; build one per process and share it.
#[derive(Clone)]
pub struct Connector {
    inner: Arc<Inner>,
}

struct Inner {
    base: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    signer: Option<IamTokenSigner>,
    /// Set once a `prefer` connection met a certificate that does not verify: later
    /// connections go without TLS straight away instead of failing the handshake again.
    prefer_without_tls: AtomicBool,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // tokio-postgres redacts the password in its own Debug output.
        f.debug_struct("Connector")
            .field("config", &self.inner.base)
            .field("iam_auth", &self.inner.signer.is_some())
            .finish()
    }
}

impl Connector {
    /// A connector for `cfg`, signing IAM auth tokens (when enabled) with the default AWS
    /// credential chain. Reads the CA bundle now, so a bad one is reported at start-up.
    pub fn new(cfg: &DatabaseConfig) -> Result<Self, ConnectError> {
        Self::with_signing_context(cfg, Arc::new(DefaultAwsChain))
    }

    /// Like [`Connector::new`], with IAM auth tokens signed with time and credentials from
    /// `context`.
    pub fn with_signing_context(
        cfg: &DatabaseConfig,
        context: Arc<dyn SigningContext>,
    ) -> Result<Self, ConnectError> {
        let mut base = cfg.url.pg_config();
        base.connect_timeout(cfg.acquire_timeout);
        let signer = match &cfg.auth {
            DatabaseAuth::UrlPassword => None,
            DatabaseAuth::IamToken { region } => {
                // The token is a bearer credential: never sent without TLS, whatever the
                // configuration was built from (`DatabaseConfig::with_iam_auth` forces it too).
                base.ssl_mode(SslMode::Require);
                let host = match base.get_hosts().first() {
                    Some(Host::Tcp(host)) => host.clone(),
                    _ => return Err(IamAuthError::NoTcpHost.into()),
                };
                let port = base.get_ports().first().copied().unwrap_or(5432);
                let user = base.get_user().unwrap_or("postgres").to_owned();
                Some(IamTokenSigner::new(&host, port, &user, region, context))
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                base,
                tls: tls_connector(&cfg.tls)?,
                signer,
                prefer_without_tls: AtomicBool::new(false),
            }),
        })
    }

    /// The driver configuration connections start from (without any IAM auth token). Adjust a
    /// copy (application name, timeouts) and hand it to [`Connector::connect`].
    pub fn config(&self) -> tokio_postgres::Config {
        self.inner.base.clone()
    }

    /// `pg` with the password of the next connection: a fresh IAM auth token under IAM auth,
    /// else unchanged.
    pub async fn authenticated(
        &self,
        pg: &tokio_postgres::Config,
    ) -> Result<tokio_postgres::Config, IamAuthError> {
        let mut pg = pg.clone();
        if let Some(signer) = &self.inner.signer {
            pg.password(signer.token().await?.expose());
        }
        Ok(pg)
    }

    /// Opens a connection with `pg`, a configuration made from [`Connector::config`].
    pub async fn connect(
        &self,
        pg: &tokio_postgres::Config,
    ) -> Result<(Client, PgConnection), ConnectError> {
        let mut pg = self.authenticated(pg).await?;
        let prefer = pg.get_ssl_mode() == SslMode::Prefer;
        if prefer && self.inner.prefer_without_tls.load(Ordering::Relaxed) {
            pg.ssl_mode(SslMode::Disable);
        }
        match pg.connect(self.inner.tls.clone()).await {
            Ok(pair) => Ok(pair),
            Err(e) if prefer && is_tls_failure(&e) => {
                // What `prefer` asks for, so not a warning: one line per process says so.
                if !self.inner.prefer_without_tls.swap(true, Ordering::Relaxed) {
                    tracing::info!(
                        error = %e,
                        "sslmode=prefer and TLS with the database failed; connecting without TLS \
                         (set sslmode=require and WC_DB_SSLROOTCERT to insist on TLS)"
                    );
                }
                pg.ssl_mode(SslMode::Disable);
                pg.connect(self.inner.tls.clone())
                    .await
                    .map_err(ConnectError::classify)
            }
            Err(e) => Err(ConnectError::classify(e)),
        }
    }
}

/// The rustls client for `settings`: its CA bundle, else the webpki roots; aws-lc-rs crypto.
fn tls_connector(settings: &TlsSettings) -> Result<MakeRustlsConnect, TlsSetupError> {
    let mut roots = rustls::RootCertStore::empty();
    match &settings.root_cert {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|source| TlsSetupError::ReadRootCert {
                path: path.clone(),
                source,
            })?;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|source| TlsSetupError::ParseRootCert {
                    path: path.clone(),
                    source,
                })?;
                roots
                    .add(cert)
                    .map_err(|source| TlsSetupError::BadRootCert {
                        path: path.clone(),
                        source,
                    })?;
            }
            if roots.is_empty() {
                return Err(TlsSetupError::NoRootCerts { path: path.clone() });
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsSetupError::Client)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// What [`deadpool_postgres::Connect`] returns.
type PoolConnectResult = Result<(Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>;
type PoolConnectFuture<'a> = Pin<Box<dyn Future<Output = PoolConnectResult> + Send + 'a>>;

/// Lets deadpool-postgres open pool connections through a [`Connector`].
pub(crate) struct PoolConnect(pub(crate) Connector);

impl deadpool_postgres::Connect for PoolConnect {
    fn connect(&self, pg: &tokio_postgres::Config) -> PoolConnectFuture<'_> {
        let pg = pg.clone();
        Box::pin(async move {
            let (client, connection) = match self.0.connect(&pg).await {
                Ok(pair) => pair,
                Err(ConnectError::Tls(e) | ConnectError::Postgres(e)) => return Err(e),
                Err(ConnectError::IamAuth(cause)) => {
                    tracing::error!(error = %cause, "cannot make a database connection");
                    return Err(driver_error(&pg, cause).await);
                }
                // The TLS client was set up when the connector was built.
                Err(ConnectError::TlsSetup(cause)) => {
                    tracing::error!(error = %cause, "cannot make a database connection");
                    return Err(driver_error(&pg, cause).await);
                }
            };
            let task = tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::warn!(error = %e, "database connection failed");
                }
            });
            Ok((client, task))
        })
    }
}

/// A `tokio_postgres::Error` whose source is `cause`, for the pool, whose errors must be
/// driver errors (which only the driver can make). The one hook the driver runs for every
/// connection attempt is the TLS connector's setup, so a connector that refuses with `cause`
/// carries it out.
async fn driver_error(
    pg: &tokio_postgres::Config,
    cause: impl std::error::Error + Send + Sync + 'static,
) -> tokio_postgres::Error {
    match pg.connect(Refuse(Some(Box::new(cause)))).await {
        Err(e) => e,
        // Not reached with tokio-postgres 0.7, which sets up TLS for every attempt; a client
        // whose connection is gone fails as closed.
        Ok((client, connection)) => {
            drop(connection);
            match client.simple_query("").await {
                Err(e) => e,
                Ok(_) => unreachable!("a client without a connection answered a query"),
            }
        }
    }
}

/// A TLS connector that refuses, with a given cause.
struct Refuse(Option<Box<dyn std::error::Error + Send + Sync>>);

impl MakeTlsConnect<Socket> for Refuse {
    type Stream = tokio_postgres::tls::NoTlsStream;
    type TlsConnect = tokio_postgres::tls::NoTls;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn make_tls_connect(&mut self, _domain: &str) -> Result<Self::TlsConnect, Self::Error> {
        Err(self
            .0
            .take()
            .unwrap_or_else(|| "connection refused before it started".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DatabaseUrl;

    fn write_temp(name: &str, text: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "wc-connect-{}-{}-{name}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::write(&path, text).unwrap();
        path
    }

    fn config_with_root(path: PathBuf) -> DatabaseConfig {
        let mut cfg = DatabaseConfig::new(
            DatabaseUrl::parse("postgres://wc@db.example:5432/wc?sslmode=require").unwrap(),
        );
        cfg.tls.root_cert = Some(path);
        cfg
    }

    #[test]
    fn a_missing_ca_bundle_is_named() {
        let path = std::env::temp_dir().join("wc-connect-no-such-bundle.pem");
        let err = Connector::new(&config_with_root(path.clone())).unwrap_err();
        assert!(
            matches!(&err, ConnectError::TlsSetup(TlsSetupError::ReadRootCert { path: p, .. }) if *p == path),
            "{err:?}"
        );
        assert!(
            err.to_string().contains("wc-connect-no-such-bundle.pem"),
            "{err}"
        );
    }

    #[test]
    fn a_bundle_without_certificates_is_refused() {
        let path = write_temp("empty.pem", b"just some text, no PEM here\n");
        let err = Connector::new(&config_with_root(path.clone())).unwrap_err();
        let _ = std::fs::remove_file(&path);
        assert!(
            matches!(
                err,
                ConnectError::TlsSetup(TlsSetupError::NoRootCerts { .. })
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_broken_pem_block_is_refused() {
        let path = write_temp(
            "broken.pem",
            b"-----BEGIN CERTIFICATE-----\n!!!not base64!!!\n-----END CERTIFICATE-----\n",
        );
        let err = Connector::new(&config_with_root(path.clone())).unwrap_err();
        let _ = std::fs::remove_file(&path);
        assert!(
            matches!(
                err,
                ConnectError::TlsSetup(TlsSetupError::ParseRootCert { .. })
            ),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn every_connection_gets_a_fresh_token_as_its_password() {
        let cfg = DatabaseConfig::new(
            DatabaseUrl::parse("postgres://wc_app@proxy.example:5432/wc").unwrap(),
        )
        .with_iam_auth("eu-west-1")
        .unwrap();
        let clock = crate::testing::FixedSigning::ticking_from(std::time::SystemTime::UNIX_EPOCH);
        let connector = Connector::with_signing_context(&cfg, Arc::new(clock)).unwrap();
        let base = connector.config();
        assert_eq!(base.get_password(), None);
        assert_eq!(base.get_ssl_mode(), SslMode::Require);
        let password = |pg: &tokio_postgres::Config| {
            String::from_utf8(pg.get_password().expect("a password").to_vec()).unwrap()
        };
        let first = password(&connector.authenticated(&base).await.unwrap());
        let second = password(&connector.authenticated(&base).await.unwrap());
        for token in [&first, &second] {
            assert!(
                token.starts_with("proxy.example:5432/?Action=connect&DBUser=wc_app&"),
                "{token}"
            );
        }
        assert!(first.contains("X-Amz-Date=19700101T000000Z"), "{first}");
        assert!(second.contains("X-Amz-Date=19700101T000001Z"), "{second}");
        assert_ne!(first, second);
        let shown = format!("{connector:?}");
        assert!(!shown.contains("X-Amz-Signature"), "{shown}");
    }

    #[test]
    fn iam_auth_never_goes_without_tls_nor_to_a_socket() {
        let iam = DatabaseAuth::IamToken {
            region: "eu-west-1".into(),
        };
        let plain = DatabaseConfig {
            auth: iam.clone(),
            ..DatabaseConfig::new(
                DatabaseUrl::parse("postgres://wc@db.example/wc?sslmode=disable").unwrap(),
            )
        };
        let connector = Connector::new(&plain).unwrap();
        assert_eq!(connector.config().get_ssl_mode(), SslMode::Require);
        let socket = DatabaseConfig {
            auth: iam,
            ..DatabaseConfig::new(DatabaseUrl::parse("host=/run/postgresql user=wc").unwrap())
        };
        let err = Connector::new(&socket).unwrap_err();
        assert!(
            matches!(err, ConnectError::IamAuth(IamAuthError::NoTcpHost)),
            "{err:?}"
        );
    }

    #[test]
    fn webpki_roots_are_the_default() {
        let cfg = DatabaseConfig::new(DatabaseUrl::parse("postgres://wc@db.example/wc").unwrap());
        assert!(Connector::new(&cfg).is_ok());
    }
}
