//! The heartbeat: a thread of its own, with its own runtime and Redis
//! connection, extends every held lease each `expiry / 3`. A busy or
//! blocking handler cannot starve it. A lease it finds lost is reported to
//! the worker loop, which stops that handler and drops its result.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use crate::board::Board;
use crate::error::{Error, Result};
use crate::job::{JobId, Lease};
use crate::redis::{RedisBoard, RedisOptions};
use crate::worker::presence::{self, WorkerInfo};

/// How often the thread checks whether it should stop.
const STOP_POLL: Duration = Duration::from_millis(50);

type Held = Arc<Mutex<HashMap<JobId, Lease>>>;

/// The running heartbeat thread.
pub(crate) struct Heartbeat {
    held: Held,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    /// Starts the thread; lost leases are sent on `lost`.
    pub fn start(opts: RedisOptions, expiry: Duration, info: WorkerInfo, lost: UnboundedSender<JobId>) -> Result<Heartbeat> {
        let held: Held = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (held.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("jobworker-heartbeat".into())
            .spawn(move || beat_thread(opts, expiry, info, h, s, lost))
            .map_err(|e| Error::io("cannot start the heartbeat thread", e))?;
        Ok(Heartbeat { held, stop, thread: Some(thread) })
    }

    /// Keeps `lease` alive from now on.
    pub fn hold(&self, lease: Lease) {
        if let Ok(mut held) = self.held.lock() {
            held.insert(lease.job.clone(), lease);
        }
    }

    /// Stops extending the lease on `job`.
    pub fn release(&self, job: &JobId) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(job);
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

fn beat_thread(opts: RedisOptions, expiry: Duration, mut info: WorkerInfo, held: Held, stop: Arc<AtomicBool>, lost: UnboundedSender<JobId>) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "heartbeat cannot start its runtime; leases will expire");
            return;
        }
    };
    let beat = expiry / 3;
    rt.block_on(async move {
        let mut board: Option<RedisBoard> = None;
        while !stop.load(Ordering::SeqCst) {
            if board.is_none() {
                match RedisBoard::with_options(opts.clone()).await {
                    Ok(b) => board = Some(b),
                    Err(e) => tracing::warn!(error = %e, "heartbeat cannot reach redis; retrying"),
                }
            }
            if let Some(b) = &board {
                let leases: Vec<Lease> = held.lock().map(|h| h.values().cloned().collect()).unwrap_or_default();
                for lease in &leases {
                    match b.extend(lease, expiry).await {
                        Ok(()) => {}
                        Err(e) if e.is_not_owner() || e.is_not_found() => {
                            // The job may have finished (and been released)
                            // since the snapshot: only a lease still held is lost.
                            let still_held = held.lock().map(|mut h| h.remove(&lease.job).is_some()).unwrap_or(false);
                            if still_held {
                                tracing::warn!(job = %lease.job, queue = %lease.queue, error = %e, "lease lost");
                                let _ = lost.send(lease.job.clone());
                            }
                        }
                        Err(e) => tracing::warn!(job = %lease.job, error = %e, "cannot extend lease; will retry"),
                    }
                }
                info.beat_ms = presence::now_ms();
                info.jobs = leases.iter().map(|l| l.job.0.clone()).collect();
                if let Err(e) = presence::record(b, &info).await {
                    tracing::debug!(error = %e, "cannot record worker presence");
                }
            }
            let mut slept = Duration::ZERO;
            while slept < beat && !stop.load(Ordering::SeqCst) {
                tokio::time::sleep(STOP_POLL).await;
                slept += STOP_POLL;
            }
        }
        if let Some(b) = &board {
            let _ = presence::remove(b, &info.owner).await;
        }
    });
}
