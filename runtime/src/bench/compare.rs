//! `jobworker bench --zookeeper`: the figures every board can give —
//! enqueue one by one, drain through the real supervisor (workers running,
//! and including their start-up), first job, memory — measured on the
//! ZooKeeper board and, in the same run, on a Redis board, side by side.

use std::time::{Duration, Instant};

use crate::bench::drain::{pss_mib, until, Spawned};
use crate::bench::handler::NAME;
use crate::bench::BenchOptions;
use crate::board::{AnyBoard, Board};
use crate::error::Result;
use crate::job::NewJob;

/// One board's figures.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct BoardFigures {
    /// `Redis` or `ZooKeeper`.
    pub backend: String,
    /// Posts per second, one by one.
    pub enqueue_one_per_s: f64,
    /// Jobs per second with the workers already running.
    pub drain_per_s: f64,
    /// Jobs per second from starting `jobworker` to the last job.
    pub drain_incl_startup_per_s: f64,
    /// From starting `jobworker` to one queued job handled, ms.
    pub first_job_ms: f64,
    /// Peak PSS of the supervisor and its workers, MiB.
    pub worker_mem_mib: f64,
}

/// The pids of `pid`'s children.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

async fn post_n(board: &AnyBoard, queue: &str, n: usize) -> Result<()> {
    for _ in 0..n {
        board.post(queue, NewJob::new(NAME)).await?;
    }
    Ok(())
}

/// Measures `board`, whose workers are started on `board_env` (see
/// `Spawned::start`).
pub async fn measure_board(
    backend: &str,
    board: &AnyBoard,
    board_env: (&str, &str),
    opts: &BenchOptions,
    progress: &dyn Fn(&str),
) -> Result<BoardFigures> {
    let run = std::process::id();
    let queue = |what: &str| format!("jobworker-bench-{what}-{run}");
    let mut f = BoardFigures {
        backend: backend.to_owned(),
        ..BoardFigures::default()
    };
    progress(&format!("{backend}: enqueue one by one"));
    let n = opts.jobs.min(2000);
    let start = Instant::now();
    post_n(board, &queue("enqueue"), n).await?;
    f.enqueue_one_per_s = n as f64 / start.elapsed().as_secs_f64();

    progress(&format!(
        "{backend}: first job, drain with running workers, memory"
    ));
    let q = queue("drain");
    let empty = || async { Ok(board.job_count(&q).await? == 0) };
    board.post(&q, NewJob::new(NAME)).await?;
    let started = Instant::now();
    let sup = Spawned::start(board_env, opts, &q)?;
    until("the first job", Duration::from_millis(1), empty).await?;
    f.first_job_ms = started.elapsed().as_secs_f64() * 1e3;
    sup.signal(nix::sys::signal::Signal::SIGTSTP);
    tokio::time::sleep(Duration::from_millis(300)).await;
    post_n(board, &q, opts.jobs).await?;
    let mut pids = children(sup.child.id());
    pids.push(sup.child.id());
    let t0 = Instant::now();
    sup.signal(nix::sys::signal::Signal::SIGCONT);
    let mut peak: f64 = 0.0;
    let mut last_sample = Instant::now() - Duration::from_secs(1);
    until("the drain", Duration::from_millis(5), || {
        if last_sample.elapsed() >= Duration::from_millis(100) {
            last_sample = Instant::now();
            peak = peak.max(pids.iter().map(|&p| pss_mib(p)).sum());
        }
        empty()
    })
    .await?;
    f.drain_per_s = opts.jobs as f64 / t0.elapsed().as_secs_f64();
    f.worker_mem_mib = peak;
    sup.stop().await?;

    progress(&format!("{backend}: drain including start-up"));
    let q = queue("startup");
    post_n(board, &q, opts.jobs).await?;
    let t0 = Instant::now();
    let sup = Spawned::start(board_env, opts, &q)?;
    until("the drain", Duration::from_millis(5), || async {
        Ok(board.job_count(&q).await? == 0)
    })
    .await?;
    f.drain_incl_startup_per_s = opts.jobs as f64 / t0.elapsed().as_secs_f64();
    sup.stop().await?;
    Ok(f)
}

/// Prints ZooKeeper's figures next to Redis', with ratios.
pub fn print_side_by_side(opts: &BenchOptions, zk: &BoardFigures, redis: &BoardFigures) {
    println!(
        "jobworker bench: {} no-op jobs (posted one by one), --workers {} --concurrency {}",
        opts.jobs, opts.workers, opts.concurrency
    );
    println!(
        "{:<32} {:>12} {:>12} {:>16}",
        "figure", "zookeeper", "redis", "zookeeper/redis"
    );
    let rows = [
        (
            "enqueue one by one, jobs/s",
            zk.enqueue_one_per_s,
            redis.enqueue_one_per_s,
        ),
        (
            "drain (running workers), jobs/s",
            zk.drain_per_s,
            redis.drain_per_s,
        ),
        (
            "drain incl. start-up, jobs/s",
            zk.drain_incl_startup_per_s,
            redis.drain_incl_startup_per_s,
        ),
        ("first job handled, ms", zk.first_job_ms, redis.first_job_ms),
        (
            "supervisor + workers PSS, MiB",
            zk.worker_mem_mib,
            redis.worker_mem_mib,
        ),
    ];
    for (name, z, r) in rows {
        println!(
            "{name:<32} {z:>12.1} {r:>12.1} {:>15.2}×",
            z / r.max(f64::MIN_POSITIVE)
        );
    }
}
