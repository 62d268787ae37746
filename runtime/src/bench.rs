//! `jobworker bench`: speed and memory figures measured against a real
//! Redis, with Redis' own limit on this machine measured in the same run,
//! so jobworker is reported as a fraction of it.

mod compare;
mod drain;
mod figures;
mod floor;
pub(crate) mod handler;
mod limits;

pub use compare::{measure_board, print_side_by_side, BoardFigures};
pub use figures::{Figures, Percentiles};
pub use handler::Pickup;
pub use limits::{claim_cost, ClaimCost};

use std::time::{Duration, Instant};

use crate::error::Result;
use crate::job::NewJob;
use crate::redis::RedisBoard;

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// No-op jobs per drain run.
    pub jobs: usize,
    /// Worker processes of the drain runs.
    pub workers: usize,
    /// Concurrency of each worker.
    pub concurrency: usize,
    /// Also measure claim cost with 100 vs 100,000 jobs queued.
    pub claim_cost: bool,
    /// Redis URL the spawned supervisors use.
    pub url: String,
    /// Whether the server runs with AOF (reported only).
    pub aof: bool,
}

/// Posts `n` no-op jobs in pipelined chunks.
pub(crate) async fn post_noops(board: &RedisBoard, queue: &str, n: usize) -> Result<Duration> {
    let start = Instant::now();
    let chunk: Vec<NewJob> = (0..1000).map(|_| NewJob::new(handler::NAME)).collect();
    let mut left = n;
    while left > 0 {
        let take = left.min(chunk.len());
        for r in board.post_many(queue, &chunk[..take]).await? {
            r?;
        }
        left -= take;
    }
    Ok(start.elapsed())
}

/// `n` posts from `tasks` concurrent tasks, each posting one job at a time
/// (an application posting from many requests at once): jobs/s and the
/// server's CPU per post.
async fn enqueue_concurrent(
    board: &RedisBoard,
    q: &str,
    n: usize,
    tasks: usize,
    f: &mut Figures,
) -> Result<()> {
    let tasks = tasks.clamp(1, n.max(1));
    let before = limits::counters(board).await?;
    let start = Instant::now();
    let posters = (0..tasks).map(|t| async move {
        for _ in (t..n).step_by(tasks) {
            crate::board::Board::post(board, q, NewJob::new(handler::NAME)).await?;
        }
        Ok::<(), crate::Error>(())
    });
    for r in futures_util::future::join_all(posters).await {
        r?;
    }
    f.enqueue_concurrent_per_s = n as f64 / start.elapsed().as_secs_f64();
    let after = limits::counters(board).await?;
    f.enqueue_concurrent_redis_us_per_job = (after.cpu_us - before.cpu_us) / n as f64;
    Ok(())
}

/// `n` posts one round trip each, and between them, in blocks, as many
/// calls of a trivial script (the round trip's own rate at the same
/// moments: it moves from one minute to the next by more than a post
/// costs the server, and no one-by-one post passes it) and as many floor
/// posts (the least a post on the taskflow layout does, `floor.rs`).
async fn enqueue_one(board: &RedisBoard, q: &str, n: usize, f: &mut Figures) -> Result<()> {
    const BLOCK: usize = 500;
    if n == 0 {
        return Ok(());
    }
    let trivial = limits::Trivial::load(board).await?;
    let floor_q = limits::scratch_queue("floor-post");
    let (posting, calling, flooring) = limits::dropping(board, &floor_q, async {
        let floor = floor::Floor::load(board, &floor_q).await?;
        let (mut posting, mut calling, mut flooring) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        for block in (0..n).step_by(BLOCK) {
            let size = BLOCK.min(n - block);
            let start = Instant::now();
            for _ in 0..size {
                crate::board::Board::post(board, q, NewJob::new(handler::NAME)).await?;
            }
            posting += start.elapsed();
            calling += trivial.time(size).await?;
            flooring += floor.time_posts(size).await?;
        }
        Ok((posting, calling, flooring))
    })
    .await?;
    f.enqueue_one_per_s = n as f64 / posting.as_secs_f64();
    f.enqueue_one_round_trip_per_s = n as f64 / calling.as_secs_f64();
    f.enqueue_one_floor_post_per_s = n as f64 / flooring.as_secs_f64();
    Ok(())
}

/// Runs every measurement and returns the figures.
pub async fn run(board: &RedisBoard, opts: &BenchOptions, progress: &dyn Fn(&str)) -> Result<Figures> {
    let mut f = Figures::new(opts);
    progress("redis' own limit (EVALSHA of a trivial script and of the claim script)");
    f.limits = limits::redis_limits(board).await?;
    progress("enqueue: one by one, from concurrent tasks, pipelined");
    let q = limits::scratch_queue("enqueue");
    let n = opts.jobs.min(20_000);
    enqueue_one(board, &q, n, &mut f).await?;
    limits::drop_queue(board, &q).await?;
    enqueue_concurrent(board, &q, n, opts.concurrency, &mut f).await?;
    limits::drop_queue(board, &q).await?;
    let took = post_noops(board, &q, opts.jobs).await?;
    f.enqueue_bulk_per_s = opts.jobs as f64 / took.as_secs_f64();
    limits::drop_queue(board, &q).await?;
    progress("drain through the real supervisor, pickup latency, memory");
    drain::measure(board, opts, &mut f, progress).await?;
    if opts.claim_cost {
        progress("claim cost with 100 and 100,000 jobs queued");
        f.claim_cost = Some(claim_cost(board, &[100, 100_000], 2000).await?);
    }
    Ok(f)
}
