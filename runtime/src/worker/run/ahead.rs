//! Claiming ahead: up to `prefetch` leases held beyond the running jobs.
//! They are heartbeated like running jobs, started as slots free up
//! (without a round trip), and given back, not counted, when the worker
//! stops taking work. With jobs waiting here, the next claim need not
//! hurry: it waits until it can take a batch, so claims overlap handlers
//! and cost the board fewer, larger calls.
//!
//! A job claimed ahead is hidden from the other workers, which may be
//! idle: that pays only while jobs are short. So a worker claims ahead
//! only while its recent jobs ran for less than [`PREFETCH_RUN_LIMIT`]
//! (a moving average), and not before its first jobs have run.

use std::time::{Duration, Instant};

use crate::board::Board;
use crate::job::{Claimed, Lease};
use crate::worker::heartbeat::{key_of, LeaseKey};
use crate::worker::run::Worker;

/// A worker claims ahead only while its jobs run for less than this, on
/// average: a claim's round trip (about a millisecond) is then a good part
/// of a job's time, and a job claimed ahead waits a few milliseconds at
/// most.
const PREFETCH_RUN_LIMIT: Duration = Duration::from_millis(50);

impl Worker {
    /// Leases this worker holds: running jobs and jobs claimed ahead.
    pub(super) fn holding(&self) -> usize {
        self.running.len() + self.ahead.len()
    }

    /// The prefetch in force: the configured one while jobs are short,
    /// else none.
    fn prefetch(&self) -> usize {
        match self.run_time {
            Some(t) if t < PREFETCH_RUN_LIMIT => self.cfg.prefetch,
            _ => 0,
        }
    }

    /// Counts a finished job's run time in the moving average that turns
    /// the prefetch on and off.
    pub(super) fn note_run_time(&mut self, took: Duration) {
        self.run_time = Some(match self.run_time {
            Some(avg) => avg.mul_f64(0.8) + took.mul_f64(0.2),
            None => took,
        });
    }

    /// How many jobs a claim may take now.
    pub(super) fn claim_room(&self) -> usize {
        (self.cfg.concurrency + self.prefetch()).saturating_sub(self.holding())
    }

    /// Whether to claim now: a slot is free with nothing claimed ahead to
    /// fill it, or there is room for a batch (half the prefetch).
    pub(super) fn wants_claim(&self) -> bool {
        let room = self.claim_room();
        let starving = self.ahead.is_empty() && self.running.len() < self.cfg.concurrency;
        room > 0 && (starving || room >= (self.prefetch() / 2).max(1))
    }

    /// Takes claimed jobs (by a call sent at `sent`): their leases are
    /// extended from now on, and they start as far as slots are free.
    pub(super) fn keep_ahead(&mut self, claimed: Vec<Claimed>, sent: Instant) {
        for c in claimed {
            if let Some(h) = &self.heartbeat {
                h.hold(&c.lease, sent);
            }
            self.ahead.push_back(c);
        }
    }

    /// Starts jobs claimed ahead in the free slots; false when one could
    /// not start (it was given back, or its lease was lost already).
    pub(super) async fn launch_ahead(&mut self) -> bool {
        let mut all = true;
        while self.running.len() < self.cfg.concurrency && self.isolated.is_none() {
            let Some(c) = self.ahead.pop_front() else {
                break;
            };
            if !self.surely_held(&c) {
                self.give_back(c, "claimed ahead, its lease not confirmed within half its term")
                    .await;
                all = false;
                continue;
            }
            if c.suspect {
                // Claimed alone (the claim hands a suspect only to a
                // worker holding nothing): nothing else starts beside it.
                self.isolated = Some(key_of(&c.lease));
            }
            all &= self.launch(c).await;
        }
        all
    }

    /// Whether the lease of a job claimed ahead surely still holds: the
    /// server confirmed it less than half its horizon ago (the heartbeat
    /// extends every third). A worker stopped (SIGSTOP) past its leases
    /// finds them unconfirmed when it continues, and starts none of them:
    /// another worker may run them by now.
    fn surely_held(&self, c: &Claimed) -> bool {
        self.heartbeat
            .as_ref()
            .is_none_or(|h| h.surely_held(&key_of(&c.lease)))
    }

    /// Drops a job claimed ahead whose lease is over (cancelled or lost);
    /// false when it is not one.
    pub(super) fn drop_ahead(&mut self, key: &LeaseKey) -> bool {
        let Some(at) = self.ahead.iter().position(|c| &key_of(&c.lease) == key) else {
            return false;
        };
        self.ahead.remove(at);
        self.stop_extending(key);
        tracing::info!(job = %key.0, queue = %key.2, "lease of a job claimed ahead is over; it will not start here");
        true
    }

    /// Takes jobs that posts handed to this worker (it waits for them
    /// only while it takes work): they start in free slots; those that
    /// cannot start now go back, unless the prefetch keeps them.
    pub(super) async fn take_handed(&mut self, handed: Vec<Claimed>) {
        if handed.is_empty() {
            return;
        }
        tracing::debug!(jobs = handed.len(), "jobs handed over by their posts");
        if let Some(h) = &self.heartbeat {
            for c in &handed {
                h.hold_handed(&c.lease);
            }
        }
        self.ahead.extend(handed);
        self.launch_ahead().await;
        let extra = self.ahead.split_off(self.prefetch().min(self.ahead.len()));
        for c in extra {
            self.give_back(c, "handed over with no free slot").await;
        }
    }

    /// Gives every job claimed ahead back to the board (not counted as an
    /// attempt: none started), with the jobs handed to this worker that it
    /// has not read yet, after ending its hand-off registrations.
    pub(super) async fn give_back_ahead(&mut self, why: &str) {
        let leases = self.take_ahead().await;
        self.give_back_unstarted(leases, why).await;
    }

    /// Ends the hand-off registrations and takes the jobs claimed ahead,
    /// with those handed to this worker that it has not read yet, out of
    /// the heartbeat's care: their leases, to give back.
    pub(super) async fn take_ahead(&mut self) -> Vec<Lease> {
        let queues: Vec<&str> = self.cfg.queues.iter().map(String::as_str).collect();
        match self.board.withdraw(&queues, &self.cfg.owner).await {
            Ok(handed) => self.ahead.extend(handed),
            Err(e) => {
                self.note_unsettled(&e);
                tracing::warn!(error = %e, "cannot end the hand-off registrations; their leases expire")
            }
        }
        let mut leases = Vec::with_capacity(self.ahead.len());
        for c in std::mem::take(&mut self.ahead) {
            self.stop_extending(&key_of(&c.lease));
            leases.push(c.lease);
        }
        leases
    }

    /// Gives one job that did not start back to the board.
    async fn give_back(&mut self, c: Claimed, why: &str) {
        self.stop_extending(&key_of(&c.lease));
        self.give_back_unstarted(vec![c.lease], why).await;
    }

    /// Gives back the leases of jobs that did not start (out of the
    /// heartbeat's care already), all at once.
    async fn give_back_unstarted(&mut self, leases: Vec<Lease>, why: &str) {
        for (id, result) in self.release_leases(leases).await {
            match result {
                Ok(_) => tracing::debug!(job = %id, why, "job claimed ahead given back"),
                Err(e) => tracing::warn!(job = %id, error = %e, "cannot give a job claimed ahead back"),
            }
        }
    }
}
