//! What the worker loop waits for between claims: a signal, finished or
//! lost jobs, a deadline, or new work on the board.

use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::board::Board;
use crate::error::Error;
use crate::job::Claimed;
use crate::worker::run::{Event, Mode, Sig, Signals, Worker, CLAIM_ERROR_PAUSE};

/// Why the worker loop woke.
pub(super) enum Wake {
    Signal(Sig),
    Event(Event),
    Timer,
    /// Work may be waiting; posts handed over these jobs. True when the
    /// board had the work when the wait began ([`crate::board::Woken::at_once`]).
    Work(Vec<Claimed>, bool),
    WaitFailed(Error),
}

/// Empty claims in a row, each right after a wake that found work at
/// once, before the worker stops watching the board: two, so that losing
/// one race for a job to another worker is not taken for it.
const FRUITLESS_LIMIT: u8 = 2;

/// How often a worker that stopped watching the board claims again (or
/// its interval, when shorter): no post wakes anyone while suspects are
/// ready, so a job posted behind them waits for that claim (or, behind
/// more suspects than a claim looks at, for idle workers to take them).
const FRUITLESS_POLL: Duration = Duration::from_secs(1);

impl Worker {
    /// Waits for the next thing to do; the board is watched for work only
    /// when the worker wants some, and its claims have not come back empty
    /// again and again while the board said work was there (a worker
    /// holding jobs while only suspects are ready: it waits for its jobs,
    /// hand-offs or [`FRUITLESS_POLL`] instead of asking again at once).
    pub(super) async fn wait(
        &self,
        signals: &mut Signals,
        inbox: &mut UnboundedReceiver<Event>,
        queues: &[String],
        want_work: bool,
        claim_failed: bool,
    ) -> Wake {
        let timer = self.next_deadline();
        let q: Vec<&str> = queues.iter().map(String::as_str).collect();
        let fruitless = want_work && self.fruitless_claims >= FRUITLESS_LIMIT;
        let watch_board = want_work && !fruitless;
        let handed_wait = match fruitless {
            true => self.cfg.interval.min(FRUITLESS_POLL),
            false => self.cfg.interval,
        };
        tokio::select! {
            biased;
            s = signals.next() => Wake::Signal(s),
            Some(e) = inbox.recv() => Wake::Event(e),
            _ = tokio::time::sleep_until(timer.into()) => Wake::Timer,
            r = self.board.wait_as(&q, Some(&self.cfg.owner), self.cfg.interval), if watch_board => match r {
                Ok(woken) => Wake::Work(woken.handed, woken.at_once),
                Err(e) => Wake::WaitFailed(e),
            },
            // Full (what was handed over before it filled up goes back), or
            // the board's work is not for this worker.
            r = self.board.handed_to(&q, &self.cfg.owner, handed_wait), if !watch_board && !claim_failed && self.mode == Mode::Run => match r {
                Ok(handed) => Wake::Work(handed, false),
                Err(e) => Wake::WaitFailed(e),
            },
            _ = tokio::time::sleep(CLAIM_ERROR_PAUSE), if claim_failed => Wake::Work(Vec::new(), false),
        }
    }

    /// Handles `first` and every event already waiting (finished jobs are
    /// settled together), then starts jobs claimed ahead in the slots
    /// freed.
    pub(super) async fn on_events(&mut self, first: Event, inbox: &mut UnboundedReceiver<Event>) {
        self.settle_events(first, inbox).await;
        self.launch_ahead().await;
    }

    /// Handles `first` and every event already waiting: finished jobs are
    /// settled together. Starts nothing.
    pub(super) async fn settle_events(&mut self, first: Event, inbox: &mut UnboundedReceiver<Event>) {
        let mut done = Vec::new();
        let mut next = Some(first);
        while let Some(event) = next {
            match event {
                Event::Done(key, outcome) => done.push((key, outcome)),
                Event::LeaseLost(key, why) => self.on_lease_lost(&key, why),
            }
            next = inbox.try_recv().ok();
            if next.is_none() && !self.running.is_empty() {
                // Let the watchers of other finished handlers (tasks on
                // this thread) deliver theirs too, so that one round trip
                // settles them all.
                tokio::task::yield_now().await;
                next = inbox.try_recv().ok();
            }
        }
        self.finish_batch(done).await;
    }
}
