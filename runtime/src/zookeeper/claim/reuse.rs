//! A long queue's listing, reused by the next claims. A claim lists the
//! whole jobs path (ZooKeeper has no paged listing) and looks up every
//! job in it, so on a queue of tens of thousands of jobs the listing is
//! most of a claim's cost. A claim that listed at least [`LONG_LISTING`]
//! jobs keeps the candidates it did not try, in order; this board's claims
//! of the queue try those instead of listing again, for [`REUSE_FOR`] or
//! [`REUSE_PER_COST`] times what the listing cost (read and sorted),
//! whichever is longer, and never past [`REUSE_MAX`]: on a queue of
//! 200,000 jobs a listing alone takes longer than [`REUSE_FOR`], and the
//! first one, which reads every posting, takes seconds.
//!
//! What such a claim does not see: jobs posted since (a higher priority
//! waits that long at most), a pause or a limit set since (as long),
//! and expired leases and due delayed jobs (the next listing sees to
//! them). Jobs claimed, consumed or changed since fail their claim
//! transaction as held or gone, and one retried with a delay since is let
//! go (`Claimer::due_only`). A queue under a concurrency limit and a
//! suspect's claim always list.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::zookeeper::cache::Known;

/// The fewest listed jobs whose untried candidates are kept.
pub(crate) const LONG_LISTING: usize = 1_000;
/// How long the candidates of a listing are used, at least.
pub(crate) const REUSE_FOR: Duration = Duration::from_millis(100);
/// How long the candidates of a listing are used, in times what it cost.
pub(crate) const REUSE_PER_COST: u32 = 4;
/// How long the candidates of a listing are used, at most.
pub(crate) const REUSE_MAX: Duration = Duration::from_secs(2);

/// The untried candidates of a long listing, in claim order.
pub(crate) struct Left {
    until: Instant,
    candidates: Vec<Arc<Known>>,
    next: usize,
}

impl Left {
    /// The candidates not tried yet.
    pub(crate) fn untried(&self) -> &[Arc<Known>] {
        &self.candidates[self.next..]
    }
}

/// Per queue, what its last long listing left (see the module docs).
#[derive(Default)]
pub(crate) struct Listings {
    queues: Mutex<HashMap<String, Left>>,
}

impl Listings {
    /// Takes what `queue`'s last long listing left, when it is recent and
    /// not used up (a claim meanwhile lists).
    pub(crate) fn take(&self, queue: &str) -> Option<Left> {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let left = queues.remove(queue)?;
        (Instant::now() < left.until && left.next < left.candidates.len()).then_some(left)
    }

    /// Keeps the candidates after the first `tried` of a listing of
    /// `listed` jobs, begun at `began` and read and sorted by `ready`, when
    /// it was long.
    pub(crate) fn keep(
        &self,
        queue: &str,
        (listed, began, ready): (usize, Instant, Instant),
        candidates: Vec<Arc<Known>>,
        tried: usize,
    ) {
        if listed >= LONG_LISTING {
            let cost = ready.saturating_duration_since(began);
            let left = Left {
                until: ready + (cost * REUSE_PER_COST).clamp(REUSE_FOR, REUSE_MAX),
                candidates,
                next: tried,
            };
            self.put_back(queue, left, 0);
        }
    }

    /// Puts back what `left` still holds after `tried` more were tried.
    pub(crate) fn put_back(&self, queue: &str, mut left: Left, tried: usize) {
        left.next += tried;
        if left.next < left.candidates.len() {
            let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            queues.insert(queue.to_owned(), left);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zookeeper::cache::numbered_known;

    fn known(i: usize) -> Arc<Known> {
        Arc::new(numbered_known(i))
    }

    #[test]
    fn only_a_long_recent_listing_is_reused_and_each_candidate_once() {
        let listings = Listings::default();
        let jobs: Vec<Arc<Known>> = (0..3).map(known).collect();
        let now = Instant::now();
        listings.keep("q", (LONG_LISTING - 1, now, now), jobs.clone(), 1);
        assert!(listings.take("q").is_none(), "a short listing is not kept");
        listings.keep("q", (LONG_LISTING, now, now), jobs.clone(), 1);
        let left = listings.take("q").expect("a long listing is kept");
        assert_eq!(left.untried()[0].seq, 1);
        assert!(listings.take("q").is_none(), "taken out while in use");
        listings.put_back("q", left, 1);
        assert_eq!(listings.take("q").unwrap().untried().len(), 1);
        listings.keep("q", (LONG_LISTING, now, now), jobs.clone(), 3);
        assert!(listings.take("q").is_none(), "nothing left to try");
        let old = now - REUSE_FOR;
        listings.keep("q", (LONG_LISTING, old, old), jobs.clone(), 0);
        assert!(listings.take("q").is_none(), "too old");
        // A listing that took 400 ms to read and sort is used for 1.6 s;
        // one that took 10 s, for REUSE_MAX.
        let (began, ready) = (now - Duration::from_millis(1_400), now - Duration::from_secs(1));
        listings.keep("q", (LONG_LISTING, began, ready), jobs.clone(), 0);
        assert_eq!(listings.take("q").unwrap().untried().len(), 3);
        let (began, ready) = (now - Duration::from_secs(13), now - REUSE_MAX);
        listings.keep("q", (LONG_LISTING, began, ready), jobs, 0);
        assert!(listings.take("q").is_none(), "past REUSE_MAX");
    }
}
