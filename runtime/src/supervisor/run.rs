//! The supervisor's state and its loop: it blocks until a signal (a
//! worker's exit is SIGCHLD), a worker's log line, or its next deadline
//! (a respawn, the stop's grace, the progress redraw, a recovery retry),
//! then does what is due. The wait is in `wait.rs`, signals in
//! `signals.rs`, slots in `slot.rs`, forking in `fork.rs`, exits in
//! `exit.rs`, crash recovery in `recovery.rs`, its own metrics in
//! `metrics.rs` (served by `metrics_http.rs`).

use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::board::BlockingBoard;
use crate::error::Result;
use crate::handler::Registry;
use crate::supervisor::config::*;
use crate::supervisor::in_flight::InFlight;
use crate::supervisor::metrics::Metrics;
use crate::supervisor::metrics_http::MetricsHttp;
use crate::supervisor::progress::Progress;
use crate::supervisor::recovery::Left;
use crate::supervisor::relay::Relay;
use crate::supervisor::slot::{next_respawn, Slot};
use crate::supervisor::wait::Wakeups;

/// How often progress and `--until-drained` read the queues.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// How soon a recovery that failed (the board unreachable) is tried again.
pub(super) const RECOVERY_RETRY: Duration = Duration::from_millis(250);

/// The supervisor (one per process).
pub(super) struct Supervisor {
    pub(super) cfg: SupervisorConfig,
    pub(super) registry: Registry,
    /// The board, reached without a runtime (the supervisor forks).
    pub(super) board: BlockingBoard,
    /// Its signals (a forked worker drops them).
    pub(super) wakeups: Option<Wakeups>,
    pub(super) slots: Vec<Slot>,
    /// Deadline after which remaining children are killed.
    pub(super) shutdown: Option<Instant>,
    pub(super) exit_code: i32,
    /// Slots still to restart after a HUP, one at a time.
    pub(super) rolling: Vec<usize>,
    progress: Option<Progress>,
    /// When progress (and `--until-drained`) next reads the queues.
    next_progress: Instant,
    /// The last read failed (see [`Supervisor::progress_due`]).
    progress_failed: bool,
    /// Recoveries not done yet (failed, or left to the retry while the
    /// board is down), tried at `retry_recovery`.
    pub(super) pending: Vec<Left>,
    pub(super) retry_recovery: Option<Instant>,
    /// The last recovery tried failed with the board unavailable: exits
    /// leave theirs to the retry and keep their entries.
    pub(super) board_down: bool,
    /// Recoveries the supervisor cannot make itself, handed to the next
    /// worker it forks (see `BlockingBoard::recover_owner`).
    pub(super) handoff: Vec<(String, String)>,
    /// A worker has started since the supervisor did: from then on it
    /// never gives up.
    pub(super) any_started: bool,
    /// The workers' stderr, relayed above the progress bar (when shown).
    pub(super) relay: Option<Relay>,
    /// Its own metrics (counted whether served or not).
    pub(super) metrics: Metrics,
    /// The metrics server (`--metrics-listen`; a forked worker drops it).
    pub(super) http: Option<MetricsHttp>,
    /// The workers' counts of jobs in flight (with `--metrics-listen`).
    pub(super) in_flight: Option<InFlight>,
}

/// Runs the supervisor until it is told to stop (or the queues drain with
/// `until_drained`); returns the process exit code.
pub(crate) fn supervise(cfg: SupervisorConfig, registry: Registry) -> Result<i32> {
    cfg.validate()?;
    let http = cfg.metrics_listen.map(MetricsHttp::bind).transpose()?;
    let in_flight = http.as_ref().map(|_| InFlight::new()).transpose()?;
    let board = BlockingBoard::connect(&cfg.board)?;
    let wakeups = Wakeups::register()?;
    tracing::info!(
        workers = cfg.workers,
        queues = ?cfg.worker.queues,
        concurrency = cfg.worker.concurrency,
        handlers = registry.len(),
        "supervisor started (pid {})",
        std::process::id()
    );
    if let Some(http) = &http {
        tracing::info!("metrics on http://{}/metrics", http.local_addr()?);
    }
    let mut sup = Supervisor {
        slots: Vec::new(),
        cfg,
        registry,
        board,
        wakeups: Some(wakeups),
        shutdown: None,
        exit_code: 0,
        rolling: Vec::new(),
        progress: None,
        next_progress: Instant::now() + PROGRESS_EVERY,
        progress_failed: false,
        pending: Vec::new(),
        retry_recovery: None,
        board_down: false,
        handoff: Vec::new(),
        any_started: false,
        relay: None,
        metrics: Metrics::new(),
        http,
        in_flight,
    };
    if sup.cfg.progress || sup.cfg.until_drained {
        sup.progress = Some(Progress::new(sup.counts()?, sup.cfg.progress));
    }
    if sup.cfg.progress && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        sup.relay = Some(Relay::new()?);
    }
    for index in 0..sup.cfg.workers {
        sup.slots.push(Slot::new(index));
        sup.spawn(index);
    }
    let released = crate::startup_memory::give_back();
    tracing::debug!(bytes = released, "gave back start-up's pages of the executable");
    sup.run()
}

