//! A PostgreSQL wire-protocol relay that can break one transaction's `COMMIT` for real: let
//! the server commit and swallow its answer ([`Break::ReplyLost`]), or close both sockets
//! instead of forwarding it ([`Break::CommitLost`]). The client sees a connection failure
//! either way and cannot know the outcome. A transaction is chosen by the prepared statements
//! it executed ([`PgProxy::arm`]); everything else is relayed untouched. It can also drop a
//! connection the moment a chosen statement is executed ([`Break::StatementLost`]): the
//! database going away in the middle of a request.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use super::TestDatabase;
use crate::config::{DatabaseConfig, DatabaseUrl};

/// How the proxy breaks a marked transaction's COMMIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Break {
    /// Forward the COMMIT, let the server answer it, then close the client's socket without
    /// relaying the answer: the transaction is committed, the client cannot know.
    ReplyLost,
    /// Close both sockets instead of forwarding the COMMIT: the server rolls the transaction
    /// back, the client cannot know either.
    CommitLost,
    /// Close both sockets instead of forwarding the `at_least`-th execution of a marked
    /// statement, in or out of a transaction: the connection is lost mid-request.
    StatementLost,
}

/// What the proxy did when a sabotage fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fired {
    /// The server answered the COMMIT with this command tag (`COMMIT`, or `ROLLBACK` for a
    /// failed transaction), and the answer was dropped.
    ReplyLost {
        /// The command tag of the swallowed answer.
        server_said: String,
    },
    /// The COMMIT was never sent.
    CommitLost,
    /// A marked statement's execution was never sent; the connection was closed instead.
    StatementLost,
}

/// A sabotage waiting for its transaction.
#[derive(Debug, Clone, Copy)]
struct Armed {
    how: Break,
    /// Text of the prepared statement that marks the transaction.
    marker: &'static str,
    /// Executions of marked statements the transaction must have run.
    at_least: usize,
}

#[derive(Default)]
struct Control {
    armed: Mutex<Option<Armed>>,
    fired: Mutex<Vec<Fired>>,
}

/// A PostgreSQL wire-protocol relay on 127.0.0.1 in front of the real server.
pub struct PgProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    control: Arc<Control>,
    accept: JoinHandle<()>,
}

impl PgProxy {
    /// A relay to `upstream`, unarmed.
    pub async fn start(upstream: SocketAddr) -> PgProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let control = Arc::new(Control::default());
        let ctl = control.clone();
        let accept = tokio::spawn(async move {
            // Dropping the set (when this task is aborted) aborts every relay.
            let mut relays = JoinSet::new();
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                while relays.try_join_next().is_some() {}
                let ctl = ctl.clone();
                relays.spawn(async move {
                    // A relay ends when either side goes away; its I/O errors are that.
                    let _ = relay(client, upstream, ctl).await;
                });
            }
        });
        PgProxy {
            addr,
            control,
            accept,
        }
    }

    /// Breaks the next COMMIT of a transaction that executed prepared statements whose text
    /// contains `marker` at least `at_least` times, on whichever connection sends it.
    pub fn arm(&self, how: Break, marker: &'static str, at_least: usize) {
        *self.control.armed.lock().unwrap() = Some(Armed {
            how,
            marker,
            at_least,
        });
    }

    /// The sabotages that fired so far, oldest first.
    pub fn fired(&self) -> Vec<Fired> {
        self.control.fired.lock().unwrap().clone()
    }

    /// Whether a sabotage is still waiting for its COMMIT.
    pub fn armed(&self) -> bool {
        self.control.armed.lock().unwrap().is_some()
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// One direction of the wire, cut into whole protocol messages.
struct Frames {
    buf: Vec<u8>,
    /// The next message is the untyped startup message (no type byte).
    startup: bool,
}

/// One protocol message as it travelled.
struct Frame {
    tag: Option<u8>,
    raw: Vec<u8>,
}

impl Frame {
    /// The message's contents after the type byte and length.
    fn body(&self) -> &[u8] {
        &self.raw[if self.tag.is_some() { 5 } else { 4 }..]
    }

    /// The message's leading NUL-terminated strings.
    fn strings(&self) -> impl Iterator<Item = String> + '_ {
        self.body()
            .split(|b| *b == 0)
            .map(|s| String::from_utf8_lossy(s).into_owned())
    }
}

impl Frames {
    fn new(startup: bool) -> Frames {
        Frames {
            buf: Vec::with_capacity(16 * 1024),
            startup,
        }
    }

    /// The next whole message, if it has arrived.
    fn next(&mut self) -> Option<Frame> {
        let header = if self.startup { 0 } else { 1 };
        let len_bytes = self.buf.get(header..header + 4)?;
        let len = u32::from_be_bytes(len_bytes.try_into().unwrap()) as usize;
        assert!(len >= 4, "malformed protocol message length {len}");
        if self.buf.len() < header + len {
            return None;
        }
        let raw: Vec<u8> = self.buf.drain(..header + len).collect();
        let tag = (!self.startup).then(|| raw[0]);
        self.startup = false;
        Some(Frame { tag, raw })
    }
}

/// Whether a simple query opens or ends a transaction.
fn transaction_boundary(query: &str) -> bool {
    let first = query.split_whitespace().next().unwrap_or("");
    ["BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT"]
        .iter()
        .any(|w| first.eq_ignore_ascii_case(w))
}

