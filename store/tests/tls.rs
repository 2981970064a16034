//! TLS to a real PostgreSQL server: a private cluster serving a certificate for `localhost`
//! signed by a CA made here, and every way wc connects to it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use wc_store::cluster::{ClusterOptions, LocalCluster, ServerTls};
use wc_store::config::{DatabaseConfig, DatabaseUrl};
use wc_store::connect::{ConnectError, Connector};
use wc_store::testing::FixedSigning;

/// A certificate authority made for one test run.
struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("ca key");
        TestCa {
            issuer: CertifiedIssuer::self_signed(params, key).expect("self-signed ca"),
        }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `host`, with its key.
    fn server_tls(&self, host: &str) -> ServerTls {
        let mut params = CertificateParams::new(vec![host.to_owned()]).expect("server params");
        params.distinguished_name.push(DnType::CommonName, host);
        let key = KeyPair::generate().expect("server key");
        let cert = params.signed_by(&key, &self.issuer).expect("server cert");
        ServerTls {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// A throwaway cluster serving TLS. Dropping it (a failed assertion, say) kills the postmaster
/// and removes its files; [`TlsServer::stop`] shuts it down in order.
struct TlsServer {
    dir: PathBuf,
    cluster: Option<LocalCluster>,
}

impl TlsServer {
    async fn start(tls: ServerTls) -> TlsServer {
        let dir = std::env::temp_dir().join(format!(
            "wc-tls-test-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).expect("create the test directory");
        let mut server = TlsServer { dir, cluster: None };
        let opts = ClusterOptions {
            die_with_parent: true,
            max_connections: 20,
            server_tls: Some(tls),
        };
        let cluster = LocalCluster::start(&server.dir.join("cluster"), &opts)
            .await
            .unwrap_or_else(|e| panic!("cannot start a PostgreSQL cluster for the TLS test: {e}"));
        server.cluster = Some(cluster);
        server
    }

    fn port(&self) -> u16 {
        self.cluster.as_ref().map(|c| c.port()).expect("running")
    }

    /// A file in the test directory holding `text`.
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).expect("write a test file");
        path
    }

    /// A configuration for this server as `localhost` with `sslmode` and the CA bundle `ca`.
    fn config(&self, sslmode: &str, ca: Option<&Path>) -> DatabaseConfig {
        let password = self
            .cluster
            .as_ref()
            .and_then(|c| {
                c.url("postgres")
                    .pg_config()
                    .get_password()
                    .map(<[u8]>::to_vec)
            })
            .expect("the cluster has a password");
        self.config_as(
            &format!(
                "postgres:{}",
                String::from_utf8(password).expect("hex password")
            ),
            sslmode,
            ca,
        )
    }

    /// Like [`TlsServer::config`], as `userinfo` (`user` or `user:password`).
    fn config_as(&self, userinfo: &str, sslmode: &str, ca: Option<&Path>) -> DatabaseConfig {
        let url = DatabaseUrl::parse(&format!(
            "postgres://{userinfo}@localhost:{}/postgres?sslmode={sslmode}",
            self.port()
        ))
        .expect("test url");
        let mut cfg = DatabaseConfig::new(url);
        cfg.tls.root_cert = ca.map(Path::to_owned);
        cfg.acquire_timeout = Duration::from_secs(5);
        cfg
    }

    /// Lets every loopback connection in without a password: the IAM path sends a fresh
    /// token as the password, which no password check of this test server could know.
    async fn trust_loopback(&self) {
        let cluster = self.cluster.as_ref().expect("running");
        let hba = cluster.root().join("data/pg_hba.conf");
        std::fs::write(
            &hba,
            "host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n",
        )
        .expect("rewrite pg_hba.conf");
        let (client, conn) = cluster
            .url("postgres")
            .pg_config()
            .connect(tokio_postgres::NoTls)
            .await
            .expect("connect with the cluster's password");
        let task = tokio::spawn(conn);
        client
            .simple_query("SELECT pg_reload_conf()")
            .await
            .expect("reload the configuration");
        drop(client);
        let _ = task.await;
        // The postmaster rereads the file when it handles the signal: wait until it has.
        let mut bare = tokio_postgres::Config::new();
        bare.host("127.0.0.1")
            .port(self.port())
            .user("postgres")
            .dbname("postgres");
        for _ in 0..500 {
            if bare.connect(tokio_postgres::NoTls).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the cluster kept asking for a password after the reload");
    }

    async fn stop(mut self) {
        if let Some(cluster) = self.cluster.take() {
            cluster.stop().await.expect("stop the cluster");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        if let Some(cluster) = self.cluster.take() {
            if let Some(pid) = cluster.pid() {
                // Immediate shutdown: the postmaster takes its backends down with it.
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGQUIT);
                let deadline = std::time::Instant::now() + Duration::from_secs(5);
                while running(pid) && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            drop(cluster);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether `pid` is alive (a zombie awaiting its parent counts as gone).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Whether the session behind `client` uses TLS, as the server sees it.
async fn session_uses_tls(client: &tokio_postgres::Client) -> bool {
    client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .expect("read pg_stat_ssl")
        .get(0)
}

/// Connects with `cfg` and reports whether the session uses TLS.
async fn connect_and_check(cfg: &DatabaseConfig) -> Result<bool, ConnectError> {
    let connector = Connector::new(cfg)?;
    let (client, connection) = connector.connect(&connector.config()).await?;
    let task = tokio::spawn(connection);
    let tls = session_uses_tls(&client).await;
    drop(client);
    let _ = task.await;
    Ok(tls)
}

#[tokio::test]
async fn connections_use_verified_tls_as_sslmode_says() {
    let ca = TestCa::new("wc test CA");
    let other_ca = TestCa::new("some other CA");
    let server = TlsServer::start(ca.server_tls("localhost")).await;
    let ca_file = server.file("ca.pem", &ca.pem());
    let other_ca_file = server.file("other-ca.pem", &other_ca.pem());

    // require + the CA that signed the server's certificate: TLS.
    let verified = server.config("require", Some(&ca_file));
    assert!(
        connect_and_check(&verified)
            .await
            .expect("require with the right CA")
    );

    // require + a CA that did not sign it: a TLS error, not a connection without TLS.
    let err = connect_and_check(&server.config("require", Some(&other_ca_file)))
        .await
        .expect_err("require with the wrong CA must fail");
    assert!(matches!(err, ConnectError::Tls(_)), "{err:?}");

    // require + the webpki roots: a private CA is not trusted.
    let err = connect_and_check(&server.config("require", None))
        .await
        .expect_err("require with the webpki roots must fail");
    assert!(matches!(err, ConnectError::Tls(_)), "{err:?}");

    // disable: no TLS even though the server offers it.
    assert!(
        !connect_and_check(&server.config("disable", Some(&ca_file)))
            .await
            .unwrap()
    );

    // prefer: TLS when the certificate verifies, else without TLS (as before TLS support).
    assert!(
        connect_and_check(&server.config("prefer", Some(&ca_file)))
            .await
            .unwrap()
    );
    assert!(
        !connect_and_check(&server.config("prefer", Some(&other_ca_file)))
            .await
            .unwrap()
    );

    // The pool connects the same way.
    let pool = wc_store::pool::build_pool(&verified).expect("build the pool");
    let pooled = pool.get().await.expect("a pooled connection");
    assert!(session_uses_tls(&pooled).await);
    drop(pooled);
    drop(pool);

    // IAM auth forces TLS; the trusting server ignores the token, which proves nothing about
    // the token itself but exercises the whole path of a cloud connection.
    server.trust_loopback().await;
    let iam = server
        .config_as("postgres", "prefer", Some(&ca_file))
        .with_iam_auth("eu-west-1")
        .expect("IAM auth config");
    let connector =
        Connector::with_signing_context(&iam, Arc::new(FixedSigning::real_clock())).unwrap();
    let (client, connection) = connector.connect(&connector.config()).await.unwrap();
    let task = tokio::spawn(connection);
    assert!(session_uses_tls(&client).await);
    drop(client);
    let _ = task.await;

    server.stop().await;
}
