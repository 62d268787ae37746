//! The heartbeat's lease loops: one extends every held lease each beat,
//! one extends the leases handed over when each falls due, and one calls
//! a lease lost once the server has not confirmed it for nearly its
//! horizon. The last is apart from the others so that an extend that
//! hangs (a frozen server answers nothing until its response timeout)
//! delays no verdict: a handler must stop before its lease may have run
//! out on the server, or another worker may run the job beside it.

use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::board::{AnyBoard, Board};
use crate::worker::heartbeat::held::{HeldMap, Urgent};
use crate::worker::heartbeat::{LeaseKey, Link, Lost};

/// The horizon and the beat of a worker's leases.
#[derive(Clone, Copy)]
pub(super) struct Beat {
    /// The lease's expiry, as asked of each extend.
    pub expiry: Duration,
    /// How long a lease can be trusted without a confirmed extend.
    pub horizon: Duration,
    /// How often each lease is extended (a third of the horizon), and how
    /// long one extend may wait for its reply.
    pub every: Duration,
}

impl Beat {
    /// When a lease last confirmed at `confirmed` is called lost: half a
    /// beat before it may run out on the server (the margin for its
    /// handler to stop).
    fn due(&self, confirmed: Instant) -> Instant {
        confirmed + self.horizon.saturating_sub(self.every / 2)
    }
}

/// Extends every held lease, a round per beat: each round begins a beat
/// after the one before began (a round lasts a beat at most, once the
/// board is connected).
pub(super) async fn extend_loop(link: &Link, held: &HeldMap, beat: Beat, lost: &impl Fn(LeaseKey, Lost)) {
    loop {
        let next = Instant::now() + beat.every;
        extend_held(link.board().await, held, None, beat, lost).await;
        tokio::time::sleep_until(next.into()).await;
    }
}

/// How long the urgent loop waits after a failed connection attempt (or a
/// beat, when shorter) before it tries again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Extends the urgent leases as they fall due, beside the rounds.
pub(super) async fn urgent_loop(
    link: &Link,
    (held, urgent): (&HeldMap, &Urgent),
    beat: Beat,
    lost: &impl Fn(LeaseKey, Lost),
) {
    loop {
        let keys = urgent.next(held, beat.every / 2).await;
        match link.board().await {
            Some(board) => extend_held(Some(board), held, Some(&keys), beat, lost).await,
            // Not connected yet: kept for the next try, after a pause (a
            // refused connection fails at once; the other loops wait a beat).
            None => {
                tokio::time::sleep(RETRY_PAUSE.min(beat.every)).await;
                urgent.put_back(held, &keys);
            }
        }
    }
}

/// Extends every held lease (or those of `only`) once, all at once, each
/// extend bounded by a beat; reports the leases refused as lost. A lease
/// is confirmed as of when its extend was sent: the server set the new
/// expiry after that.
pub(super) async fn extend_held(
    board: Option<&AnyBoard>,
    held: &HeldMap,
    only: Option<&[LeaseKey]>,
    beat: Beat,
    lost: &impl Fn(LeaseKey, Lost),
) {
    let Some(board) = board else { return };
    let snapshot: Vec<_> = held
        .lock()
        .map(|h| match only {
            None => h.iter().map(|(k, v)| (k.clone(), v.lease.clone())).collect(),
            Some(keys) => keys
                .iter()
                .filter_map(|k| Some((k.clone(), h.get(k)?.lease.clone())))
                .collect(),
        })
        .unwrap_or_default();
    let extends = snapshot.iter().map(|(key, lease)| async move {
        let sent = Instant::now();
        let outcome = tokio::time::timeout(beat.every, board.extend(lease, beat.expiry)).await;
        (key, lease, sent, outcome)
    });
    for (key, lease, sent, outcome) in join_all(extends).await {
        match outcome {
            Ok(Ok(())) => {
                if let Some(entry) = held.lock().ok().as_mut().and_then(|h| h.get_mut(key)) {
                    entry.confirmed = entry.confirmed.max(sent);
                    // Extended: the rounds keep it from here, as a claim.
                    entry.extend_at = None;
                }
            }
            Ok(Err(e)) if e.is_lease_over() => report_lost(held, key, Lost::of(&e), lost),
            Ok(Err(e)) => tracing::warn!(job = %lease.job(), error = %e, "cannot extend lease; will retry"),
            Err(_) => tracing::debug!(job = %lease.job(), "no reply to a lease's extend in time; will retry"),
        }
    }
}

/// Reports each held lease that may run out on the server within half a
/// beat as lost, by this process' clock alone: it wakes at the first such
/// time, or half a beat on (a lease held later falls due later than that).
pub(super) async fn expiry_loop(held: &HeldMap, beat: Beat, lost: &impl Fn(LeaseKey, Lost)) {
    loop {
        let now = Instant::now();
        let mut next = now + beat.every / 2;
        let mut overdue = Vec::new();
        if let Ok(h) = held.lock() {
            for (key, v) in h.iter() {
                let due = beat.due(v.confirmed);
                if due <= now {
                    overdue.push(key.clone());
                } else {
                    next = next.min(due);
                }
            }
        }
        for key in overdue {
            report_lost(
                held,
                &key,
                Lost::Lease("could not extend it in time".into()),
                lost,
            );
        }
        tokio::time::sleep_until(next.into()).await;
    }
}

/// Reports a lease as lost, unless it was released meanwhile (its job
/// finished since the snapshot), then stops its handler: the loop hears
/// why first (so the handler's end is settled as a lost lease), and the
/// handler stops even while the loop waits on a board call.
pub(super) fn report_lost(held: &HeldMap, key: &LeaseKey, why: Lost, lost: &impl Fn(LeaseKey, Lost)) {
    let removed = held.lock().ok().and_then(|mut h| h.remove(key));
    if let Some(entry) = removed {
        lost(key.clone(), why);
        if let Some(handler) = entry.handler {
            handler.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::board::BoardSpec;
    use crate::job::{JobId, Lease};
    use crate::redis::RedisOptions;
    use crate::worker::heartbeat::held::Held;
    use crate::worker::heartbeat::key_of;

    /// A server that refuses every connection at once: the urgent loop,
    /// with a handed lease due, asks again after a pause, not at once
    /// (it did, as fast as the refusals came, logging each).
    #[tokio::test]
    async fn a_refused_connection_is_not_asked_again_at_once() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let spec = BoardSpec::Redis(RedisOptions::new(format!("redis://127.0.0.1:{port}/")));
        let link = Link::new(spec, Duration::from_secs(20));
        let (held, urgent) = (HeldMap::default(), Urgent::default());
        let lease = Lease::new("q", JobId("handed".into()), "me", 1);
        let now = Instant::now();
        held.lock()
            .unwrap()
            .insert(key_of(&lease), Held::new(&lease, now, Some(now)));
        let beat = Beat {
            expiry: Duration::from_secs(60),
            horizon: Duration::from_secs(60),
            every: Duration::from_secs(20),
        };
        let run = Duration::from_secs(1);
        let spin = urgent_loop(&link, (&held, &urgent), beat, &|_, _| {});
        assert!(tokio::time::timeout(run, spin).await.is_err(), "the loop runs on");
        let failures = link.failures.load(Ordering::Relaxed);
        let most = (run.as_millis() / RETRY_PAUSE.as_millis()) as u32 + 1;
        assert!(
            (1..=most).contains(&failures),
            "{failures} refused tries in {run:?}"
        );
    }
}
