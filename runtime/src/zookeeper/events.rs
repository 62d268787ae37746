//! The event stream on ZooKeeper: job events written only while someone
//! listens, as on Redis (where nobody subscribed means nothing is
//! published).
//!
//! - A listener is an ephemeral sequential znode under `R/.jw/listeners`,
//!   made when a stream starts and deleted when it is dropped (or with its
//!   session). Every board keeps a child watch on that directory from its
//!   connect on, so it knows at once whether anyone listens.
//! - While someone listens, a board writes the events of each change it
//!   made (posted, claimed, and the job's history events: consumed,
//!   abandoned, failed, retried, trashed, stalled, cancelled, priority,
//!   track) as one persistent sequential znode under `R/.jw/events`
//!   holding a JSON array, after the change committed: like pub/sub, an
//!   event is not part of the change, and a board that dies in between
//!   loses it.
//! - A stream lists the directory with a watch and reads each new znode
//!   once, in sequence order (one board's events in the order it made
//!   them; across boards, the order the server received them). Streams
//!   delete the oldest znodes beyond [`EVENTS_KEPT`], so a stream that
//!   falls that far behind misses events.
//! - A stream ends when its listener's session ends (the listener goes
//!   with it) and when its reader falls [`STREAM_BUFFER`] events behind
//!   (as Redis drops a subscriber past its output buffer limit); the
//!   reader misses events until it listens again (`board::follow`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::mpsc::Sender;
use zookeeper_client as zk;

use crate::board::EventStream;
use crate::error::Result;
use crate::zookeeper::wait::reconnected;
use crate::zookeeper::ZooKeeperBoard;

/// Event znodes kept (the oldest beyond go).
pub(crate) const EVENTS_KEPT: usize = 2_000;
/// Events a stream holds for its reader: one that falls further behind
/// ends (its reader misses events until it listens again), rather than
/// hold ever more of them in memory.
pub(crate) const STREAM_BUFFER: usize = 10_000;
/// Pause before a watch is tried again after an error.
const RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// `R/.jw/listeners`.
fn listeners(root: &str) -> String {
    format!("{root}/.jw/listeners")
}

/// `R/.jw/events`.
fn events_dir(root: &str) -> String {
    format!("{root}/.jw/events")
}

/// The sequence number of a sequential znode's name.
fn sequence(name: &str) -> Option<i64> {
    name.rsplit('-').next()?.parse().ok()
}

impl ZooKeeperBoard {
    /// Starts watching whether anyone listens to the events (at connect):
    /// the watch ends with the board.
    pub(crate) fn watch_listeners(&self) {
        let inner = Arc::downgrade(&self.inner);
        let listening = self.inner.listening.clone();
        self.session().runtime().spawn(async move {
            while let Some(board) = Weak::upgrade(&inner).map(|inner| ZooKeeperBoard { inner }) {
                let watched = board.note_listeners(&listening).await;
                let session = board.session().client().await.ok();
                drop(board);
                let (Some(watcher), Some(client)) = (watched, session) else {
                    tokio::time::sleep(RETRY).await;
                    continue;
                };
                let mut states = client.state_watcher();
                drop(client);
                tokio::select! {
                    _ = watcher.changed() => {}
                    _ = reconnected(&mut states) => {}
                }
            }
        });
    }

    /// Reads whether anyone listens into `listening`; the watch that fires
    /// when that may change.
    async fn note_listeners(&self, listening: &AtomicBool) -> Option<zk::OneshotWatcher> {
        let client = self.session().client().await.ok()?;
        let dir = listeners(self.root());
        match client.list_and_watch_children(&dir).await {
            Ok((children, watcher)) => {
                listening.store(!children.is_empty(), Ordering::Relaxed);
                Some(watcher)
            }
            Err(zk::Error::NoNode) => {
                listening.store(false, Ordering::Relaxed);
                client.check_and_watch_stat(&dir).await.ok().map(|(_, w)| w)
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot watch the event listeners; trying again");
                None
            }
        }
    }

    /// Writes `events` of job `job` in `queue` (objects with `event`, `at`
    /// and details) when anyone listens.
    pub(crate) fn emit(&self, queue: &str, job: &str, events: &[Value]) {
        if !self.inner.listening.load(Ordering::Relaxed) {
            return;
        }
        let all: Vec<Value> = events
            .iter()
            .map(|e| {
                let mut e = e.clone();
                e["queue"] = queue.into();
                e["job"] = job.into();
                e
            })
            .collect();
        let Some(client) = self.session().current() else {
            return;
        };
        let data = serde_json::to_vec(&all).unwrap_or_default();
        let path = format!("{}/e-", events_dir(self.root()));
        // The request is sent when made, so one board's events keep their
        // order; its answer is not awaited (an event is best effort, like
        // a message on pub/sub).
        drop(client.create(&path, &data, &self.session().access().sequential()));
    }

