//! The heartbeat: a thread of its own, with its own runtime and one board
//! connection, keeps the worker's claims alive. Five loops run side by
//! side (four share that connection), each on its own clock, so a slow one
//! does not hold up the others, and a busy or blocking handler cannot
//! starve any of them:
//!
//! - extend: every held lease, each third of its horizon (the expiry; on
//!   ZooKeeper at most the session timeout), all at once;
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

mod leases;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::sync::{watch, OnceCell};
use tokio::task::AbortHandle;

use crate::board::{Admin, AnyBoard, BoardSpec, Events, Presence, WorkerInfo};
use crate::error::{Error, Result};
use crate::handler::CancelFlag;
use crate::job::{JobId, Lease};
use crate::worker::watchdog::{replace_worker, LoopWatch};
use leases::{expiry_loop, extend_held, extend_loop, report_lost, Beat};

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

struct Held {
    /// The heartbeat's handle on the lease (it only extends it; the
    /// worker's settle step keeps the one it settles).
    lease: Arc<Lease>,
    /// When the last claim or extend that the server confirmed was sent
    /// (the lease runs at least an expiry from then).
    confirmed: Instant,
    /// Its handler finished well; the lease waits to be consumed.
    finished: bool,
    /// How to stop its handler, once started.
    handler: Option<HandlerStop>,
}

/// What stops a running handler: its cancel flag, and its task's abort.
struct HandlerStop {
    cancel: CancelFlag,
    abort: Option<AbortHandle>,
}

impl HandlerStop {
    fn stop(&self) {
        self.cancel.cancel();
        if let Some(task) = &self.abort {
            task.abort();
        }
    }
}

type HeldMap = Arc<Mutex<HashMap<LeaseKey, Held>>>;

/// The running heartbeat thread.
pub(crate) struct Heartbeat {
    held: HeldMap,
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
        let h = held.clone();
        let thread = std::thread::Builder::new()
            .name("jobworker-heartbeat".into())
            .spawn(move || beat_thread(spec, expiry, info, h, watch, stopped, lost))
            .map_err(|e| Error::io("cannot start the heartbeat thread", e))?;
        Ok(Heartbeat {
            held,
            horizon,
            stop,
            thread: Some(thread),
        })
    }

    /// Keeps `lease` alive from now on (it was just claimed, by a call sent
    /// at `sent`): the heartbeat takes a handle on it that only extends.
    pub(super) fn hold(&self, lease: &Lease, sent: Instant) {
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

    /// Lets the heartbeat raise the cancel flag of the handler about to
    /// start under lease `key` when the lease is over (the loop may be
    /// waiting on a board call then); false when it is over already.
    pub(super) fn stops(&self, key: &LeaseKey, cancel: &CancelFlag) -> bool {
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
    pub(super) fn aborts(&self, key: &LeaseKey, task: &AbortHandle) -> bool {
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
    pub(super) fn surely_held(&self, key: &LeaseKey) -> bool {
        let Ok(held) = self.held.lock() else {
            return false;
        };
        held.get(key)
            .is_some_and(|h| h.confirmed.elapsed() < self.horizon / 2)
    }

    /// Marks a held lease as done (its handler finished well; the loop's
    /// batched consume or, should the loop freeze first, the watchdog
    /// consumes it) or, `false`, as not done (the loop stopped it first).
    pub(super) fn mark_done(&self, key: &LeaseKey, done: bool) {
        mark(&self.held, key, || done);
    }

    /// [`mark_done`](Self::mark_done) for a handler's thread, as `done()` says
    /// under the map's lock (so it cannot undo a later "not done" of the loop).
    pub(super) fn finisher(&self) -> impl Fn(&LeaseKey, &dyn Fn() -> bool) + Send + Sync + 'static {
        let held = self.held.clone();
        move |key, done| mark(&held, key, done)
    }

    /// Stops extending a lease.
    pub(super) fn release(&self, key: &LeaseKey) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(key);
        }
    }

    /// Stops the thread (at once: its loops wait on the stop too) and joins it.
    pub(super) fn stop(mut self) {
        self.stop.send_replace(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn mark(held: &HeldMap, key: &LeaseKey, done: impl FnOnce() -> bool) {
    if let Some(h) = held.lock().ok().as_mut().and_then(|h| h.get_mut(key)) {
        h.finished = done();
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
}

impl Link {
    async fn board(&self) -> Option<&AnyBoard> {
        let backend = self.spec.backend();
        let connect = || async {
            let why = match tokio::time::timeout(self.patience, self.spec.connect()).await {
                Ok(Ok(b)) => return Ok(b),
                Ok(Err(e)) => e.to_string(),
                Err(_) => "timed out".to_owned(),
            };
            tracing::warn!(error = %why, "heartbeat cannot reach {backend}; retrying");
            Err(())
        };
        self.board.get_or_try_init(connect).await.ok()
    }
}

fn beat_thread(
    spec: BoardSpec,
    expiry: Duration,
    info: WorkerInfo,
    held: HeldMap,
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
    let link = Link {
        spec,
        board: OnceCell::new(),
        patience: beat.every,
    };
    rt.block_on(async {
        let beats = async {
            tokio::join!(
                extend_loop(&link, &held, beat, &lost),
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
        if let Some(b) = link.board.get() {
            let _ = b.remove_worker(&owner).await;
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
                extend_held(board, held, beat, lost).await;
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
