//! The heartbeat: a thread of its own, with its own runtime and one board
//! connection, keeps the worker's claims alive. Six loops run side by
//! side (five share that connection), each on its own clock, so a slow one
//! does not hold up the others, and a busy or blocking handler cannot
//! starve any of them:
//!
//! - extend: every held lease, each third of its horizon (the expiry; on
//!   ZooKeeper at most the session timeout), all at once;
//! - urgent: a lease handed over by a post, a third of its horizon after
//!   it began (or as soon as the loop is free, when that is past), unless
//!   a round extended it first;
//! - expiry: a lease the server has not confirmed for nearly its horizon
//!   is lost, by this process' clock alone, however long an extend waits
//!   (`heartbeat/leases.rs`);
//! - presence: the worker's registry entry (its jobs, stamped with the
//!   server's time), on the same beat;
//! - cancels: the board's announcements of cancelled jobs of this worker;
//! - watch: the first step of a handler on the worker loop's thread, which
//!   ends the process when it runs past its limit ([`crate::worker::watchdog`]);
//!   only in a worker with a handler that starts on the loop.
//!
//! A lease found lost, cancelled, or not extended in time is reported to
//! the worker loop, which drops the handler's result, and the heartbeat
//! stops that handler itself at once, whatever the loop is waiting on.

mod held;
mod leases;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::sync::{watch, OnceCell};

use crate::board::{Admin, AnyBoard, BoardSpec, Events, Presence, WorkerInfo};
use crate::error::{Error, Result};
use crate::job::{JobId, Lease};
use crate::worker::watchdog::{replace_worker, LoopWatch};
use held::{HeldMap, Urgent};
use leases::{expiry_loop, extend_held, extend_loop, report_lost, urgent_loop, Beat};

/// How long the heartbeat's stop waits for the board to remove the
/// worker's entry.
const REMOVE_PATIENCE: Duration = Duration::from_millis(500);

/// How often the watch looks at the loop's first step.
const WATCH_TICK: Duration = Duration::from_millis(250);

/// A held lease: a job and the fencing token of its claim (one job can be
/// claimed again while a stale handler of the old claim still runs), and
/// its queue (a pipeline step keeps its id in the next queue).
pub(crate) type LeaseKey = (JobId, u64, String);

/// The key of a lease.
pub(crate) fn key_of(lease: &Lease) -> LeaseKey {
    (lease.job().clone(), lease.token(), lease.queue().to_string())
}