impl Supervisor {
    pub(super) fn slot_pos(&self, index: usize) -> Option<usize> {
        self.slots.iter().position(|s| s.index == index)
    }

    fn run(mut self) -> Result<i32> {
        let mut signals = self.wakeups.as_mut().map(Wakeups::pending).unwrap_or_default();
        loop {
            for sig in signals {
                self.on_signal(sig);
            }
            if let Some(relay) = self.relay.as_mut() {
                relay.drain();
            }
            let now = Instant::now();
            self.serve_metrics(now);
            self.on_deadlines(now);
            if self.stopped() {
                break;
            }
            let deadline = self.next_deadline();
            let log = self.relay.as_ref().map(|r| r.read_end().as_fd());
            let http = self.http.iter().flat_map(MetricsHttp::fds);
            let fds: Vec<BorrowedFd<'_>> = log.into_iter().chain(http).collect();
            signals = match self.wakeups.as_mut() {
                Some(w) => w.wait(&fds, deadline),
                None => Vec::new(),
            };
        }
        if let Some(relay) = self.relay.as_mut() {
            relay.drain();
        }
        self.leave_pending();
        if self.progress.is_some() && !self.board_down && !self.progress_failed {
            match self.counts() {
                Ok(c) => self.progress.iter().for_each(|p| p.summary(&c)),
                Err(e) => tracing::warn!(error = %e, "cannot read the final counts"),
            }
        }
        tracing::info!(code = self.exit_code, "supervisor stopped");
        Ok(self.exit_code)
    }

    /// Whether the stop is over: every worker has exited, and every dead
    /// one's leases were given back, or the stop's deadline has passed
    /// (the board is given until then to answer again).
    fn stopped(&self) -> bool {
        let Some(deadline) = self.shutdown else {
            return false;
        };
        self.slots.iter().all(|s| s.pid.is_none()) && (self.pending.is_empty() || Instant::now() >= deadline)
    }

    /// Does what is due at `now`: recoveries to retry, the kill after the
    /// grace, respawns, the progress redraw.
    fn on_deadlines(&mut self, now: Instant) {
        if self.retry_recovery.is_some_and(|t| t <= now) {
            self.recover_pending();
        }
        match self.shutdown {
            Some(deadline) if now >= deadline && self.slots.iter().any(|s| s.pid.is_some()) => {
                tracing::warn!("workers did not stop within the grace; killing them");
                self.signal_children(Signal::SIGKILL);
                self.shutdown = Some(now + SHUTDOWN_MARGIN);
            }
            Some(_) => {}
            None => {
                let due: Vec<usize> = self
                    .slots
                    .iter()
                    .filter(|s| s.due(now))
                    .map(|s| s.index)
                    .collect();
                for index in due {
                    self.spawn(index);
                }
            }
        }
        if self.progress_due().is_some_and(|t| t <= now) {
            self.tick_progress();
        }
    }

    /// The earliest deadline the supervisor owns; `None` when only a
    /// signal, a log line or a metrics client can give it work (all
    /// workers running, no progress shown, nothing to retry, no metrics
    /// client that is slow to send its request).
    fn next_deadline(&self) -> Option<Instant> {
        let respawn = match self.shutdown {
            Some(_) => None,
            None => next_respawn(&self.slots),
        };
        let progress = self.progress_due();
        let client = self.http.as_ref().and_then(MetricsHttp::deadline);
        [self.shutdown, respawn, progress, self.retry_recovery, client]
            .into_iter()
            .flatten()
            .min()
    }

    /// When progress (and `--until-drained`) next reads the counts; never
    /// during a stop once a read failed: against a board that does not
    /// answer, each read waits out its timeouts (4–6 s on Redis) on the
    /// supervisor's one thread, holding up signals, exits and the stop.
    fn progress_due(&self) -> Option<Instant> {
        let stopped_reading = self.shutdown.is_some() && self.progress_failed;
        (self.progress.is_some() && !stopped_reading).then_some(self.next_progress)
    }

    /// Reads the counts: draws the bar, and begins the stop of
    /// `--until-drained`. A read that failed after holding the supervisor
    /// is not tried again for as long as it took.
    fn tick_progress(&mut self) {
        let started = Instant::now();
        let read = self.counts();
        self.progress_failed = read.is_err();
        self.next_progress = Instant::now() + started.elapsed().max(PROGRESS_EVERY);
        let counts = match read {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read progress");
                return;
            }
        };
        let drained = counts.listed == 0;
        if let Some(p) = self.progress.as_mut() {
            if self.cfg.progress {
                p.draw(&counts);
            }
        }
        if self.cfg.until_drained && drained && self.shutdown.is_none() {
            self.begin_shutdown("queues drained");
        }
    }
}
