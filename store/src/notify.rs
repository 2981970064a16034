//! `LISTEN` for wake-up hints. One dedicated connection per process (never a pooled one),
//! reconnecting with capped backoff. Hints only shorten waits: every waiter re-reads durable
//! state, so a lost or duplicated hint is harmless.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;
use wc_retry::Backoff;

use crate::StoreError;
use crate::connect::Connector;

/// What the listener saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hint {
    /// A notification on `channel` with `payload`.
    Notice {
        /// Channel.
        channel: String,
        /// Payload.
        payload: String,
    },
    /// The listener (re)connected: hints may have been missed, every waiter should re-check.
    Connected,
}

/// Reconnection delays: doubling from 100 ms up to 5 s, without jitter (one listener per
/// process) or a limit (hints are wanted for as long as the process runs); a connection that
/// was up starts over at 100 ms.
const RECONNECT: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));

/// Spawns the listener task for `channels`, connecting through `connector`; it ends when the
/// receiver is dropped.
pub fn spawn_listener(connector: Connector, channels: Vec<String>) -> mpsc::Receiver<Hint> {
    let (tx, rx) = mpsc::channel(1024);
    tokio::spawn(async move {
        let mut retries = RECONNECT.retries();
        loop {
            let ended = listen_once(&connector, &channels, &tx).await;
            if let Ok(Ended::Disconnected) = ended {
                retries.reset();
            }
            let wait = retries.wait_after_failure();
            match ended {
                Ok(Ended::ReceiverGone) => return,
                Ok(Ended::Disconnected) => {
                    tracing::warn!("notification listener disconnected; reconnecting");
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_ms = wait.as_millis() as u64, "notification listener failed");
                }
            }
            if tx.is_closed() {
                return;
            }
            tokio::time::sleep(wait).await;
        }
    });
    rx
}

enum Ended {
    ReceiverGone,
    Disconnected,
}

async fn listen_once(
    connector: &Connector,
    channels: &[String],
    tx: &mpsc::Sender<Hint>,
) -> Result<Ended, StoreError> {
    let mut cfg = connector.config();
    cfg.application_name("wc-listen");
    cfg.connect_timeout(Duration::from_secs(5));
    let (client, mut conn) = connector.connect(&cfg).await?;
    let (msg_tx, mut msg_rx) = mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if msg_tx.send(Ok(n)).is_err() {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    let _ = msg_tx.send(Err(e));
                    return;
                }
                None => return,
            }
        }
    });
    let mut sql = String::new();
    for c in channels {
        sql.push_str(&format!("LISTEN \"{}\";", c.replace('"', "")));
    }
    let result = async {
        client.batch_execute(&sql).await?;
        if tx.send(Hint::Connected).await.is_err() {
            return Ok(Ended::ReceiverGone);
        }
        loop {
            match msg_rx.recv().await {
                Some(Ok(n)) => {
                    let hint = Hint::Notice {
                        channel: n.channel().to_owned(),
                        payload: n.payload().to_owned(),
                    };
                    if tx.send(hint).await.is_err() {
                        return Ok(Ended::ReceiverGone);
                    }
                }
                Some(Err(e)) => return Err(e.into()),
                None => return Ok(Ended::Disconnected),
            }
        }
    }
    .await;
    driver.abort();
    result
}
