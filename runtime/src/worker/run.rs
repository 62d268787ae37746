//! The worker loop of one process: claim, launch, wait, settle (see the
//! child modules for each step).

mod ahead;
mod claim;
mod interrupt;
mod launch;
mod settle;
mod stop;
mod wake;

use wake::Wake;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::board::BoardSpec;
use crate::board::WorkerInfo;
use crate::board::{AnyBoard, Board};
use crate::error::{Error, Result};
use crate::handler::{HandlerFn, Registry};
use crate::job::{Claimed, Lease};
use crate::maintenance::Maintainer;
use crate::worker::config::WorkerConfig;
use crate::worker::heartbeat::Heartbeat;
use crate::worker::heartbeat::{LeaseKey, Lost};
use crate::worker::job::{Finished, Outcome, Running};
use crate::worker::recover::recover_dead;
use crate::worker::sandbox::Sandbox;
use crate::worker::watchdog::LoopWatch;

/// Exit code of a worker process whose handler would not stop (after a
/// timeout or a lost lease): the supervisor starts a fresh one.
pub(crate) const EXIT_STUCK: i32 = 70;
/// Exit code of a worker process that could not start (bad config, board
/// unreachable, sandbox taken): the supervisor backs off, and gives up only
/// while no worker has ever started.
pub(crate) const EXIT_CANNOT_START: i32 = 78;
/// Exit code of a worker process that stopped when asked but could not
/// settle or give back some lease (the board did not answer): the
/// supervisor gives its leases back itself, counting nothing
/// (EX_TEMPFAIL).
pub(crate) const EXIT_UNSETTLED: i32 = 75;
/// How long an interrupted handler has to stop before it counts as stuck.
const STUCK_GRACE: Duration = Duration::from_secs(2);
/// Pause after a failed claim (server unreachable) before the next try.
const CLAIM_ERROR_PAUSE: Duration = Duration::from_secs(1);

/// How a worker process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkerExit {
    /// Drained or stopped on a signal.
    Clean,
    /// A handler would not stop; the process must be replaced.
    Stuck,
    /// Stopped as `Clean`, but some lease was neither settled nor given
    /// back: the board did not answer.
    Unsettled,
}

