//! The heartbeat: a thread of its own, with its own runtime and board
//! connection, extends every held lease each third of its horizon (the
//! expiry; on ZooKeeper at most the session timeout). A busy or blocking
//! handler cannot starve it. A lease it finds lost, or cannot
//! extend before it would expire, is reported to the worker loop, which
//! stops that handler and drops its result.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use crate::board::{Admin, AnyBoard, Board, BoardSpec, CancelStream, Events, Presence, WorkerInfo};
use crate::error::{Error, Result};
use crate::job::{JobId, Lease};

/// How often the thread checks whether it should stop.
const STOP_POLL: Duration = Duration::from_millis(50);

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
    /// Last time the server confirmed the lease (claim or extend).
    confirmed: Instant,
}

type HeldMap = Arc<Mutex<HashMap<LeaseKey, Held>>>;

/// The running heartbeat thread.
pub(crate) struct Heartbeat {
    held: HeldMap,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    /// Starts the thread; `lost` is called with each lease found lost, and
    /// why.
    pub fn start(
        spec: BoardSpec,
        expiry: Duration,
        info: WorkerInfo,
        lost: impl Fn(LeaseKey, Lost) + Send + 'static,
    ) -> Result<Heartbeat> {
        let held: HeldMap = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (held.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("jobworker-heartbeat".into())
            .spawn(move || beat_thread(spec, expiry, info, h, s, lost))
            .map_err(|e| Error::io("cannot start the heartbeat thread", e))?;
        Ok(Heartbeat {
            held,
            stop,
            thread: Some(thread),
        })
    }

    /// Keeps `lease` alive from now on (it was just claimed): the heartbeat
    /// takes a handle on it that only extends.
    pub fn hold(&self, lease: &Lease) {
        if let Ok(mut held) = self.held.lock() {
            held.insert(
                key_of(lease),
                Held {
                    lease: Arc::new(lease.extend_handle()),
                    confirmed: Instant::now(),
                },
            );
        }
    }

    /// Stops extending a lease.
    pub fn release(&self, key: &LeaseKey) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(key);
        }
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
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

/// Reports a lease as lost, unless it was released meanwhile (its job
/// finished since the snapshot).
fn report_lost(held: &HeldMap, key: &LeaseKey, why: Lost, lost: &impl Fn(LeaseKey, Lost)) {
    let still_held = held.lock().map(|mut h| h.remove(key).is_some()).unwrap_or(false);
    if still_held {
        lost(key.clone(), why);
    }
}

fn beat_thread(
    spec: BoardSpec,
    expiry: Duration,
    mut info: WorkerInfo,
    held: HeldMap,
    stop: Arc<AtomicBool>,
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
    let beat = horizon / 3;
    rt.block_on(async move {
        let mut board: Option<AnyBoard> = None;
        // Cancels of this worker's jobs, announced by `cancel` (where the
        // board announces them).
        let mut cancels = None;
        let backend = spec.backend();
        while !stop.load(Ordering::SeqCst) {
            if board.is_none() {
                match tokio::time::timeout(beat, spec.connect()).await {
                    Ok(Ok(b)) => board = Some(b),
                    Ok(Err(e)) => tracing::warn!(error = %e, "heartbeat cannot reach {backend}; retrying"),
                    Err(_) => tracing::warn!("heartbeat timed out connecting to {backend}; retrying"),
                }
            }
            // Subscribed before the extends below: a cancel that came
            // before the subscription is caught by their refusal.
            if cancels.is_none() {
                if let Some(b) = &board {
                    cancels = b.cancels_of(&info.owner).await.ok().flatten();
                }
            }
            let snapshot = extend_held(board.as_ref(), &held, expiry, beat, horizon, &lost).await;
            if let Some(b) = &board {
                info.jobs = snapshot.iter().map(|(k, _, _)| k.0 .0.clone()).collect();
                if let Err(e) = record_presence(b, &mut info).await {
                    tracing::debug!(error = %e, "cannot record worker presence");
                }
            }
            listen_for_cancels(&mut cancels, &held, beat, &stop, &lost).await;
        }
        if let Some(b) = &board {
            let _ = b.remove_worker(&info.owner).await;
        }
    });
}

/// Extends every held lease once (each bounded by `beat`); reports the
/// leases refused, or unconfirmed for too long, as lost. Returns what was
/// held.
async fn extend_held(
    board: Option<&AnyBoard>,
    held: &HeldMap,
    expiry: Duration,
    beat: Duration,
    horizon: Duration,
    lost: &impl Fn(LeaseKey, Lost),
) -> Vec<(LeaseKey, Arc<Lease>, Instant)> {
    let snapshot: Vec<(LeaseKey, Arc<Lease>, Instant)> = held
        .lock()
        .map(|h| {
            h.iter()
                .map(|(k, v)| (k.clone(), v.lease.clone(), v.confirmed))
                .collect()
        })
        .unwrap_or_default();
    for (key, lease, confirmed) in &snapshot {
        let outcome = match board {
            Some(b) => tokio::time::timeout(beat, b.extend(lease.as_ref(), expiry))
                .await
                .ok(),
            None => None,
        };
        match outcome {
            Some(Ok(())) => {
                if let Ok(mut h) = held.lock() {
                    if let Some(entry) = h.get_mut(key) {
                        entry.confirmed = Instant::now();
                    }
                }
            }
            Some(Err(e)) if e.is_lease_over() => report_lost(held, key, Lost::of(&e), lost),
            failed => {
                // Unconfirmed: once the lease may have run out on the
                // server, someone else may hold the job.
                if confirmed.elapsed() + beat / 2 >= horizon {
                    let why = Lost::Lease("could not extend it in time".into());
                    report_lost(held, key, why, &lost);
                } else if let Some(Err(e)) = failed {
                    tracing::warn!(job = %lease.job(), error = %e, "cannot extend lease; will retry");
                }
            }
        }
    }
    snapshot
}

/// Waits out one beat, stopping the handlers of jobs cancelled meanwhile
/// (where the board announces cancels) and returning early on stop.
async fn listen_for_cancels(
    cancels: &mut Option<CancelStream>,
    held: &HeldMap,
    beat: Duration,
    stop: &AtomicBool,
    lost: &impl Fn(LeaseKey, Lost),
) {
    let mut slept = Duration::ZERO;
    while slept < beat && !stop.load(Ordering::SeqCst) {
        let Some(stream) = cancels.as_mut() else {
            tokio::time::sleep(STOP_POLL).await;
            slept += STOP_POLL;
            continue;
        };
        let started = Instant::now();
        match tokio::time::timeout(STOP_POLL, stream.next()).await {
            Ok(Some(job)) => {
                let keys: Vec<LeaseKey> = held
                    .lock()
                    .map(|h| h.keys().filter(|k| k.0 .0 == job).cloned().collect())
                    .unwrap_or_default();
                for key in keys {
                    report_lost(held, &key, Lost::Cancelled, lost);
                }
            }
            Ok(None) => *cancels = None,
            Err(_) => {}
        }
        slept += started.elapsed();
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
