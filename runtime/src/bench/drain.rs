//! Drain, pickup, first-job and memory figures through the real
//! supervisor: `jobworker` itself is started as a child process.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::bench::figures::{Figures, Percentiles};
use crate::bench::floor::{Floor, Listener};
use crate::bench::handler::{now_us, Pickup, NAME};
use crate::bench::limits::{counters, drop_queue, dropping, scratch_queue};
use crate::bench::{post_noops, BenchOptions};
use crate::board::Board;
use crate::error::{Error, Result};
use crate::job::NewJob;
use crate::redis::RedisBoard;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Pickup probes posted one at a time.
const PROBES: usize = 200;
/// Pause between probes, so that every probe finds the workers idle.
const PROBE_GAP: Duration = Duration::from_millis(20);
/// Longest any single phase may take.
const PHASE_LIMIT: Duration = Duration::from_secs(600);

/// A `jobworker` supervisor started for the bench; stopped on drop.
pub(crate) struct Spawned {
    pub child: Child,
    _workdir: tempfile::TempDir,
}

impl Spawned {
    /// Starts `jobworker --queues queue` with the bench's workers, on the
    /// board that `board` (an environment variable and its value,
    /// `JOBWORKER_REDIS_URL` or `JOBWORKER_ZOOKEEPER`) names: in the
    /// environment, a password in it stays off the command line, which
    /// every user of the machine can read.
    pub(super) fn start(board: (&str, &str), opts: &BenchOptions, queue: &str) -> Result<Spawned> {
        let exe = std::env::current_exe().map_err(|e| Error::io("cannot find the jobworker binary", e))?;
        let workdir = tempfile::tempdir().map_err(|e| Error::io("cannot make a work directory", e))?;
        let child = Command::new(exe)
            .env_remove("JOBWORKER_REDIS_URL")
            .env_remove("JOBWORKER_ZOOKEEPER")
            .env(board.0, board.1)
            .args(["--queues", queue])
            .args([
                "--workers",
                &opts.workers.to_string(),
                "--concurrency",
                &opts.concurrency.to_string(),
            ])
            .arg("--workdir")
            .arg(workdir.path())
            .arg("--with-bench-handler")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| Error::io("cannot start jobworker", e))?;
        Ok(Spawned {
            child,
            _workdir: workdir,
        })
    }

    pub(super) fn signal(&self, sig: Signal) {
        let _ = kill(Pid::from_raw(self.child.id() as i32), sig);
    }

    pub(super) async fn stop(mut self) -> Result<()> {
        self.signal(Signal::SIGTERM);
        let end = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().map_err(|e| Error::io("wait", e))?.is_none() {
            if Instant::now() > end {
                return Err(Error::unavailable("the bench's jobworker did not stop"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.signal(Signal::SIGQUIT);
            std::thread::sleep(Duration::from_millis(500));
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Proportional set size of a process, MiB (0 when unreadable).
pub(crate) fn pss_mib(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let kb: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

async fn worker_pids(board: &RedisBoard, queue: &str) -> Result<Vec<u32>> {
    let live = crate::board::Presence::live_workers(board).await?;
    Ok(live
        .into_iter()
        .filter(|w| w.queues == [queue.to_owned()])
        .map(|w| w.pid)
        .collect())
}

/// Polls `done` every `every` until it is true; fails after [`PHASE_LIMIT`].
pub(crate) async fn until<F, Fut>(what: &str, every: Duration, mut done: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    let end = Instant::now() + PHASE_LIMIT;
    while !done().await? {
        if Instant::now() > end {
            return Err(Error::unavailable(format!("bench timed out waiting for {what}")));
        }
        tokio::time::sleep(every).await;
    }
    Ok(())
}

/// Fills in the drain, pickup, memory and first-job figures.
pub(crate) async fn measure(
    board: &RedisBoard,
    opts: &BenchOptions,
    f: &mut Figures,
    progress: &dyn Fn(&str),
) -> Result<()> {
    let q = scratch_queue("drain");
    drop_queue(board, &q).await?;
    let empty = || async { Ok(board.job_count(&q).await? == 0) };

    // First job: from starting jobworker to one queued job handled.
    board.post(&q, NewJob::new(NAME)).await?;
    let started = Instant::now();
    let sup = Spawned::start(("JOBWORKER_REDIS_URL", &opts.url), opts, &q)?;
    until("the first job", Duration::from_millis(1), empty).await?;
    f.first_job_ms = started.elapsed().as_secs_f64() * 1e3;
    until("the workers to register", Duration::from_millis(10), || async {
        Ok(worker_pids(board, &q).await?.len() == opts.workers)
    })
    .await?;
    let mut pids = worker_pids(board, &q).await?;
    pids.push(sup.child.id());

    // Drain with the workers already running: quiet them, queue the jobs,
    // resume them.
    sup.signal(Signal::SIGTSTP);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = counters(board).await?;
    post_noops(board, &q, opts.jobs).await?;
    let t0 = Instant::now();
    sup.signal(Signal::SIGCONT);
    let mut samples: Vec<f64> = Vec::new();
    let mut last_sample = Instant::now() - Duration::from_secs(1);
    until("the drain", Duration::from_millis(5), || {
        if last_sample.elapsed() >= Duration::from_millis(100) {
            last_sample = Instant::now();
            samples.push(pids.iter().map(|&p| pss_mib(p)).sum());
        }
        empty()
    })
    .await?;
    let peak = samples.iter().copied().fold(0.0, f64::max);
    // Growth from the first second of the drain (workers warmed up) to its end.
    if let (Some(&early), Some(&late)) = (
        samples.get(samples.len().min(10).saturating_sub(1)),
        samples.last(),
    ) {
        f.worker_mem_growth_pct = (late - early) / early.max(0.001) * 100.0;
    }
    f.drain_per_s = opts.jobs as f64 / t0.elapsed().as_secs_f64();
    let after = counters(board).await?;
    f.redis_cpu_us_per_job = (after.cpu_us - before.cpu_us) / opts.jobs as f64;
    f.commands_per_job = (after.commands - before.commands) / opts.jobs as f64;
    f.script_calls_per_job = (after.script_calls - before.script_calls) / opts.jobs as f64;
    f.reads_per_job = (after.reads - before.reads) / opts.jobs as f64;
    f.worker_mem_mib = peak.max(pids.iter().map(|&p| pss_mib(p)).sum());

    // Pickup latency with idle workers.
    progress("pickup latency (200 probes, and as many of the floor's)");
    f.pickup_ms = pickup_latency(board, &q).await?;
    f.pickup_floor_ms = floor_pickup(board).await?;
    sup.stop().await?;

    // Drain including start-up: the jobs wait, then jobworker starts.
    progress("drain including start-up");
    post_noops(board, &q, opts.jobs).await?;
    let t0 = Instant::now();
    let sup = Spawned::start(("JOBWORKER_REDIS_URL", &opts.url), opts, &q)?;
    until("the drain", Duration::from_millis(5), empty).await?;
    f.drain_incl_startup_per_s = opts.jobs as f64 / t0.elapsed().as_secs_f64();
    sup.stop().await?;
    drop_queue(board, &q).await
}

/// Pickup latency with idle workers: posts [`PROBES`] probes one at a time
/// and reads how long each waited before a worker ran it.
async fn pickup_latency(board: &RedisBoard, q: &str) -> Result<Percentiles> {
    let key = format!("{}:pickup", board.keys(q)?.namespace);
    for _ in 0..PROBES {
        let probe = Pickup {
            posted_us: now_us(),
            key: key.clone(),
        };
        board.post(q, NewJob::new(NAME).args(&Some(probe))?).await?;
        tokio::time::sleep(PROBE_GAP).await;
    }
    until("the pickup probes", Duration::from_millis(5), || async {
        Ok(board.conn.query::<usize>(redis::cmd("LLEN").arg(&key)).await? >= PROBES)
    })
    .await?;
    let waits: Vec<u64> = board
        .conn
        .query(redis::cmd("LRANGE").arg(&key).arg(0).arg(-1))
        .await?;
    Ok(ms(waits))
}

/// The floor's hand-offs (`floor.rs`), as many as the pickup's probes and
/// at their pace: how long each took to reach its worker (the floor's
/// keys dropped whatever happened).
async fn floor_pickup(board: &RedisBoard) -> Result<Percentiles> {
    let q = scratch_queue("floor-pickup");
    let waits = dropping(board, &q, async {
        let floor = Floor::load(board, &q).await?;
        let listener = Listener::start(&floor, PROBES).await?;
        for _ in 0..PROBES {
            floor.hand_off().await?;
            floor.register().await?;
            tokio::time::sleep(PROBE_GAP).await;
        }
        listener.waits().await
    })
    .await?;
    Ok(ms(waits))
}

/// Percentiles in ms of waits in µs.
fn ms(waits: Vec<u64>) -> Percentiles {
    Percentiles::of(waits.into_iter().map(|us| us as f64 / 1e3).collect())
}
