//! Group commit of concurrent posts. A post to a queue with no post call
//! on its way goes at once, alone: posting one job at a time costs what it
//! did. A post that finds a call to its queue on its way waits for it to
//! return, and rides in the next call with every post that arrived
//! meanwhile (up to [`POST_BATCH`] jobs and [`GROUP_BYTES`]). So an
//! application posting from many tasks at once gets batched posts: the
//! server runs one script per batch instead of one per job.
//!
//! Each post keeps its own reply (`exists`, `duplicate`, … are per job);
//! a call that fails fails every post in it. A post whose caller stops
//! waiting still goes out with its batch, like any request already sent.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::redis::connect::Connection;
use crate::redis::keys::QueueKeys;
use crate::redis::post::{post, Prepared, POST_BATCH};
use crate::redis::reply::Reply;

/// Most posting bytes in one grouped call (a lone post may be larger).
const GROUP_BYTES: usize = 1 << 20;

/// A post waiting for the call on its way: its job and where its reply goes.
struct Waiting {
    job: Prepared,
    answer: oneshot::Sender<Result<(Prepared, Reply)>>,
}

/// The posts waiting per queue namespace. A queue is in the map while a
/// call to it is on its way (the map holds the posts for the next call).
#[derive(Default)]
pub(crate) struct PostGroups {
    queues: Mutex<HashMap<String, VecDeque<Waiting>>>,
}

impl PostGroups {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, VecDeque<Waiting>>> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Posts `job` to `keys`' queue: at once when no call to the queue is
    /// on its way, else with the next call. Returns the job and its reply.
    pub(crate) async fn post(
        self: &Arc<Self>,
        conn: &Connection,
        keys: &Arc<QueueKeys>,
        job: Prepared,
    ) -> Result<(Prepared, Reply)> {
        let (answer, reply) = oneshot::channel();
        let lone = {
            let mut queues = self.lock();
            match queues.get_mut(&keys.namespace) {
                Some(waiting) => {
                    waiting.push_back(Waiting { job, answer });
                    None
                }
                None => {
                    queues.insert(keys.namespace.clone(), VecDeque::new());
                    Some(job)
                }
            }
        };
        let Some(job) = lone else {
            return reply.await.map_err(|_| {
                Error::unavailable(
                    "post interrupted: the runtime shut down while it waited to be sent or for its reply",
                )
            })?;
        };
        let turn = Turn::new(self, conn, keys, true);
        let sent = post(conn, keys, &[&job]).await;
        turn.pass();
        let reply = sent?.into_iter().next().unwrap_or(Reply(Vec::new()));
        Ok((job, reply))
    }

    /// Takes the next batch of `namespace`'s waiting posts; none left ends
    /// the queue's turn (the next post goes at once again).
    fn next_batch(&self, namespace: &str) -> Vec<Waiting> {
        let mut queues = self.lock();
        let Some(waiting) = queues.get_mut(namespace) else {
            return Vec::new();
        };
        let mut batch = Vec::new();
        let mut bytes = 0;
        while let Some(w) = waiting.front() {
            let size = w.job.size();
            if !batch.is_empty() && (batch.len() == POST_BATCH || bytes + size > GROUP_BYTES) {
                break;
            }
            bytes += size;
            batch.extend(waiting.pop_front());
        }
        if batch.is_empty() {
            queues.remove(namespace);
        }
        batch
    }

    /// Sends the waiting posts of `keys`' queue, batch after batch, until
    /// none is left.
    async fn drain(self: Arc<Self>, conn: Connection, keys: Arc<QueueKeys>) {
        let turn = Turn::new(&self, &conn, &keys, false);
        loop {
            // Let the callers just answered post their next jobs first:
            // they ride in this batch rather than the one after.
            tokio::task::yield_now().await;
            let batch = self.next_batch(&keys.namespace);
            if batch.is_empty() {
                break;
            }
            let jobs: Vec<&Prepared> = batch.iter().map(|w| &w.job).collect();
            let sent = post(&conn, &keys, &jobs).await;
            drop(jobs);
            match sent {
                Ok(replies) => {
                    for (w, reply) in batch.into_iter().zip(replies) {
                        let _ = w.answer.send(Ok((w.job, reply)));
                    }
                }
                Err(e) => {
                    for w in batch {
                        let _ = w.answer.send(Err(e.clone()));
                    }
                }
            }
        }
        turn.done();
    }
}

/// A queue's turn to send: whoever holds it must, when its call returns,
/// hand the waiting posts on (a lone post starts a drain task) or end the
/// turn. Dropped while armed (the lone post's caller stopped waiting, or
/// the runtime shut down under a drain), it still does so, so that no post
/// waits for a call that will not come.
struct Turn {
    groups: Arc<PostGroups>,
    conn: Connection,
    keys: Arc<QueueKeys>,
    /// Held by a lone post (may start a drain) rather than a drain task.
    lone: bool,
    armed: bool,
}

impl Turn {
    fn new(groups: &Arc<PostGroups>, conn: &Connection, keys: &Arc<QueueKeys>, lone: bool) -> Turn {
        Turn {
            groups: groups.clone(),
            conn: conn.clone(),
            keys: keys.clone(),
            lone,
            armed: true,
        }
    }

    /// The lone post's call returned: posts that arrived meanwhile go in a
    /// drain task, so that this caller has its reply now.
    fn pass(mut self) {
        self.armed = false;
        self.hand_on();
    }

    /// The drain task found nothing left (and ended the turn).
    fn done(mut self) {
        self.armed = false;
    }

    fn hand_on(&self) {
        let mut queues = self.groups.lock();
        let Some(waiting) = queues.get(&self.keys.namespace) else {
            return;
        };
        if waiting.is_empty() {
            queues.remove(&self.keys.namespace);
            return;
        }
        drop(queues);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(self.groups.clone().drain(self.conn.clone(), self.keys.clone()));
            }
            Err(_) => self.abandon(),
        }
    }

    /// Ends the turn without sending: the waiting posts fail (their
    /// callers see "interrupted"; nothing of theirs was sent).
    fn abandon(&self) {
        self.groups.lock().remove(&self.keys.namespace);
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if self.lone {
            self.hand_on();
        } else {
            self.abandon();
        }
    }
}
