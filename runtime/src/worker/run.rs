//! The worker loop of one process.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::board::BoardSpec;
use crate::board::WorkerInfo;
use crate::board::{AnyBoard, Board};
use crate::error::{Error, Result};
use crate::handler::{CancelFlag, HandlerFn, JobContext, Registry};
use crate::job::{Abandon, Claimed, JobState};
use crate::worker::config::WorkerConfig;
use crate::worker::heartbeat::Heartbeat;
use crate::worker::heartbeat::{key_of, LeaseKey, Lost};
use crate::worker::job::{panic_text, settle, Interrupt, Outcome, Reporter, Running, Settle};
use crate::worker::log::{self, Settled};
use crate::worker::recover::recover_dead;
use crate::worker::sandbox::Sandbox;

/// Exit code of a worker process whose handler would not stop (after a
/// timeout or a lost lease): the supervisor starts a fresh one.
pub const EXIT_STUCK: i32 = 70;
/// Exit code of a worker process that could not start (bad config, board
/// unreachable, sandbox taken): the supervisor backs off, and gives up only
/// while no worker has ever started.
pub const EXIT_CANNOT_START: i32 = 78;
/// How long an interrupted handler has to stop before it counts as stuck.
const STUCK_GRACE: Duration = Duration::from_secs(2);
/// Pause after a failed claim (server unreachable) before the next try.
const CLAIM_ERROR_PAUSE: Duration = Duration::from_secs(1);

/// How a worker process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerExit {
    /// Drained or stopped on a signal.
    Clean,
    /// A handler would not stop; the process must be replaced.
    Stuck,
}

impl WorkerExit {
    /// The process exit code.
    pub fn code(self) -> i32 {
        match self {
            WorkerExit::Clean => 0,
            WorkerExit::Stuck => EXIT_STUCK,
        }
    }
}

enum Event {
    Done(LeaseKey, Outcome),
    LeaseLost(LeaseKey, Lost),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sig {
    Drain,
    StopNow,
    Quiet,
    Resume,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Run,
    Quiet,
    Draining(Instant),
}

struct Signals {
    term: Signal,
    int: Signal,
    quit: Signal,
    tstp: Signal,
    cont: Signal,
}

impl Signals {
    fn register() -> Result<Signals> {
        let s = |k: SignalKind| signal(k).map_err(|e| Error::io("cannot register signal handlers", e));
        Ok(Signals {
            term: s(SignalKind::terminate())?,
            int: s(SignalKind::interrupt())?,
            quit: s(SignalKind::quit())?,
            tstp: s(SignalKind::from_raw(nix::sys::signal::Signal::SIGTSTP as i32))?,
            cont: s(SignalKind::from_raw(nix::sys::signal::Signal::SIGCONT as i32))?,
        })
    }

