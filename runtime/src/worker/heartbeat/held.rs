//! The leases a heartbeat holds, and what the worker loop tells it of
//! them: a lease claimed or handed over, a handler started under it (so
//! the heartbeat can stop it), a handler finished, a lease settled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;
use tokio::task::AbortHandle;

use crate::handler::CancelFlag;
use crate::job::Lease;
use crate::worker::heartbeat::{key_of, Heartbeat, LeaseKey};

/// A held lease.
pub(super) struct Held {
    /// The heartbeat's handle on the lease (it only extends it; the
    /// worker's settle step keeps the one it settles).
    pub lease: Arc<Lease>,
    /// When the last claim or extend that the server confirmed was sent,
    /// by this process' clock (the lease runs at least an expiry from
    /// then); for a lease handed over, a time it surely began after.
    pub confirmed: Instant,
    /// Its handler finished well; the lease waits to be consumed.
    pub finished: bool,
    /// How to stop its handler, once started.
    pub handler: Option<HandlerStop>,
}

/// What stops a running handler: its cancel flag, and its task's abort.
pub(super) struct HandlerStop {
    cancel: CancelFlag,
    abort: Option<AbortHandle>,
}

impl HandlerStop {
    pub(super) fn stop(&self) {
        self.cancel.cancel();
        if let Some(task) = &self.abort {
            task.abort();
        }
    }
}

pub(super) type HeldMap = Arc<Mutex<HashMap<LeaseKey, Held>>>;

/// Leases to extend at once, not at the next beat (handed over: they may
/// have waited up to half a lease to be read).
#[derive(Default)]
pub(super) struct Urgent {
    keys: Mutex<Vec<LeaseKey>>,
    wake: Notify,
}

impl Urgent {
    fn push(&self, key: LeaseKey) {
        if let Ok(mut keys) = self.keys.lock() {
            keys.push(key);
        }
        self.wake.notify_one();
    }

    /// Puts back leases taken but not extended.
    pub(super) fn put_back(&self, keys: Vec<LeaseKey>) {
        if let Ok(mut held) = self.keys.lock() {
            held.extend(keys);
        }
    }

    /// Waits for leases to extend at once, and takes them.
    pub(super) async fn next(&self) -> Vec<LeaseKey> {
        loop {
            let keys = self
                .keys
                .lock()
                .map(|mut k| std::mem::take(&mut *k))
                .unwrap_or_default();
            if !keys.is_empty() {
                return keys;
            }
            self.wake.notified().await;
        }
    }
}

impl Heartbeat {
    /// Keeps `lease` alive from now on (it was just claimed, by a call sent
    /// at `sent`): the heartbeat takes a handle on it that only extends.
    pub(in crate::worker) fn hold(&self, lease: &Lease, sent: Instant) {
        if let Ok(mut held) = self.held.lock() {
            held.insert(
                key_of(lease),
                Held {
                    lease: Arc::new(lease.extend_handle()),
                    confirmed: sent,
                    finished: false,
                    handler: None,
                },
            );
        }
    }

    /// Keeps a lease a post handed to this worker alive from now on. It
    /// counts from when the board says it began after (the registering
    /// claim's sending), else from half an expiry ago (a hand-off read
    /// later is given back, not handed on). One begun a third of its
    /// horizon ago or more is extended at once; a younger one waits for the
    /// next round, a beat (a third of the horizon) at most, and is still
    /// confirmed a sixth of its horizon before it is called lost.
    pub(in crate::worker) fn hold_handed(&self, lease: &Lease) {
        let now = Instant::now();
        let since = lease
            .began()
            .unwrap_or_else(|| now.checked_sub(self.expiry / 2).unwrap_or(now));
        self.hold(lease, since);
        if now.saturating_duration_since(since) >= self.horizon / 3 {
            self.urgent.push(key_of(lease));
        }
    }

    /// Lets the heartbeat raise the cancel flag of the handler about to
    /// start under lease `key` when the lease is over (the loop may be
    /// waiting on a board call then); false when it is over already.
    pub(in crate::worker) fn stops(&self, key: &LeaseKey, cancel: &CancelFlag) -> bool {
        let mut held = self.held.lock();
        let Some(h) = held.as_mut().ok().and_then(|h| h.get_mut(key)) else {
            return false;
        };
        h.handler = Some(HandlerStop {
            cancel: cancel.clone(),
            abort: None,
        });
        true
    }

    /// Lets the heartbeat abort the task of the handler started under
    /// lease `key` too; false when the lease is over already (its flag is
    /// raised: the caller aborts).
    pub(in crate::worker) fn aborts(&self, key: &LeaseKey, task: &AbortHandle) -> bool {
        let mut held = self.held.lock();
        let Some(stop) = held.as_mut().ok().and_then(|h| h.get_mut(key)?.handler.as_mut()) else {
            return false;
        };
        stop.abort = Some(task.clone());
        true
    }

    /// True while the server confirmed the lease `key` (claim or extend)
    /// less than half its horizon ago, by this process' clock (which runs on
    /// while the process is stopped); false for a lease not held.
    pub(in crate::worker) fn surely_held(&self, key: &LeaseKey) -> bool {
        let Ok(held) = self.held.lock() else {
            return false;
        };
        held.get(key)
            .is_some_and(|h| h.confirmed.elapsed() < self.horizon / 2)
    }

    /// Marks a held lease as done (its handler finished well; the loop's
    /// batched consume or, should the loop freeze first, the watchdog
    /// consumes it) or, `false`, as not done (the loop stopped it first).
    pub(in crate::worker) fn mark_done(&self, key: &LeaseKey, done: bool) {
        mark(&self.held, key, || done);
    }

    /// [`mark_done`](Self::mark_done) for a handler's thread, as `done()` says
    /// under the map's lock (so it cannot undo a later "not done" of the loop).
    pub(in crate::worker) fn finisher(
        &self,
    ) -> impl Fn(&LeaseKey, &dyn Fn() -> bool) + Send + Sync + 'static {
        let held = self.held.clone();
        move |key, done| mark(&held, key, done)
    }

    /// Stops extending a lease.
    pub(in crate::worker) fn release(&self, key: &LeaseKey) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(key);
        }
    }
}

fn mark(held: &HeldMap, key: &LeaseKey, done: impl FnOnce() -> bool) {
    if let Some(h) = held.lock().ok().as_mut().and_then(|h| h.get_mut(key)) {
        h.finished = done();
    }
}