/// Relays one client connection to `upstream`, message by message.
///
/// Every `Sync` and simple `Query` the client sends (and the startup) is answered by exactly
/// one `ReadyForQuery`, in order, so counting both tells which request each server message
/// answers: that is how the reply to a sabotaged COMMIT is told apart from late replies to
/// earlier requests (tokio-postgres closes statements without waiting for the answer).
async fn relay(
    client: TcpStream,
    upstream: SocketAddr,
    control: Arc<Control>,
) -> std::io::Result<()> {
    let server = TcpStream::connect(upstream).await?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    // sslmode=disable: the startup message comes first and nothing else is untyped.
    let mut up = Frames::new(true);
    let mut down = Frames::new(false);
    // Prepared statements of this connection, by name, and how many executions of the
    // armed marker's statements the open transaction ran.
    let mut statements: HashMap<String, String> = HashMap::new();
    let mut marked = 0usize;
    let mut requests_sent: u64 = 0;
    let mut answers_relayed: u64 = 0;
    // The request number of a COMMIT whose answer is to be swallowed, and its command tag.
    let mut swallow: Option<u64> = None;
    let mut server_said = String::new();
    loop {
        tokio::select! {
            n = client_rx.read_buf(&mut up.buf) => {
                if n? == 0 {
                    return Ok(());
                }
                while let Some(m) = up.next() {
                    match m.tag {
                        None | Some(b'S') => requests_sent += 1,
                        Some(b'P') => {
                            let mut s = m.strings();
                            let name = s.next().unwrap_or_default();
                            let query = s.next().unwrap_or_default();
                            statements.insert(name, query);
                        }
                        Some(b'B') => {
                            let mut s = m.strings();
                            let _portal = s.next();
                            let name = s.next().unwrap_or_default();
                            let armed = *control.armed.lock().unwrap();
                            if armed.is_some_and(|a| statements.get(&name).is_some_and(|q| q.contains(a.marker))) {
                                marked += 1;
                                let cut = {
                                    let mut a = control.armed.lock().unwrap();
                                    a.take_if(|a| a.how == Break::StatementLost && a.at_least <= marked)
                                };
                                if cut.is_some() {
                                    control.fired.lock().unwrap().push(Fired::StatementLost);
                                    return Ok(());
                                }
                            }
                        }
                        Some(b'Q') => {
                            requests_sent += 1;
                            let query = m.strings().next().unwrap_or_default();
                            let query = query.trim();
                            if query.eq_ignore_ascii_case("COMMIT") {
                                let armed = {
                                    let mut a = control.armed.lock().unwrap();
                                    if a.is_some_and(|a| a.how != Break::StatementLost && a.at_least <= marked) { a.take() } else { None }
                                };
                                match armed.map(|a| a.how) {
                                    Some(Break::StatementLost) | None => {}
                                    Some(Break::CommitLost) => {
                                        control.fired.lock().unwrap().push(Fired::CommitLost);
                                        return Ok(());
                                    }
                                    Some(Break::ReplyLost) => swallow = Some(requests_sent),
                                }
                            }
                            if transaction_boundary(query) {
                                marked = 0;
                            }
                        }
                        _ => {}
                    }
                    server_tx.write_all(&m.raw).await?;
                }
            }
            n = server_rx.read_buf(&mut down.buf) => {
                if n? == 0 {
                    return Ok(());
                }
                while let Some(m) = down.next() {
                    if swallow == Some(answers_relayed + 1) {
                        match m.tag {
                            Some(b'C') => server_said = m.strings().next().unwrap_or_default(),
                            Some(b'E') => server_said = "an error".into(),
                            Some(b'Z') => {
                                control.fired.lock().unwrap().push(Fired::ReplyLost {
                                    server_said: std::mem::take(&mut server_said),
                                });
                                return Ok(());
                            }
                            _ => {}
                        }
                        continue;
                    }
                    if m.tag == Some(b'Z') {
                        answers_relayed += 1;
                    }
                    client_tx.write_all(&m.raw).await?;
                }
            }
        }
    }
}

/// The address the test database's server answers on, as seen over TCP.
pub async fn server_addr(db: &TestDatabase) -> SocketAddr {
    let c = db.pool().get().await.unwrap();
    let row = c
        .query_one("SELECT host(inet_server_addr()), inet_server_port()", &[])
        .await
        .unwrap();
    let (host, port): (Option<String>, Option<i32>) = (row.get(0), row.get(1));
    let (Some(host), Some(port)) = (host, port) else {
        panic!("the test server must be reached over TCP for the proxy to stand in front of it");
    };
    SocketAddr::new(
        host.parse::<IpAddr>().unwrap(),
        u16::try_from(port).unwrap(),
    )
}

/// A pool over the test database whose connections all go through `proxy`.
pub fn proxied_pool(db: &TestDatabase, proxy: &PgProxy) -> Pool {
    fn quoted(v: &str) -> String {
        format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
    }
    let cfg = db.url().pg_config();
    let mut conn = format!(
        "host={} port={} dbname={} user={} sslmode=disable",
        proxy.addr.ip(),
        proxy.addr.port(),
        quoted(cfg.get_dbname().unwrap_or("postgres")),
        quoted(cfg.get_user().unwrap_or("postgres")),
    );
    if let Some(pw) = cfg.get_password() {
        conn.push_str(&format!(
            " password={}",
            quoted(&String::from_utf8_lossy(pw))
        ));
    }
    let url = DatabaseUrl::parse(&conn).unwrap();
    let config = DatabaseConfig {
        max_connections: 4,
        acquire_timeout: Duration::from_secs(5),
        ..DatabaseConfig::new(url)
    };
    crate::pool::build_pool(&config).unwrap()
}
