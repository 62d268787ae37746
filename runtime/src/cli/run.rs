//! `jobworker run`: resolves the board, loads the handlers, then forks the
//! supervisor's workers — all without an async runtime, which must not
//! exist before `fork`.

use std::collections::HashMap;
use std::time::Duration;

use crate::board::BlockingBoard;
use crate::cli::args::{BoardArgs, RunArgs};
use crate::cli::server;
use crate::cli::workdir::OwnWorkdir;
use crate::error::{Error, Result};
use crate::handler::Registry;
use crate::supervisor::{supervise, SupervisorConfig};
use crate::worker::{run_worker, WorkerConfig};

fn seconds(value: f64, flag: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| Error::invalid(format!("{flag} must be a non-negative number of seconds")))
}

/// The worker template from the command line; `stored` is the board's
/// configuration, used where a flag is absent.
pub(crate) fn worker_config(a: &RunArgs, stored: &HashMap<String, String>) -> Result<WorkerConfig> {
    let mut cfg = WorkerConfig::new(a.queues.clone(), crate::cli::commands::default_owner());
    cfg.concurrency = a.concurrency;
    let pick = |flag: Option<f64>, key: &str| -> Result<Option<f64>> {
        match (flag, stored.get(key)) {
            (Some(v), _) => Ok(Some(v)),
            (None, Some(v)) => v.parse().map(Some).map_err(|_| {
                Error::invalid(format!("stored config {key} = {v:?} is not a number of seconds"))
            }),
            (None, None) => Ok(None),
        }
    };
    if let Some(expiry) = pick(a.expiry, "expiry")? {
        cfg.expiry = seconds(expiry, "--expiry")?;
    }
    if let Some(grace) = pick(a.grace, "grace")? {
        cfg.grace = seconds(grace, "--grace")?;
    }
    cfg.interval = seconds(a.interval, "--interval")?;
    cfg.default_timeout = a.timeout.map(|t| seconds(t, "--timeout")).transpose()?;
    if let Some(dir) = &a.workdir {
        cfg.workdir = dir.clone();
    }
    cfg.validate()?;
    Ok(cfg)
}

/// Runs the workers; returns the exit code.
pub(crate) fn run(board: &BoardArgs, a: &RunArgs) -> Result<i32> {
    let registry = Registry::load()?;
    if registry.is_empty() {
        tracing::warn!(
            "no handlers are linked into this binary; every job will fail (see `jobworker handlers`)"
        );
    }
    let spec = server::spec(board)?;
    let stored = BlockingBoard::connect(&spec)?.config()?;
    let mut worker = worker_config(a, &stored)?;
    // Without --workdir, a directory of this run's own (removed at exit).
    let own = match &a.workdir {
        Some(_) => None,
        None => Some(OwnWorkdir::make(a.name.as_deref())?),
    };
    if let Some(own) = &own {
        worker.workdir = own.path().to_path_buf();
    }
    let workers = a
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if workers == 0 {
        let worker = WorkerConfig {
            until_drained: a.until_drained,
            ..worker
        };
        return Ok(run_worker(spec, worker, registry, || {})?.code());
    }
    let cfg = SupervisorConfig {
        workers,
        worker,
        board: spec,
        until_drained: a.until_drained,
        progress: a.progress,
    };
    supervise(cfg, registry)
}
