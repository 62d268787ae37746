//! The leases a heartbeat holds, and what the worker loop tells it of
//! them: a lease claimed or handed over, a handler started under it (so
//! the heartbeat can stop it), a handler finished, a lease settled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// When to extend it beside the rounds (a lease handed over, see
    /// [`Heartbeat::hold_handed`]).
    pub extend_at: Option<Instant>,
}

impl Held {
    /// A lease just held, confirmed at `confirmed`, extended also at
    /// `extend_at`.
    pub(super) fn new(lease: &Lease, confirmed: Instant, extend_at: Option<Instant>) -> Self {
        Held {
            lease: Arc::new(lease.extend_handle()),
            confirmed,
            finished: false,
            handler: None,
            extend_at,
        }
    }
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

/// Wakes the heartbeat's loop for the leases extended by a time of their
/// own, beside the rounds: those handed over, whose first round may come
/// too late for a second one before the verdict.
#[derive(Default)]
pub(super) struct Urgent {
    wake: Notify,
    /// When the loop looks at the held leases again by itself (`None`:
    /// not known yet); written and read under the held map's lock.
    looks_at: Mutex<Option<Instant>>,
}

impl Urgent {
    /// Waits until leases of `held` are due for their own extend, and
    /// takes them (their time is cleared). With none to come, it looks
    /// again every `idle` by itself, so that a lease handed over next,
    /// due later than that, needs no wake (a wake-up of this thread
    /// beside the handler's start costs the pickup).
    pub(super) async fn next(&self, held: &HeldMap, idle: Duration) -> Vec<LeaseKey> {
        loop {
            let now = Instant::now();
            let mut due = Vec::new();
            let mut next = now + idle;
            if let Ok(mut h) = held.lock() {
                for (key, v) in h.iter_mut() {
                    match v.extend_at {
                        Some(at) if at <= now => {
                            v.extend_at = None;
                            due.push(key.clone());
                        }
                        Some(at) => next = next.min(at),
                        None => {}
                    }
                }
                if let Ok(mut l) = self.looks_at.lock() {
                    *l = Some(if due.is_empty() { next } else { now });
                }
            }
            if !due.is_empty() {
                return due;
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep_until(next.into()) => {}
            }
        }
    }

    /// Whether the loop looks at the held leases by `at` without being
    /// woken (asked under the held map's lock).
    fn looks_by(&self, at: Instant) -> bool {
        self.looks_at.lock().is_ok_and(|l| l.is_some_and(|t| t <= at))
    }

    /// Puts back leases taken but not extended, to extend at once.
    pub(super) fn put_back(&self, held: &HeldMap, keys: &[LeaseKey]) {
        let now = Instant::now();
        if let Ok(mut h) = held.lock() {
            for k in keys {
                if let Some(v) = h.get_mut(k) {
                    v.extend_at = Some(now);
                }
            }
        }
    }
}

impl Heartbeat {
    /// Keeps `lease` alive from now on (it was just claimed, by a call sent
    /// at `sent`): the heartbeat takes a handle on it that only extends.
    pub(in crate::worker) fn hold(&self, lease: &Lease, sent: Instant) {
        if let Ok(mut held) = self.held.lock() {
            held.insert(key_of(lease), Held::new(lease, sent, None));
        }
    }

    /// Keeps a lease a post handed to this worker alive from now on. It
    /// counts from when the board says it began after (the registering
    /// claim's sending), else from half an expiry ago (a hand-off read
    /// later is given back, not handed on). Unless a round extends it
    /// first, its own extend goes out a third of its horizon after that
    /// (or as soon as the heartbeat is free, when that is past), as a
    /// claimed lease's first round would: the rounds then extend it once
    /// more before it could be called lost. Nothing is sent beside the
    /// start of a job just handed to an idle worker.
    pub(in crate::worker) fn hold_handed(&self, lease: &Lease) {
        let now = Instant::now();
        let since = lease
            .began()
            .unwrap_or_else(|| now.checked_sub(self.expiry / 2).unwrap_or(now));
        let at = since + self.horizon / 3;
        let Ok(mut held) = self.held.lock() else { return };
        held.insert(key_of(lease), Held::new(lease, since, Some(at)));
        // Waking the heartbeat's thread beside the handler's start costs
        // the pickup: only when the loop would not look by then anyway.
        let looks = self.urgent.looks_by(at);
        drop(held);
        if !looks {
            self.urgent.wake.notify_one();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobId;

    fn hold(held: &HeldMap, job: &str, extend_at: Option<Instant>) -> LeaseKey {
        let lease = Lease::new("q", JobId(job.into()), "me", 1);
        let entry = Held::new(&lease, Instant::now(), extend_at);
        held.lock().unwrap().insert(key_of(&lease), entry);
        key_of(&lease)
    }

    const IDLE: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn a_lease_is_taken_once_when_its_own_extend_falls_due() {
        let (held, urgent) = (HeldMap::default(), Urgent::default());
        let now = Instant::now();
        let later = now + Duration::from_secs(3600);
        let due = hold(&held, "due", Some(now));
        hold(&held, "later", Some(later));
        hold(&held, "rounds only", None);
        assert_eq!(urgent.next(&held, IDLE).await, vec![due.clone()]);
        let again = tokio::time::timeout(Duration::from_millis(50), urgent.next(&held, IDLE));
        assert!(again.await.is_err(), "taken once; the later one is not due");
        // Asleep until the later one: a lease due after it needs no wake.
        assert!(urgent.looks_by(later) && !urgent.looks_by(now));
        urgent.put_back(&held, std::slice::from_ref(&due));
        assert_eq!(urgent.next(&held, IDLE).await, vec![due]);
    }

    #[tokio::test]
    async fn with_none_to_come_the_loop_looks_again_by_itself() {
        let (held, urgent) = (HeldMap::default(), Urgent::default());
        hold(&held, "rounds only", None);
        assert!(!urgent.looks_by(Instant::now() + IDLE * 2), "not known yet");
        let wait = tokio::time::timeout(Duration::from_millis(50), urgent.next(&held, IDLE));
        assert!(wait.await.is_err());
        // A lease handed over now, due after the idle look, needs no wake.
        let now = Instant::now();
        assert!(urgent.looks_by(now + IDLE) && !urgent.looks_by(now));
    }

    #[tokio::test]
    async fn a_lease_held_while_waiting_wakes_the_wait() {
        let (held, urgent) = (HeldMap::default(), Arc::new(Urgent::default()));
        let wait = tokio::spawn({
            let (held, urgent) = (held.clone(), urgent.clone());
            async move { urgent.next(&held, IDLE).await }
        });
        tokio::task::yield_now().await;
        let key = hold(&held, "handed", Some(Instant::now()));
        urgent.wake.notify_one();
        assert_eq!(wait.await.unwrap(), vec![key]);
    }
}
