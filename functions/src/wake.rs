//! Wake-ups for waiters on durable state: the runner API's long poll (work queued for a
//! runner), the execution tools' synchronous wait (work reached a terminal state) and
//! `observe_session_messages` (a session's message board changed).
//!
//! Hints come from Postgres `NOTIFY` through one listener per process ([`wc_store::notify`]);
//! they only end a wait early. Every waiter re-reads durable state after waking and also
//! re-reads on a fallback interval, so with hints off (`WC_NOTIFY=0`), or a hint lost to a
//! reconnect, waits still end correctly, only later.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use uuid::Uuid;
use wc_retry::Backoff;
use wc_store::board::CHANNEL_BOARD;
use wc_store::connect::Connector;
use wc_store::notify::Hint;
use wc_store::work::{CHANNEL_DONE, CHANNEL_QUEUED};

/// Fallback re-read interval while hints are flowing.
const FALLBACK_WITH_HINTS: Duration = Duration::from_millis(500);
/// First re-read interval without hints; it doubles up to [`FALLBACK_MAX`].
const FALLBACK_WITHOUT_HINTS: Duration = Duration::from_millis(10);
/// Longest re-read interval without hints.
const FALLBACK_MAX: Duration = Duration::from_millis(250);

#[derive(Default)]
struct Registry<K> {
    waiters: Mutex<HashMap<K, HashMap<u64, Arc<Notify>>>>,
}

impl<K: std::hash::Hash + Eq + Clone> Registry<K> {
    fn add(&self, key: K, id: u64) -> Arc<Notify> {
        let n = Arc::new(Notify::new());
        self.waiters
            .lock()
            .expect("wake registry poisoned")
            .entry(key)
            .or_default()
            .insert(id, n.clone());
        n
    }

    fn remove(&self, key: &K, id: u64) {
        let mut map = self.waiters.lock().expect("wake registry poisoned");
        if let Some(set) = map.get_mut(key) {
            set.remove(&id);
            if set.is_empty() {
                map.remove(key);
            }
        }
    }

    fn wake(&self, key: &K) {
        if let Some(set) = self
            .waiters
            .lock()
            .expect("wake registry poisoned")
            .get(key)
        {
            for n in set.values() {
                n.notify_one();
            }
        }
    }

    fn count(&self, key: &K) -> usize {
        self.waiters
            .lock()
            .expect("wake registry poisoned")
            .get(key)
            .map_or(0, HashMap::len)
    }

    fn wake_all(&self) {
        for set in self
            .waiters
            .lock()
            .expect("wake registry poisoned")
            .values()
        {
            for n in set.values() {
                n.notify_one();
            }
        }
    }
}

struct Inner {
    hints: bool,
    next_id: AtomicU64,
    queued: Registry<String>,
    done: Registry<Uuid>,
    board: Registry<String>,
}

/// The process's wake-up hub. Cheap to clone.
#[derive(Clone)]
pub struct Wakeups {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Wakeups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wakeups")
            .field("hints", &self.inner.hints)
            .finish_non_exhaustive()
    }
}

impl Wakeups {
    fn new(hints: bool) -> Self {
        Self {
            inner: Arc::new(Inner {
                hints,
                next_id: AtomicU64::new(0),
                queued: Registry {
                    waiters: Mutex::default(),
                },
                done: Registry {
                    waiters: Mutex::default(),
                },
                board: Registry {
                    waiters: Mutex::default(),
                },
            }),
        }
    }

    /// No hints: waiters re-read durable state on a short, growing interval.
    pub fn polling() -> Self {
        Self::new(false)
    }

    /// Hints from a `LISTEN` connection made by `connector` (must be called inside a Tokio
    /// runtime).
    pub fn listening(connector: Connector) -> Self {
        let hub = Self::new(true);
        let mut rx = wc_store::notify::spawn_listener(
            connector,
            vec![
                CHANNEL_QUEUED.to_owned(),
                CHANNEL_DONE.to_owned(),
                CHANNEL_BOARD.to_owned(),
            ],
        );
        let weak = Arc::downgrade(&hub.inner);
        tokio::spawn(async move {
            while let Some(hint) = rx.recv().await {
                let Some(inner) = weak.upgrade() else { return };
                match hint {
                    Hint::Connected => {
                        inner.queued.wake_all();
                        inner.done.wake_all();
                        inner.board.wake_all();
                    }
                    Hint::Notice { channel, payload } if channel == CHANNEL_BOARD => {
                        inner.board.wake(&payload);
                    }
                    Hint::Notice { channel, payload } if channel == CHANNEL_QUEUED => {
                        inner.queued.wake(&payload);
                    }
                    Hint::Notice { channel, payload } if channel == CHANNEL_DONE => {
                        if let Ok(id) = payload.parse::<Uuid>() {
                            inner.done.wake(&id);
                        }
                    }
                    Hint::Notice { .. } => {}
                }
            }
        });
        hub
    }

