//! Claim cost against queue depth: claiming from a queue holding 100,000
//! ready jobs should cost about the same as from one holding 100 (the
//! ready index is a sorted set: O(log n)). The same measurement is part of
//! `jobworker bench`; this runs it alone.
//!
//! Run: `cargo bench -p jobworker-tests --bench claim_cost`.

use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::RedisBoard;

#[tokio::main]
async fn main() {
    let server = RedisServer::start(ServerOptions::default()).expect("start redis-server");
    let board = RedisBoard::connect(&server.url()).await.expect("connect");
    let costs = jobworker::bench::claim_cost(&board, &[100, 100_000], 3000)
        .await
        .expect("measure");
    println!(
        "{:>9}  {:>14}  {:>14}  {:>26}",
        "depth", "claim p50 µs", "claim p99 µs", "redis time µs / cycle"
    );
    for c in &costs {
        println!(
            "{:>9}  {:>14.1}  {:>14.1}  {:>26.2}",
            c.depth, c.p50_us, c.p99_us, c.redis_us_per_cycle
        );
    }
    let (small, big) = (&costs[0], &costs[1]);
    println!(
        "ratio 100,000 / 100: claim p50 {:.2}×, redis time {:.2}×",
        big.p50_us / small.p50_us,
        big.redis_us_per_cycle / small.redis_us_per_cycle
    );
}
