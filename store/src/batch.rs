//! Writes to one busy row that meet in one process, written together.
//!
//! Some rows take every write of a kind: a session's row serializes its board's posts, a
//! caller's audit session takes each of its requests' events. Each write holds the row's lock
//! until its transaction ends, so concurrent writes to the row queue on the lock one by one,
//! each paying for its own statement start, commit and (for a synchronous commit) WAL flush.
//! A [`Combiner`] queues the writes to one key (a row, on one pool) instead: the first starts a
//! writer task for the key, writes arriving while it works join the queue, and the writer
//! hands each queue it takes (up to the combiner's bound) to the write function as one batch,
//! which writes it in one transaction and answers each write. The writer ends when it finds the
//! queue empty. Callers are answered only once their batch's transaction has ended, so what a
//! write reports is as durable as a write sent alone; a quiet row gets batches of one.
//!
//! The writer is a spawned task, not one of the callers: a caller that goes away (its request
//! was cancelled) never strands the writes queued behind it.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};

use deadpool_postgres::Pool;
use tokio::sync::oneshot;

use crate::StoreError;

/// Writes one batch: the items in queue order, answered in the same order.
pub(crate) type WriteBatch<K, I, O> =
    fn(Pool, K, Vec<I>) -> Pin<Box<dyn Future<Output = Vec<O>> + Send>>;

/// Which writer a write queues for: a key (a row) on one pool (one database).
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key<K> {
    pool: usize,
    key: K,
}

type Queue<I, O> = Vec<(I, oneshot::Sender<O>)>;

/// The queue of every key being written.
type Queues<K, I, O> = HashMap<Key<K>, Queue<I, O>>;

/// The queues of the keys being written; a key has an entry while its writer runs.
pub(crate) struct Combiner<K, I, O> {
    queues: Mutex<Option<Queues<K, I, O>>>,
    max_batch: usize,
    write: WriteBatch<K, I, O>,
}

impl<K, I, O> Combiner<K, I, O>
where
    K: Clone + Eq + std::hash::Hash + Send + Sync + 'static,
    I: Send + 'static,
    O: Send + 'static,
{
    /// A combiner writing batches of at most `max_batch` items with `write`.
    pub(crate) const fn new(max_batch: usize, write: WriteBatch<K, I, O>) -> Self {
        Self {
            queues: Mutex::new(None),
            max_batch,
            write,
        }
    }

    /// Queues `item` for `key` on `pool` and waits for its answer.
    /// [`StoreError::WriterLost`] if the writer stopped before answering (it panicked).
    pub(crate) async fn submit(
        &'static self,
        pool: &Pool,
        key: &K,
        item: I,
    ) -> Result<O, StoreError> {
        let key = Key {
            pool: std::ptr::from_ref(pool.manager()) as usize,
            key: key.clone(),
        };
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
            match queues.get_or_insert_with(HashMap::new).entry(key.clone()) {
                Entry::Occupied(mut e) => {
                    e.get_mut().push((item, reply));
                    false
                }
                Entry::Vacant(e) => {
                    e.insert(vec![(item, reply)]);
                    true
                }
            }
        };
        if start {
            // The guard exists before the task does: a task dropped before its first poll (a
            // runtime shutting down) still removes the entry and answers its writes.
            let guard = EntryGuard {
                combiner: self,
                key: Some(key.clone()),
            };
            tokio::spawn(self.drive(pool.clone(), key, guard));
        }
        answer.await.map_err(|_| StoreError::WriterLost)
    }

    /// The writer of `key`: takes its queue until it is empty, then removes the entry under
    /// the same lock, so a write either joins a queue this writer will take or starts a new
    /// writer.
    async fn drive(&'static self, pool: Pool, key: Key<K>, mut guard: EntryGuard<K, I, O>) {
        loop {
            let batch: Queue<I, O> = {
                let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
                let map = queues.get_or_insert_with(HashMap::new);
                match map.get_mut(&key) {
                    Some(queue) if !queue.is_empty() => {
                        let n = queue.len().min(self.max_batch);
                        queue.drain(..n).collect()
                    }
                    _ => {
                        map.remove(&key);
                        guard.key = None;
                        return;
                    }
                }
            };
            let (items, replies): (Vec<I>, Vec<oneshot::Sender<O>>) = batch.into_iter().unzip();
            let answers = (self.write)(pool.clone(), key.key.clone(), items).await;
            for (reply, answer) in replies.into_iter().zip(answers) {
                // A caller that went away takes no answer; its write stands.
                let _ = reply.send(answer);
            }
        }
    }
}

/// Removes the writer's entry if the writer ends without doing so itself (a panic, or a task
/// dropped unpolled), so that
/// the key's next write starts a new writer; the writes queued in it are dropped, and their
/// callers get [`StoreError::WriterLost`].
struct EntryGuard<K: Eq + std::hash::Hash + 'static, I: 'static, O: 'static> {
    combiner: &'static Combiner<K, I, O>,
    key: Option<Key<K>>,
}

impl<K: Eq + std::hash::Hash, I, O> Drop for EntryGuard<K, I, O> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let mut queues = self
                .combiner
                .queues
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(map) = queues.as_mut() {
                map.remove(&key);
            }
        }
    }
}

/// Awaits `futures` together, polling them in their order every time, so that each one's
/// first poll (which sends its request) comes before the next one's; their outputs in order.
pub(crate) async fn join_in_order<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *output = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll, Waker};

    use super::*;
    use crate::config::{DatabaseConfig, DatabaseUrl};

    static ECHO: Combiner<String, u32, u32> =
        Combiner::new(4, |_, _, items| Box::pin(async move { items }));

    fn queued(key: &str) -> Option<usize> {
        let queues = ECHO.queues.lock().unwrap();
        queues
            .as_ref()
            .and_then(|m| m.iter().find(|(k, _)| k.key == key).map(|(_, q)| q.len()))
    }

    /// A pool that never connects here (nothing is written through it).
    fn pool() -> Pool {
        let url = DatabaseUrl::parse("postgres://nobody@127.0.0.1:9/none").unwrap();
        crate::pool::build_pool(&DatabaseConfig::new(url)).unwrap()
    }

    #[test]
    fn a_writer_dropped_before_its_first_poll_frees_its_key_and_answers_its_writes() {
        let pool = pool();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        let mut write = {
            let _inside = runtime.enter();
            let key = "dropped".to_owned();
            let mut write = Box::pin(async move { ECHO.submit(&pool, &key, 7).await });
            // Queued, and its writer spawned on a runtime that never runs it.
            assert!(write.as_mut().poll(&mut cx).is_pending());
            write
        };
        assert_eq!(queued("dropped"), Some(1));
        drop(runtime);
        assert_eq!(queued("dropped"), None, "the entry went with the writer");
        match write.as_mut().poll(&mut cx) {
            Poll::Ready(Err(StoreError::WriterLost)) => {}
            other => panic!("expected WriterLost, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn each_write_gets_its_own_answer() {
        let pool = pool();
        let mut writes = tokio::task::JoinSet::new();
        for i in 0..10u32 {
            let pool = pool.clone();
            writes.spawn(
                async move { (i, ECHO.submit(&pool, &"echo".to_owned(), i).await.unwrap()) },
            );
        }
        while let Some(done) = writes.join_next().await {
            let (sent, answered) = done.unwrap();
            assert_eq!(sent, answered);
        }
        assert_eq!(queued("echo"), None);
    }
}
