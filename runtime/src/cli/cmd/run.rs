//! `jobworker run`: resolves the board, loads the handlers, then forks the
//! supervisor's workers — all without an async runtime, which must not
//! exist before `fork`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::board::BlockingBoard;
use crate::cli::server::{self, BoardArgs};
use crate::cli::values::{default_owner, seconds};
use crate::cli::workdir::OwnWorkdir;
use crate::error::{Error, Result};
use crate::handler::Registry;
use crate::supervisor::{supervise, SupervisorConfig};
use crate::worker::{run_worker, WorkerConfig, WorkerExit};

/// `run`: the supervisor and its workers.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Queues to serve, in order (comma-separated).
    #[arg(
        long,
        short = 'q',
        default_value = "default",
        env = "JOBWORKER_QUEUES",
        value_delimiter = ','
    )]
    pub queues: Vec<String>,
    /// Worker processes (default: the number of CPUs); 0 runs one worker
    /// in this process without forking.
    #[arg(long, short = 'w', env = "JOBWORKER_WORKERS")]
    pub workers: Option<usize>,
    /// Jobs each worker runs at once.
    #[arg(long, short = 'c', default_value_t = 1, env = "JOBWORKER_CONCURRENCY")]
    pub concurrency: usize,
    /// Jobs each worker claims ahead of its free slots (leases held and
    /// extended, started as slots free up, given back on drain or quiet):
    /// claims overlap handlers and come in larger batches. Default: a
    /// fifth of --concurrency, and at least half of it up to 5; 0 claims
    /// only for free slots.
    #[arg(long, env = "JOBWORKER_PREFETCH")]
    pub prefetch: Option<usize>,
    /// Directory holding `jobworker-workers/sandbox-<k>` (kept; two
    /// supervisors cannot share one). Default: a directory of this run's
    /// own, `$XDG_RUNTIME_DIR/jobworker/<name>` (else under the temp dir),
    /// removed at exit.
    #[arg(long, env = "JOBWORKER_WORKDIR")]
    pub workdir: Option<PathBuf>,
    /// This supervisor's name: names its default work directory (default:
    /// its pid).
    #[arg(long, env = "JOBWORKER_NAME")]
    pub name: Option<String>,
    /// Lease length in seconds (extended every third of it while a job
    /// runs). Default: the board's `expiry` config, else 30.
    #[arg(long, env = "JOBWORKER_EXPIRY")]
    pub expiry: Option<f64>,
    /// Seconds in-flight jobs may finish after TERM/INT. Default: the
    /// board's `grace` config, else 30.
    #[arg(long, env = "JOBWORKER_GRACE")]
    pub grace: Option<f64>,
    /// Longest idle wait in seconds between checks for work.
    #[arg(long, default_value_t = 5.0, env = "JOBWORKER_INTERVAL")]
    pub interval: f64,
    /// Timeout in seconds for handlers that set none (default: no limit).
    #[arg(long, env = "JOBWORKER_TIMEOUT")]
    pub timeout: Option<f64>,
    /// Stop once the queues hold no jobs.
    #[arg(long)]
    pub until_drained: bool,
    /// Show a progress bar on stderr.
    #[arg(long)]
    pub progress: bool,
    /// Serve the supervisor's own metrics (workers, respawns, crashes, jobs
    /// in flight) at `http://ADDR/metrics` in the Prometheus text format,
    /// e.g. `127.0.0.1:9100`; a port of 0 picks a free one (logged at
    /// start).
    #[arg(long, value_name = "IP:PORT", env = "JOBWORKER_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Also run the bench's handler (set by `jobworker bench` for the
    /// workers it starts; no other binary registers it).
    #[cfg(feature = "bench")]
    #[arg(long, hide = true)]
    pub with_bench_handler: bool,
}

/// The worker template from the command line; `stored` is the board's
/// configuration, used where a flag is absent.
pub(crate) fn worker_config(a: &RunArgs, stored: &HashMap<String, String>) -> Result<WorkerConfig> {
    let mut cfg = WorkerConfig::new(a.queues.clone(), default_owner());
    cfg.concurrency = a.concurrency;
    cfg.prefetch = a
        .prefetch
        .unwrap_or_else(|| WorkerConfig::default_prefetch(a.concurrency));
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
    #[cfg(feature = "bench")]
    let registry = match a.with_bench_handler {
        true => Registry::from_entries(registry.iter().copied().chain([crate::bench::handler::ENTRY]))?,
        false => registry,
    };
    if registry.is_empty() {
        tracing::warn!(
            "no handlers are linked into this binary; every job will fail (see `jobworker handlers`)"
        );
    }
    let spec = server::spec(board)?;
    let stored = {
        // Nothing to let go of yet: no signal handlers, no listeners.
        let mut board = BlockingBoard::connect(&spec)?;
        board.ensure_agent(|| {});
        board.config()?
    };
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
        if a.metrics_listen.is_some() {
            return Err(Error::invalid(
                "--metrics-listen serves the supervisor's metrics: it needs --workers 1 or more",
            ));
        }
        let worker = WorkerConfig {
            until_drained: a.until_drained,
            ..worker
        };
        return Ok(match run_worker(spec, worker, registry, || {})? {
            // No supervisor gives them back: they are left to run out.
            WorkerExit::Unsettled => {
                tracing::warn!("leases not given back (the board did not answer); their jobs run again when they run out");
                0
            }
            exit => exit.code(),
        });
    }
    let cfg = SupervisorConfig {
        workers,
        worker,
        board: spec,
        until_drained: a.until_drained,
        progress: a.progress,
        metrics_listen: a.metrics_listen,
    };
    supervise(cfg, registry)
}