    /// The event stream (see the module docs); with `tracked_only`, only
    /// the events of jobs tracked when they are read.
    pub(crate) async fn event_stream(&self, tracked_only: bool) -> Result<EventStream> {
        let what = "cannot listen to the events";
        let client = self.client(what).await?;
        // The session the listener lives in (it is ephemeral).
        let session = self.session().generation();
        let access = self.session().access();
        let dir = events_dir(self.root());
        for d in [&dir, &listeners(self.root())] {
            client
                .mkdir(d, &access.persistent())
                .await
                .map_err(|e| self.session().error(what, &e))?;
        }
        // Events already there are older than the stream.
        let first = client
            .list_children(&dir)
            .await
            .map_err(|e| self.session().error(what, &e))?
            .iter()
            .filter_map(|n| sequence(n))
            .max()
            .unwrap_or(-1);
        let me = format!("{}/l-", listeners(self.root()));
        let (_, seq) = client
            .create(&me, b"", &access.ephemeral_sequential())
            .await
            .map_err(|e| self.session().error(what, &e))?;
        let me = format!("{me}{seq}");
        let (tx, rx) = tokio::sync::mpsc::channel::<Value>(STREAM_BUFFER);
        let board = self.clone();
        self.session().runtime().spawn(async move {
            tokio::select! {
                _ = board.follow_events(first, tracked_only, session, &tx) => {}
                _ = tx.closed() => {}
            }
            if let Some(client) = board.session().current() {
                let _ = client.delete(&me, None).await;
            }
        });
        let stream =
            futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) });
        Ok(stream.boxed())
    }

    /// Sends the events written after sequence `last`, in order, as they
    /// come; until the receiver is gone, or the session the listener lives
    /// in (`session`, a generation) ends (expired or closed, replaced or
    /// not yet): its listener goes with it and boards stop writing events,
    /// so the stream ends rather than go silent (`board::follow` then
    /// listens again).
    async fn follow_events(&self, mut last: i64, tracked_only: bool, session: u64, tx: &Sender<Value>) {
        let dir = events_dir(self.root());
        let ended = || {
            self.session().generation() != session
                || self.session().current().is_none_or(|c| c.state().is_terminated())
        };
        loop {
            if ended() {
                tracing::debug!("the zookeeper session of the event listener ended; the stream ends");
                return;
            }
            let Ok(client) = self.session().client().await else {
                tokio::time::sleep(RETRY).await;
                continue;
            };
            if ended() {
                continue;
            }
            let mut states = client.state_watcher();
            let (names, watcher) = match client.list_and_watch_children(&dir).await {
                Ok(listed) => listed,
                Err(e) => {
                    tracing::debug!(error = %e, "cannot list the events; trying again");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            };
            let mut numbered: Vec<(i64, String)> = names
                .into_iter()
                .filter_map(|n| sequence(&n).map(|s| (s, n)))
                .collect();
            numbered.sort();
            self.trim_events(&client, &dir, &numbered);
            let fresh: Vec<&(i64, String)> = numbered.iter().filter(|(s, _)| *s > last).collect();
            let read = self
                .read_many(
                    "cannot read the events",
                    fresh.iter().map(|(_, n)| format!("{dir}/{n}")).collect(),
                )
                .await
                .unwrap_or_default();
            for ((s, _), data) in fresh.iter().zip(read) {
                last = *s;
                let Some((data, _)) = data else { continue };
                let events: Vec<Value> = serde_json::from_slice(&data).unwrap_or_default();
                for e in events {
                    if tracked_only && !self.is_tracked(&e).await {
                        continue;
                    }
                    // A reader this far behind ends its stream, as Redis
                    // drops a subscriber past its output buffer limit.
                    if tx.try_send(e).is_err() {
                        return;
                    }
                }
            }
            tokio::select! {
                _ = watcher.changed() => {}
                _ = reconnected(&mut states) => {}
            }
        }
    }

    /// Deletes the oldest event znodes beyond [`EVENTS_KEPT`] (in the
    /// background; racing streams delete the same ones harmlessly).
    fn trim_events(&self, client: &zk::Client, dir: &str, numbered: &[(i64, String)]) {
        let over = numbered.len().saturating_sub(EVENTS_KEPT);
        let deletes: Vec<_> = numbered[..over]
            .iter()
            .map(|(_, n)| client.delete(&format!("{dir}/{n}"), None))
            .collect();
        if !deletes.is_empty() {
            self.session()
                .runtime()
                .spawn(futures_util::future::join_all(deletes));
        }
    }

    /// Whether the job an event names is tracked now.
    async fn is_tracked(&self, e: &Value) -> bool {
        let (Some(queue), Some(job)) = (e["queue"].as_str(), e["job"].as_str()) else {
            return false;
        };
        let Ok(paths) = self.paths(queue) else {
            return false;
        };
        let entry = paths.tracked_entry(job);
        matches!(
            self.read_many("cannot read a tracking entry", vec![entry])
                .await
                .as_deref(),
            Ok([Some(_)])
        )
    }
}

/// A new board's listening flag (nobody, until the watch tells).
pub(crate) fn not_listening() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

/// The `posted` event of a job named `name`, at `at_ms`.
pub(crate) fn posted(name: &str, at_ms: i64) -> Value {
    json!({ "event": "posted", "at": at_ms, "name": name })
}

/// The `claimed` event of a claim by `worker` with fencing `token`, made at
/// `at_ms`.
pub(crate) fn claimed(worker: &str, token: u64, at_ms: i64) -> Value {
    json!({ "event": "claimed", "at": at_ms, "worker": worker, "token": token })
}
