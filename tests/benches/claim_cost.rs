//! Claim cost against queue depth: claiming from a queue holding 100,000
//! ready jobs should cost about the same as from one holding 100 (the
//! ready index is a sorted set: O(log n)).
//!
//! Run: `cargo bench -p jobworker-tests --bench claim_cost`. Prints, for
//! each depth, the client-side claim latency (median, p99) and the Redis
//! CPU per claim + release cycle (INFO commandstats), then the ratios.

use std::time::{Duration, Instant};

use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::RedisBoard;
use jobworker::{Abandon, Board, NewJob};

const CYCLES: usize = 3000;
const POSTERS: usize = 16;

struct Figures {
    p50_us: f64,
    p99_us: f64,
    redis_us_per_cycle: f64,
}

async fn fill(board: &RedisBoard, q: &str, n: usize) {
    let mut tasks = Vec::new();
    for p in 0..POSTERS {
        let (board, q) = (board.clone(), q.to_owned());
        tasks.push(tokio::spawn(async move {
            for _ in (p..n).step_by(POSTERS) {
                board.post(&q, NewJob::new("noop")).await.expect("post");
            }
        }));
    }
    for t in tasks {
        t.await.expect("poster");
    }
}

async fn evalsha_usec(board: &RedisBoard) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut board.connection())
        .await
        .expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("usec=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

async fn measure(board: &RedisBoard, depth: usize) -> Figures {
    let q = format!("depth-{depth}");
    fill(board, &q, depth).await;
    assert_eq!(board.job_count(&q).await.expect("count"), depth);
    let mut lat = Vec::with_capacity(CYCLES);
    let before = evalsha_usec(board).await;
    for _ in 0..CYCLES {
        let t = Instant::now();
        let c = board
            .claim(&[&q], "bench", Duration::from_secs(60), 1)
            .await
            .expect("claim")
            .remove(0);
        lat.push(t.elapsed());
        board.abandon(&c.lease, Abandon::Release).await.expect("release");
    }
    let after = evalsha_usec(board).await;
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 - 1.0) * p) as usize].as_secs_f64() * 1e6;
    Figures {
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        redis_us_per_cycle: (after - before) / CYCLES as f64,
    }
}

#[tokio::main]
async fn main() {
    let server = RedisServer::start(ServerOptions::default()).expect("start redis-server");
    let board = RedisBoard::connect(&server.url()).await.expect("connect");
    println!(
        "claim cost vs queue depth ({CYCLES} claim + release cycles each, redis-server pid {})",
        server.pid()
    );
    println!(
        "{:>9}  {:>14}  {:>14}  {:>26}",
        "depth", "claim p50 µs", "claim p99 µs", "redis CPU µs / cycle"
    );
    let mut rows = Vec::new();
    for depth in [100, 100_000] {
        let f = measure(&board, depth).await;
        println!(
            "{depth:>9}  {:>14.1}  {:>14.1}  {:>26.2}",
            f.p50_us, f.p99_us, f.redis_us_per_cycle
        );
        rows.push(f);
    }
    let (small, big) = (&rows[0], &rows[1]);
    println!(
        "ratio 100,000 / 100: claim p50 {:.2}×, redis CPU {:.2}×",
        big.p50_us / small.p50_us,
        big.redis_us_per_cycle / small.redis_us_per_cycle
    );
}