    async fn next(&mut self) -> Sig {
        tokio::select! {
            _ = self.term.recv() => Sig::Drain,
            _ = self.int.recv() => Sig::Drain,
            _ = self.quit.recv() => Sig::StopNow,
            _ = self.tstp.recv() => Sig::Quiet,
            _ = self.cont.recv() => Sig::Resume,
        }
    }
}

/// Runs one worker until it is drained or stopped by a signal; `started`
/// is called once it has connected and is about to claim. Builds its own
/// runtimes: a single-threaded one for this loop and a multi-threaded one
/// for handlers, so busy handlers cannot hold up the loop. An error means
/// it could not start.
pub fn run_worker(
    spec: BoardSpec,
    cfg: WorkerConfig,
    registry: Registry,
    started: impl FnOnce(),
) -> Result<WorkerExit> {
    cfg.validate()?;
    let threads = cfg
        .concurrency
        .min(std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let handlers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("jobworker-handler")
        .enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the handler runtime", e))?;
    let main = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the worker runtime", e))?;
    let span = tracing::info_span!("worker", owner = %cfg.owner, slot = cfg.slot);
    let exit = main.block_on(tracing::Instrument::instrument(
        async {
            let signals = Signals::register()?;
            // The supervisor blocks these across fork; handlers exist now.
            let _ = crate::supervisor::worker_signals().thread_unblock();
            let mut worker = Worker::start(spec, cfg, registry, handlers.handle().clone()).await?;
            started();
            worker.run(signals).await
        },
        span,
    ));
    handlers.shutdown_background();
    exit
}

struct Worker {
    board: AnyBoard,
    cfg: WorkerConfig,
    registry: Registry,
    sandbox: Sandbox,
    handlers: tokio::runtime::Handle,
    heartbeat: Option<Heartbeat>,
    running: HashMap<LeaseKey, Running>,
    /// A suspect job runs alone: no claims until it finishes.
    isolated: Option<LeaseKey>,
    /// Finished jobs waiting to be consumed with the next claim.
    done: Vec<Running>,
    free_slots: Vec<usize>,
    /// Slots emptied after their last job (the only writer of a slot is the
    /// handler of its job, which has finished): no need to empty them again.
    clean_slots: Vec<bool>,
    events: UnboundedSender<Event>,
    inbox: Option<UnboundedReceiver<Event>>,
    mode: Mode,
}

impl Worker {
    async fn start(
        spec: BoardSpec,
        cfg: WorkerConfig,
        registry: Registry,
        handlers: tokio::runtime::Handle,
    ) -> Result<Worker> {
        let board = spec.connect().await?;
        recover_dead(&board, &cfg).await;
        let sandbox = Sandbox::create(&cfg.workdir, cfg.slot, cfg.concurrency)?;
        if cfg.chdir && cfg.concurrency == 1 {
            std::env::set_current_dir(sandbox.root())
                .map_err(|e| Error::io(&format!("cannot enter sandbox {}", sandbox.root().display()), e))?;
        }
        let (events, inbox) = unbounded_channel();
        let lost = events.clone();
        let info = WorkerInfo {
            owner: cfg.owner.clone(),
            host: crate::worker::hostname(),
            pid: std::process::id(),
            slot: cfg.slot,
            queues: cfg.queues.clone(),
            started_ms: 0,
            beat_ms: 0,
            ttl_ms: (cfg.beat() * 3).as_millis() as u64,
            jobs: Vec::new(),
        };
        let heartbeat = Heartbeat::start(spec, cfg.expiry, info, move |key, why| {
            let _ = lost.send(Event::LeaseLost(key, why));
        })?;
        tracing::info!(owner = %cfg.owner, queues = ?cfg.queues, concurrency = cfg.concurrency, sandbox = %sandbox.root().display(), "worker started");
        Ok(Worker {
            board,
            free_slots: (0..cfg.concurrency).rev().collect(),
            clean_slots: vec![true; cfg.concurrency],
            cfg,
            registry,
            sandbox,
            handlers,
            heartbeat: Some(heartbeat),
            running: HashMap::new(),
            isolated: None,
            done: Vec::new(),
            events,
            inbox: Some(inbox),
            mode: Mode::Run,
        })
    }

    async fn run(&mut self, mut signals: Signals) -> Result<WorkerExit> {
        let mut inbox = self
            .inbox
            .take()
            .ok_or_else(|| Error::invalid("worker loop started twice"))?;
        let queues: Vec<String> = self.cfg.queues.clone();
        let mut pause = false;
        let exit = loop {
            if matches!(self.mode, Mode::Draining(_)) && self.running.is_empty() {
                break WorkerExit::Clean;
            }
            let (mut want_work, mut claim_failed) = (false, pause);
            pause = false;
            if self
                .isolated
                .as_ref()
                .is_some_and(|k| !self.running.contains_key(k))
            {
                self.isolated = None;
            }
            let can_claim = self.mode == Mode::Run
                && self.isolated.is_none()
                && self.running.len() < self.cfg.concurrency
                && !claim_failed;
            if can_claim {
                let free = self.cfg.concurrency - self.running.len();
                let q: Vec<&str> = queues.iter().map(String::as_str).collect();
                let holding = self.running.len();
                let done: Vec<crate::job::Lease> = self.done.iter().map(|j| j.lease.clone()).collect();
                let outcome = if done.is_empty() {
                    self.board
                        .claim_holding(&q, &self.cfg.owner, self.cfg.expiry, free, holding)
                        .await
                } else {
                    // Settle what finished and take what is next in one round trip.
                    let r = self
                        .board
                        .consume_then_claim(&done, &q, &self.cfg.owner, self.cfg.expiry, free, holding)
                        .await;
                    match r {
                        Ok((consumed, claimed)) => {
                            self.log_consumed(consumed);
                            Ok(claimed)
                        }
                        Err(e) => {
                            self.flush_consumes().await;
                            Err(e)
                        }
                    }
                };
                match outcome {
                    Ok(claimed) => {
                        want_work = claimed.len() < free;
                        for c in claimed {
                            if c.suspect {
                                self.isolated = Some(key_of(&c.lease));
                            }
                            want_work |= !self.launch(c).await;
                        }
                        want_work &= self.isolated.is_none();
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "claim failed; retrying");
                        claim_failed = true;
                    }
                }
            }
            self.flush_consumes().await;
            if want_work && self.cfg.until_drained && self.running.is_empty() && self.drained(&queues).await {
                tracing::info!("queues drained");
                break WorkerExit::Clean;
            }
            let timer = self.next_deadline();
            let board = self.board.clone();
            let q: Vec<&str> = queues.iter().map(String::as_str).collect();
            enum Wake {
                Signal(Sig),
                Event(Event),
                Timer,
                Work,
                WaitFailed(Error),
            }
            let wake = tokio::select! {
                biased;
                s = signals.next() => Wake::Signal(s),
                Some(e) = inbox.recv() => Wake::Event(e),
                _ = tokio::time::sleep_until(timer.into()) => Wake::Timer,
                r = board.wait(&q, self.cfg.interval), if want_work => match r {
                    Ok(_) => Wake::Work,
                    Err(e) => Wake::WaitFailed(e),
                },
                _ = tokio::time::sleep(CLAIM_ERROR_PAUSE), if claim_failed => Wake::Work,
            };
            match wake {
                Wake::Signal(s) => {
                    if let Some(exit) = self.on_signal(s).await {
                        break exit;
                    }
                }
                Wake::Event(first) => {
                    // Take every event already waiting: finished jobs are
                    // settled together.
                    let mut done = Vec::new();
                    let mut next = Some(first);
                    while let Some(event) = next {
                        match event {
                            Event::Done(key, outcome) => done.push((key, outcome)),
                            Event::LeaseLost(key, why) => self.on_lease_lost(&key, why),
                        }
                        next = inbox.try_recv().ok();
                        if next.is_none() && !self.running.is_empty() {
                            // Let the watchers of other finished handlers
                            // (tasks on this thread) deliver theirs too, so
                            // that one round trip settles them all.
                            tokio::task::yield_now().await;
                            next = inbox.try_recv().ok();
                        }
                    }
                    self.finish_batch(done).await;
                }
                Wake::Timer => {
                    if let Some(exit) = self.on_timer().await {
                        break exit;
                    }
                }
                Wake::Work => {}
                Wake::WaitFailed(e) => {
                    tracing::warn!(error = %e, "waiting for work failed; retrying");
                    pause = true;
                }
            }
        };
        // Jobs that finished since the last claim are consumed before exit.
        self.flush_consumes().await;
        if let Some(h) = self.heartbeat.take() {
            h.stop();
        }
        tracing::info!(owner = %self.cfg.owner, ?exit, "worker stopped");
        Ok(exit)
    }

    /// True when none of `queues` holds a job (ready, scheduled or claimed);
    /// a failed count says no.
    async fn drained(&self, queues: &[String]) -> bool {
        for q in queues {
            match self.board.job_count(q).await {
                Ok(0) => {}
                Ok(_) => return false,
                Err(e) => {
                    tracing::warn!(queue = %q, error = %e, "cannot count the queue's jobs");
                    return false;
                }
            }
        }
        true
    }

    fn next_deadline(&self) -> Instant {
        let far = Instant::now() + Duration::from_secs(3600);
        let drain = match self.mode {
            Mode::Draining(until) => until,
            _ => far,
        };
        self.running
            .values()
            .filter_map(Running::next_deadline)
            .fold(drain, Instant::min)
    }

    /// Starts the handler of a claimed job in a free sandbox slot; false
    /// when it could not start (the job was given back).
    async fn launch(&mut self, c: Claimed) -> bool {
        let key = key_of(&c.lease);
        if self.running.contains_key(&key) {
            tracing::error!(job = %c.lease.job, "claimed a job that is already running here; giving it back");
            let _ = self.board.abandon(&c.lease, Abandon::Release).await;
            return false;
        }
        let Some(slot) = self.free_slots.pop() else {
            tracing::error!(job = %c.lease.job, "no free sandbox slot; giving the job back");
            let _ = self.board.abandon(&c.lease, Abandon::Release).await;
            return false;
        };
        let prepared = if std::mem::take(&mut self.clean_slots[slot]) {
            Ok(self.sandbox.slot_dir(slot))
        } else {
            self.sandbox.prepare(slot)
        };
        let dir = match prepared {
            Ok(dir) => dir,
            Err(e) => {
                tracing::error!(job = %c.lease.job, error = %e, "cannot prepare the sandbox; giving the job back");
                self.free_slots.push(slot);
                let _ = self.board.abandon(&c.lease, Abandon::Release).await;
                return false;
            }
        };
        let entry = self.registry.get(&c.name).copied();
        let cancel = CancelFlag::default();
        let cx = JobContext::new(&c, dir, cancel.clone(), self.board.clone());
        if let Some(h) = &self.heartbeat {
            h.hold(c.lease.clone());
        }
        // The handler task reports its own outcome (no watcher task per job).
        let events = self.events.clone();
        let done = key.clone();
        let context = cx.clone();
        let reporter = Reporter::new(move |outcome| {
            let _ = events.send(Event::Done(done, outcome));
        });
        let handle = match entry.map(|e| e.run) {
            Some(HandlerFn::Async(f)) => {
                let run = std::panic::AssertUnwindSafe(f(cx, c.args));
                self.handlers.spawn(async move {
                    let outcome = match futures_util::FutureExt::catch_unwind(run).await {
                        Ok(r) => Outcome::Returned(r),
                        Err(panic) => Outcome::Panicked(panic_text(panic)),
                    };
                    reporter.report(outcome);
                })
            }
            Some(HandlerFn::Blocking(f)) => self.handlers.spawn_blocking(move || {
                let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(cx, c.args))) {
                    Ok(r) => Outcome::Returned(r),
                    Err(panic) => Outcome::Panicked(panic_text(panic)),
                };
                reporter.report(outcome);
            }),
            None => self
                .handlers
                .spawn(async move { reporter.report(Outcome::NoHandler) }),
        };
        let abort = handle.abort_handle();
        tracing::debug!(job = %c.lease.job, queue = %c.lease.queue, name = %c.name, attempt = c.attempt, "job started");
        let timeout = entry.and_then(|e| e.timeout).or(self.cfg.default_timeout);
        self.running.insert(
            key,
            Running {
                lease: c.lease,
                name: c.name,
                attempt: c.attempt,
                slot,
                cancel,
                context,
                abort,
                started: Instant::now(),
                timeout,
                interrupt: Interrupt::None,
                stuck_at: None,
            },
        );
        true
    }

    /// Settles finished jobs on the board and frees their slots; the jobs
    /// to consume go in one round trip.
    async fn finish_batch(&mut self, done: Vec<(LeaseKey, Outcome)>) {
        let mut consumed: Vec<Running> = Vec::new();
        for (key, outcome) in done {
            let Some(job) = self.running.remove(&key) else {
                continue;
            };
            // Only a handler that really ended leaves its slot quiet: an
            // aborted one may still have a blocking write or a child process
            // at work there, so that slot is emptied again before reuse.
            let ended = job.interrupt == Interrupt::None && !matches!(outcome, Outcome::Cancelled);
            match self.sandbox.prepare(job.slot) {
                Ok(_) => self.clean_slots[job.slot] = ended,
                Err(e) => tracing::warn!(error = %e, "cannot empty the sandbox after a job"),
            }
            self.free_slots.push(job.slot);
            let settled = settle(&job, outcome);
            if settled != Settle::Consume {
                if let Some(h) = &self.heartbeat {
                    h.release(&key);
                }
            }
            let settled = match (settled, job.context.take_next()) {
                (Settle::Consume, Some((queue, next))) => self.post_next(&job, &queue, next).await,
                (settled, _) => settled,
            };
            let result = match settled {
                Settle::Consume => {
                    // Still heartbeated until the consume is recorded.
                    consumed.push(job);
                    continue;
                }
                Settle::Retry(reason, after) => {
                    let delay = after.unwrap_or_else(|| self.cfg.backoff.delay(job.attempt));
                    let retry = Abandon::Retry {
                        delay,
                        error: reason.clone(),
                    };
                    self.board
                        .abandon(&job.lease, retry)
                        .await
                        .map(|state| match state {
                            JobState::Trashed => Settled::Trashed { reason },
                            _ => Settled::Retrying { reason, delay },
                        })
                }
                Settle::Trash(reason) => self
                    .board
                    .trash(&job.lease, &reason)
                    .await
                    .map(|()| Settled::Trashed { reason }),
                Settle::Release => self
                    .board
                    .abandon(&job.lease, Abandon::Release)
                    .await
                    .map(|_| Settled::Released),
                Settle::Drop(why) => Ok(Settled::Dropped(why)),
            };
            log::settled(&job, result);
        }
        // Consumed with the next claim (or by flush_consumes).
        self.done.extend(consumed);
    }

    /// Posts a pipeline's next step (set with `JobContext::complete_into`)
    /// under this job's id, before this job is consumed: a step posted by an
    /// earlier try that lost its consume is recognised, not posted twice.
    async fn post_next(&self, job: &Running, queue: &str, next: crate::job::NewJob) -> Settle {
        match self.board.post(queue, next.id(job.lease.job.clone())).await {
            Ok(_) => Settle::Consume,
            Err(e) if e.is_exists() => Settle::Consume,
            Err(e) => Settle::Retry(format!("cannot post the next step to queue {queue}: {e}"), None),
        }
    }

    /// Logs the consume results of `self.done` and clears it.
    fn log_consumed(&mut self, results: Vec<Result<()>>) {
        for (job, r) in self.done.drain(..).zip(results) {
            if let Some(h) = &self.heartbeat {
                h.release(&key_of(&job.lease));
            }
            log::settled(&job, r.map(|()| Settled::Completed));
        }
    }

    /// Consumes the finished jobs that no claim took along.
    async fn flush_consumes(&mut self) {
        if self.done.is_empty() {
            return;
        }
        let leases: Vec<crate::job::Lease> = self.done.iter().map(|j| j.lease.clone()).collect();
        match self.board.consume_many(&leases).await {
            Ok(results) => self.log_consumed(results),
            Err(e) => {
                for job in self.done.drain(..) {
                    if let Some(h) = &self.heartbeat {
                        h.release(&key_of(&job.lease));
                    }
                    log::settled(&job, Err(e.clone()));
                }
            }
        }
    }

    /// Stops the handler of a job whose lease is over (cancelled, or lost).
    fn on_lease_lost(&mut self, key: &LeaseKey, why: Lost) {
        let Some(job) = self.running.get_mut(key) else {
            return;
        };
        let (id, queue) = (&job.lease.job, &job.lease.queue);
        let interrupt = match why {
            Lost::Cancelled => {
                tracing::info!(job = %id, %queue, name = %job.name, "job cancelled; stopping its handler");
                Interrupt::Cancelled
            }
            Lost::Lease(why) => {
                tracing::warn!(job = %id, %queue, name = %job.name, token = job.lease.token, why, "lease lost; stopping its handler");
                Interrupt::LeaseLost
            }
        };
        job.interrupt(interrupt, STUCK_GRACE);
    }

    /// Handles timeouts, stuck handlers and the end of the drain grace.
    async fn on_timer(&mut self) -> Option<WorkerExit> {
        let now = Instant::now();
        if let Mode::Draining(until) = self.mode {
            if now >= until {
                self.release_all("grace period over").await;
                return Some(WorkerExit::Clean);
            }
        }
        let mut stuck = false;
        for job in self.running.values_mut() {
            match job.next_deadline() {
                Some(at) if at <= now && job.interrupt == Interrupt::None => {
                    tracing::warn!(job = %job.lease.job, name = %job.name, timeout = ?job.timeout, "job timed out; stopping it");
                    job.interrupt(Interrupt::TimedOut, STUCK_GRACE);
                }
                Some(at) if at <= now => stuck = true,
                _ => {}
            }
        }
        if !stuck {
            return None;
        }
        // A handler that does not yield cannot be stopped inside this
        // process: record the outcome, give the rest back, and exit so the
        // supervisor starts a fresh worker.
        let keys: Vec<LeaseKey> = self.running.keys().cloned().collect();
        for key in keys {
            let Some(job) = self.running.get(&key) else {
                continue;
            };
            let id = &key.0;
            let lease = job.lease.clone();
            let result = match job.interrupt {
                Interrupt::TimedOut if job.stuck_at.is_some_and(|t| t <= now) => {
                    let error = format!(
                        "timeout: timed out after {:?}; the handler did not stop, so its worker process was replaced",
                        job.timeout.unwrap_or_default()
                    );
                    let delay = self.cfg.backoff.delay(job.attempt);
                    tracing::error!(job = %id, name = %job.name, "handler did not stop after its timeout; replacing the worker");
                    self.board
                        .abandon(&lease, Abandon::Retry { delay, error })
                        .await
                        .map(drop)
                }
                Interrupt::LeaseLost | Interrupt::Cancelled | Interrupt::Released => Ok(()),
                _ => self.board.abandon(&lease, Abandon::Release).await.map(drop),
            };
            if let Err(e) = result {
                tracing::warn!(job = %id, error = %e, "cannot give the job back");
            }
        }
        Some(WorkerExit::Stuck)
    }

    async fn on_signal(&mut self, s: Sig) -> Option<WorkerExit> {
        match (s, self.mode) {
            (Sig::Drain, Mode::Draining(_)) | (Sig::StopNow, _) => {
                self.release_all("stopped").await;
                Some(WorkerExit::Clean)
            }
            (Sig::Drain, _) => {
                tracing::info!(in_flight = self.running.len(), grace = ?self.cfg.grace, "draining");
                self.mode = Mode::Draining(Instant::now() + self.cfg.grace);
                None
            }
            (Sig::Quiet, Mode::Run) => {
                tracing::info!("quiet: not claiming new jobs");
                self.mode = Mode::Quiet;
                None
            }
            (Sig::Resume, Mode::Quiet) => {
                tracing::info!("resumed");
                self.mode = Mode::Run;
                None
            }
            _ => None,
        }
    }

    /// Gives every in-flight job back at once (not counted) and stops their
    /// handlers.
    async fn release_all(&mut self, why: &str) {
        for job in self.running.values_mut() {
            job.interrupt(Interrupt::Released, STUCK_GRACE);
            if let Some(h) = &self.heartbeat {
                h.release(&key_of(&job.lease));
            }
            match self.board.abandon(&job.lease, Abandon::Release).await {
                Ok(_) => tracing::info!(job = %job.lease.job, why, "job given back"),
                Err(e) => tracing::warn!(job = %job.lease.job, error = %e, "cannot give the job back"),
            }
        }
    }
}