/// The running heartbeat thread.
pub(crate) struct Heartbeat {
    held: HeldMap,
    /// Wakes the loop that extends handed leases by a time of their own.
    urgent: Arc<Urgent>,
    /// The lease each claim asks for.
    expiry: Duration,
    /// How long a lease can be trusted without a confirmed extend.
    horizon: Duration,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    /// Starts the thread; `lost` is called with each lease found lost, and
    /// why.
    pub(super) fn start(
        spec: BoardSpec,
        expiry: Duration,
        info: WorkerInfo,
        watch: Option<LoopWatch>,
        lost: impl Fn(LeaseKey, Lost) + Send + 'static,
    ) -> Result<Heartbeat> {
        let held: HeldMap = Arc::default();
        let horizon = spec.lease_horizon(expiry);
        let (stop, stopped) = watch::channel(false);
        let urgent: Arc<Urgent> = Arc::default();
        let leases = (held.clone(), urgent.clone());
        let thread = std::thread::Builder::new()
            .name("jobworker-heartbeat".into())
            .spawn(move || beat_thread(spec, expiry, info, leases, watch, stopped, lost))
            .map_err(|e| Error::io("cannot start the heartbeat thread", e))?;
        Ok(Heartbeat {
            held,
            urgent,
            expiry,
            horizon,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread (at once: its loops wait on the stop too) and joins it.
    pub(super) fn stop(mut self) {
        self.stop.send_replace(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Why a held lease is over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lost {
    /// The job was cancelled (heard on the cancel channel, or an extend
    /// refused with [`Error::is_cancelled`]).
    Cancelled,
    /// The lease is gone for another reason, said in the text.
    Lease(String),
}

impl Lost {
    /// Why an extend refused with `e` ended the lease.
    fn of(e: &Error) -> Lost {
        if e.is_cancelled() {
            Lost::Cancelled
        } else {
            Lost::Lease(e.to_string())
        }
    }
}

/// The heartbeat's one board connection, made on first use and shared by
/// its loops; a failed attempt is tried again by the next caller.
struct Link {
    spec: BoardSpec,
    board: OnceCell<AnyBoard>,
    /// How long one connection attempt may take.
    patience: Duration,
    /// The attempts that failed.
    failures: AtomicU32,
}

impl Link {
    fn new(spec: BoardSpec, patience: Duration) -> Link {
        Link {
            spec,
            board: OnceCell::new(),
            patience,
            failures: AtomicU32::new(0),
        }
    }

    /// The connection, made now if need be; `None` when that fails (at
    /// once, when the server refuses it).
    async fn board(&self) -> Option<&AnyBoard> {
        let backend = self.spec.backend();
        let connect = || async {
            let why = match tokio::time::timeout(self.patience, self.spec.connect()).await {
                Ok(Ok(b)) => return Ok(b),
                Ok(Err(e)) => e.to_string(),
                Err(_) => "timed out".to_owned(),
            };
            let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::warn!(error = %why, failures, "heartbeat cannot reach {backend}; retrying");
            Err(())
        };
        self.board.get_or_try_init(connect).await.ok()
    }
}

fn beat_thread(
    spec: BoardSpec,
    expiry: Duration,
    info: WorkerInfo,
    (held, urgent): (HeldMap, Arc<Urgent>),
    loop_watch: Option<LoopWatch>,
    mut stopped: watch::Receiver<bool>,
    lost: impl Fn(LeaseKey, Lost),
) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "heartbeat cannot start its runtime; leases will expire");
            return;
        }
    };
    // How long a lease can be trusted without a confirmed extend: its
    // expiry, and on ZooKeeper at most the session timeout (the lock dies
    // with the claiming session).
    let horizon = spec.lease_horizon(expiry);
    let beat = Beat {
        expiry,
        horizon,
        every: horizon / 3,
    };
    let owner = info.owner.clone();
    let queues = info.queues.clone();
    let link = Link::new(spec, beat.every);
    rt.block_on(async {
        let beats = async {
            tokio::join!(
                extend_loop(&link, &held, beat, &lost),
                urgent_loop(&link, (&held, &urgent), beat, &lost),
                expiry_loop(&held, beat, &lost),
                presence_loop(&link, &held, info, beat.every),
                cancel_loop(&link, &held, &owner, beat, &lost),
                watch_loop(&link, &held, &loop_watch, (&owner, &queues)),
            )
        };
        tokio::select! {
            _ = beats => {}
            _ = stopped.wait_for(|stop| *stop) => {}
        }
        // A board that does not answer leaves the entry to go stale.
        if let Some(b) = link.board.get() {
            let _ = tokio::time::timeout(REMOVE_PATIENCE, b.remove_worker(&owner)).await;
        }
    });
}

/// Looks at the loop's first step every [`WATCH_TICK`]; one past its
/// limit ends the process ([`replace_worker`]). Without a watch (no
/// handler of this worker starts on the loop) it does nothing.
async fn watch_loop(link: &Link, held: &HeldMap, watch: &Option<LoopWatch>, who: (&str, &[String])) {
    let Some(watch) = watch else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(WATCH_TICK).await;
        if let Some(overdue) = watch.overdue(Instant::now()) {
            // Taken out of `held`: no extend races the give-backs, and the
            // handlers of those given back stop first.
            let leases = held
                .lock()
                .map(|mut h| {
                    h.drain()
                        .map(|(k, v)| {
                            if let Some(handler) = v.handler.filter(|_| !v.finished) {
                                handler.stop();
                            }
                            (k, v.lease.extend_handle(), v.finished)
                        })
                        .collect()
                })
                .unwrap_or_default();
            replace_worker(link.board().await, leases, overdue, who, link.patience).await;
        }
    }
}

/// Records the worker's registry entry with the jobs it holds, once per
/// beat.
async fn presence_loop(link: &Link, held: &HeldMap, mut info: WorkerInfo, beat: Duration) {
    loop {
        if let Some(board) = link.board().await {
            info.jobs = held
                .lock()
                .map(|h| h.keys().map(|k| k.0 .0.clone()).collect())
                .unwrap_or_default();
            if let Err(e) = record_presence(board, &mut info).await {
                tracing::debug!(error = %e, "cannot record worker presence");
            }
        }
        tokio::time::sleep(beat).await;
    }
}

/// Writes (or refreshes) the worker's registry entry, stamped with the
/// server's time.
async fn record_presence(board: &AnyBoard, info: &mut WorkerInfo) -> Result<()> {
    info.beat_ms = board.server_ms().await?.max(0) as u64;
    if info.started_ms == 0 {
        info.started_ms = info.beat_ms;
    }
    board.record_worker(info).await
}

/// Stops the handlers of this worker's jobs as their cancels are announced
/// (where the board announces them). A cancel made before the subscription
/// (the worker claims while this thread still connects) is caught at once:
/// once subscribed, every held lease is extended, and a cancelled job's
/// extend is refused.
async fn cancel_loop(link: &Link, held: &HeldMap, owner: &str, beat: Beat, lost: &impl Fn(LeaseKey, Lost)) {
    loop {
        let board = link.board().await;
        let subscribed = match board {
            Some(board) => board.cancels_of(owner).await,
            None => Ok(None),
        };
        match subscribed {
            Ok(Some(mut cancels)) => {
                extend_held(board, held, None, beat, lost).await;
                while let Some(job) = cancels.next().await {
                    let keys: Vec<LeaseKey> = held
                        .lock()
                        .map(|h| h.keys().filter(|k| k.0 .0 == job).cloned().collect())
                        .unwrap_or_default();
                    for key in keys {
                        report_lost(held, &key, Lost::Cancelled, lost);
                    }
                }
            }
            // This board announces no cancels.
            Ok(None) if link.board.initialized() => std::future::pending().await,
            Ok(None) => {}
            Err(e) => tracing::debug!(error = %e, "cannot listen for cancels; retrying"),
        }
        tokio::time::sleep(beat.every).await;
    }
}