impl WorkerExit {
    /// The process exit code.
    pub(crate) fn code(self) -> i32 {
        match self {
            WorkerExit::Clean => 0,
            WorkerExit::Stuck => EXIT_STUCK,
            WorkerExit::Unsettled => EXIT_UNSETTLED,
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
pub(crate) fn run_worker(
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
            let released = crate::startup_memory::give_back();
            tracing::debug!(bytes = released, "gave back start-up's pages of the executable");
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
    /// The heartbeat's watch on handlers' first steps on this loop.
    loop_watch: LoopWatch,
    /// The queues' maintenance, when this worker is elected to run it.
    maintenance: Option<Maintainer>,
    running: HashMap<LeaseKey, Running>,
    /// Jobs claimed ahead of a free slot, in claim order.
    ahead: VecDeque<Claimed>,
    /// Moving average of the handlers' run times (none before the first
    /// job finished): claims ahead only while it is short.
    run_time: Option<Duration>,
    /// A suspect job runs alone: no claims until it finishes.
    isolated: Option<LeaseKey>,
    /// The last wake found work on the board at once ([`crate::board::Woken::at_once`]).
    woke_at_once: bool,
    /// Claims in a row that came back empty right after such a wake while
    /// holding jobs (see `wake.rs`).
    fruitless_claims: u8,
    /// Finished jobs waiting to be consumed with the next claim.
    done: Vec<(Lease, Finished)>,
    free_slots: Vec<usize>,
    /// Slots emptied after their last job (the only writer of a slot is the
    /// handler of its job, which has finished): no need to empty them again.
    clean_slots: Vec<bool>,
    events: UnboundedSender<Event>,
    inbox: Option<UnboundedReceiver<Event>>,
    mode: Mode,
    /// Some lease could not be settled or given back, the board
    /// unavailable (since the worker started), or the stop's calls ran
    /// past its deadline: a clean stop then exits with [`EXIT_UNSETTLED`].
    unsettled: bool,
    /// When the stop's board calls must be over (see `stop.rs`); `None`
    /// until a stop signal.
    stop_by: tokio::sync::watch::Sender<Option<Instant>>,
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
            concurrency: cfg.concurrency,
            started_ms: 0,
            beat_ms: 0,
            ttl_ms: (cfg.beat() * 3).as_millis() as u64,
            jobs: Vec::new(),
        };
        let loop_watch = LoopWatch::new(cfg.backoff, STUCK_GRACE);
        let on_loop = registry
            .iter()
            .any(|e| matches!(e.run, HandlerFn::StartOnLoop(_)));
        let watched = on_loop.then(|| loop_watch.clone());
        let heartbeat = Heartbeat::start(spec, cfg.expiry, info, watched, move |key, why| {
            let _ = lost.send(Event::LeaseLost(key, why));
        })?;
        let maintenance = Maintainer::start(board.clone(), cfg.queues.clone(), cfg.owner.clone());
        tracing::info!(owner = %cfg.owner, queues = ?cfg.queues, concurrency = cfg.concurrency, prefetch = cfg.prefetch, sandbox = %sandbox.root().display(), "worker started");
        Ok(Worker {
            board,
            free_slots: (0..cfg.concurrency).rev().collect(),
            clean_slots: vec![true; cfg.concurrency],
            cfg,
            registry,
            sandbox,
            handlers,
            heartbeat: Some(heartbeat),
            loop_watch,
            maintenance: Some(maintenance),
            running: HashMap::new(),
            ahead: VecDeque::new(),
            run_time: None,
            isolated: None,
            woke_at_once: false,
            unsettled: false,
            stop_by: tokio::sync::watch::channel(None).0,
            fruitless_claims: 0,
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
        let exit = self.serve_until_stopped(&mut signals, &mut inbox).await;
        if let Some(h) = self.heartbeat.take() {
            h.stop();
        }
        if let Some(m) = self.maintenance.take() {
            m.stop().await;
        }
        let exit = match exit {
            WorkerExit::Clean if self.unsettled => WorkerExit::Unsettled,
            exit => exit,
        };
        tracing::info!(owner = %self.cfg.owner, ?exit, "worker stopped");
        Ok(exit)
    }

    /// Claims, runs and settles jobs until the worker is drained or
    /// stopped (see `stop.rs` for what follows).
    async fn serve(&mut self, signals: &mut Signals, inbox: &mut UnboundedReceiver<Event>) -> WorkerExit {
        let queues: Vec<String> = self.cfg.queues.clone();
        let mut pause = false;
        loop {
            if matches!(self.mode, Mode::Draining(_)) && self.running.is_empty() {
                break WorkerExit::Clean;
            }
            if self
                .isolated
                .as_ref()
                .is_some_and(|k| !self.running.contains_key(k))
            {
                self.isolated = None;
            }
            let can_claim = self.mode == Mode::Run && self.isolated.is_none() && self.wants_claim() && !pause;
            let (want_work, claim_failed) = if can_claim {
                self.claim_step(&queues).await
            } else {
                (false, pause)
            };
            pause = false;
            self.flush_consumes().await;
            if want_work && self.cfg.until_drained && self.holding() == 0 && self.drained(&queues).await {
                tracing::info!("queues drained");
                break WorkerExit::Clean;
            }
            if let Some(report) = self.cfg.in_flight.as_mut() {
                report.report(self.running.len());
            }
            let wake = self.wait(signals, inbox, &queues, want_work, claim_failed).await;
            self.woke_at_once = matches!(wake, Wake::Work(_, true));
            match wake {
                Wake::Signal(s) => {
                    if let Some(exit) = self.on_signal(s, inbox).await {
                        break exit;
                    }
                }
                Wake::Event(first) => self.on_events(first, inbox).await,
                Wake::Timer => {
                    if let Some(exit) = self.on_timer(inbox).await {
                        break exit;
                    }
                }
                Wake::Work(handed, _) => self.take_handed(handed).await,
                Wake::WaitFailed(e) => {
                    tracing::warn!(error = %e, "waiting for work failed; retrying");
                    pause = true;
                }
            }
        }
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
}