    /// A waiter for work queued for runner `client_id`. Create it *before* reading durable
    /// state: a hint that arrives in between is kept and ends the next wait at once.
    pub fn on_queued(&self, client_id: &str) -> Waiter {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let notify = self.inner.queued.add(client_id.to_owned(), id);
        Waiter {
            hub: self.inner.clone(),
            key: Key::Queued(client_id.to_owned()),
            id,
            notify,
            fallback: self.fallback(),
            naps: 0,
        }
    }

    /// A waiter for work `work_id` reaching a terminal state (same rule as [`Self::on_queued`]).
    pub fn on_done(&self, work_id: Uuid) -> Waiter {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let notify = self.inner.done.add(work_id, id);
        Waiter {
            hub: self.inner.clone(),
            key: Key::Done(work_id),
            id,
            notify,
            fallback: self.fallback(),
            naps: 0,
        }
    }

    /// A waiter for a change of session `session_id`'s message board (same rule as
    /// [`Self::on_queued`]).
    pub fn on_board(&self, session_id: &wc_domain::SessionId) -> Waiter {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let notify = self.inner.board.add(session_id.to_string(), id);
        Waiter {
            hub: self.inner.clone(),
            key: Key::Board(session_id.to_string()),
            id,
            notify,
            fallback: self.fallback(),
            naps: 0,
        }
    }

    /// How many calls of this process wait on session `session_id`'s board right now: a long
    /// poll registers before its first read and leaves when it answers.
    pub fn board_waiters(&self, session_id: &wc_domain::SessionId) -> usize {
        self.inner.board.count(&session_id.to_string())
    }

    /// A waiter's re-read intervals: with hints a steady [`FALLBACK_WITH_HINTS`]; without,
    /// doubling from [`FALLBACK_WITHOUT_HINTS`] up to [`FALLBACK_MAX`]. No jitter: a waiter
    /// re-reads one row, its cadence crowds nobody.
    fn fallback(&self) -> Backoff {
        if self.inner.hints {
            Backoff::new(FALLBACK_WITH_HINTS, FALLBACK_WITH_HINTS)
        } else {
            Backoff::new(FALLBACK_WITHOUT_HINTS, FALLBACK_MAX)
        }
    }
}

enum Key {
    Queued(String),
    Done(Uuid),
    Board(String),
}

/// One registered waiter; unregisters itself when dropped.
pub struct Waiter {
    hub: Arc<Inner>,
    key: Key,
    id: u64,
    notify: Arc<Notify>,
    fallback: Backoff,
    /// Fallback intervals that ran out without a hint.
    naps: u32,
}

impl Waiter {
    /// Waits for a hint, the fallback interval, or `at_most`, whichever comes first. The
    /// caller then re-reads durable state.
    pub async fn wait(&mut self, at_most: Duration) {
        let nap = self.next_nap().min(at_most);
        tokio::select! {
            _ = self.notify.notified() => {}
            _ = tokio::time::sleep(nap) => self.naps = self.naps.saturating_add(1),
        }
    }

    /// The fallback interval of the next wait.
    fn next_nap(&self) -> Duration {
        self.fallback.delay(self.naps.saturating_add(1))
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        match &self.key {
            Key::Queued(k) => self.hub.queued.remove(k, self.id),
            Key::Done(k) => self.hub.done.remove(k, self.id),
            Key::Board(k) => self.hub.board.remove(k, self.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hint_before_the_wait_is_kept_and_waiters_unregister() {
        let hub = Wakeups::new(true);
        let mut w = hub.on_done(Uuid::nil());
        hub.inner.done.wake(&Uuid::nil());
        let started = std::time::Instant::now();
        w.wait(Duration::from_secs(5)).await;
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "the kept hint ended the wait"
        );
        drop(w);
        assert!(hub.inner.done.waiters.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn without_hints_the_wait_ends_on_the_fallback_interval() {
        let hub = Wakeups::polling();
        let mut w = hub.on_queued("host");
        let started = std::time::Instant::now();
        w.wait(Duration::from_secs(5)).await;
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(
            w.next_nap(),
            FALLBACK_WITHOUT_HINTS * 2,
            "the interval grows"
        );
    }
}
