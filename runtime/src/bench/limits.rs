//! Redis' own limit on this machine, server counters, claim cost against
//! queue depth, and scratch queues.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::board::Board;
use crate::error::Result;
use crate::job::{Abandon, NewJob};
use crate::redis::RedisBoard;

/// Redis' limit on this machine, measured in the same run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Limits {
    /// EVALSHA of `return 1`, one round trip each.
    pub trivial_one_per_s: f64,
    /// EVALSHA of `return 1`, pipelined by 100.
    pub trivial_pipelined_per_s: f64,
    /// Our claim script on an empty queue, one round trip each.
    pub claim_one_per_s: f64,
    /// Server time of one post + claim + consume (INFO commandstats), µs.
    pub lifecycle_cpu_us: f64,
    /// Jobs/s a single-threaded Redis could sustain at that cost.
    pub lifecycle_limit_per_s: f64,
}

/// Claim cost at one queue depth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClaimCost {
    /// Ready jobs queued.
    pub depth: usize,
    /// Median claim latency, µs.
    pub p50_us: f64,
    /// 99th percentile claim latency, µs.
    pub p99_us: f64,
    /// Server time per claim + release cycle, µs.
    pub redis_us_per_cycle: f64,
}

/// Server counters used to charge work to jobs.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ServerCounters {
    /// used_cpu_user + used_cpu_sys, µs.
    pub cpu_us: f64,
    /// total_commands_processed.
    pub commands: f64,
    /// Sum of `usec` over all commands in commandstats.
    pub command_us: f64,
    /// Script calls (EVALSHA, EVAL and FCALL) in commandstats.
    pub script_calls: f64,
    /// total_reads_processed: reads from client sockets, about one per
    /// round trip (a pipeline read at once counts once).
    pub reads: f64,
}

fn info_field(info: &str, key: &str) -> f64 {
    info.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':')?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Reads the server's counters.
pub(crate) async fn counters(board: &RedisBoard) -> Result<ServerCounters> {
    let info: String = board.conn.query(redis::cmd("INFO").arg("all")).await?;
    let command_us = info
        .lines()
        .filter(|l| l.starts_with("cmdstat_"))
        .filter_map(|l| {
            l.split(',')
                .find_map(|f| f.split(':').nth(1).unwrap_or(f).strip_prefix("usec="))
        })
        .filter_map(|v| v.parse::<f64>().ok())
        .sum();
    let calls = |cmd: &str| -> f64 {
        info.lines()
            .find_map(|l| {
                l.strip_prefix(cmd)?
                    .strip_prefix(":calls=")?
                    .split(',')
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or(0.0)
    };
    Ok(ServerCounters {
        cpu_us: (info_field(&info, "used_cpu_user") + info_field(&info, "used_cpu_sys")) * 1e6,
        commands: info_field(&info, "total_commands_processed"),
        command_us,
        script_calls: calls("cmdstat_evalsha") + calls("cmdstat_eval") + calls("cmdstat_fcall"),
        reads: info_field(&info, "total_reads_processed"),
    })
}

/// A queue name for one measurement.
pub(crate) fn scratch_queue(what: &str) -> String {
    format!("jobworker-bench-{what}-{}", std::process::id())
}

/// Deletes every key of `queue`.
pub(crate) async fn drop_queue(board: &RedisBoard, queue: &str) -> Result<()> {
    let pattern = format!(
        "{}:*",
        board
            .keys(queue)?
            .namespace
            .replace('{', "\\{")
            .replace('}', "\\}")
    );
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = board
            .conn
            .query(
                redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000),
            )
            .await?;
        if !keys.is_empty() {
            board.conn.query::<()>(redis::cmd("UNLINK").arg(&keys)).await?;
        }
        cursor = next;
        if cursor == 0 {
            return Ok(());
        }
    }
}

/// Runs `work` on scratch queue `queue`, then deletes the queue's keys
/// whatever happened; the first error wins.
pub(crate) async fn dropping<T>(
    board: &RedisBoard,
    queue: &str,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let done = work.await;
    let dropped = drop_queue(board, queue).await;
    let out = done?;
    dropped?;
    Ok(out)
}

/// A trivial script (`return 1`), loaded on the board's server.
pub(crate) struct Trivial<'b> {
    board: &'b RedisBoard,
    script: redis::Script,
}

impl<'b> Trivial<'b> {
    /// Loads the script on `board`'s server.
    pub(crate) async fn load(board: &'b RedisBoard) -> Result<Trivial<'b>> {
        let script = redis::Script::new("return 1");
        script
            .prepare_invoke()
            .load_async(&mut board.connection())
            .await?;
        Ok(Trivial { board, script })
    }

    /// How long `n` calls take, one round trip each.
    pub(crate) async fn time(&self, n: usize) -> Result<Duration> {
        let mut con = self.board.connection();
        let start = Instant::now();
        for _ in 0..n {
            self.script.prepare_invoke().invoke_async::<i64>(&mut con).await?;
        }
        Ok(start.elapsed())
    }
}

async fn rate_of(n: usize, start: Instant) -> f64 {
    n as f64 / start.elapsed().as_secs_f64()
}

/// Measures Redis' limit: trivial EVALSHA one by one and pipelined, the
/// claim script, and the server time of a full post + claim + consume.
pub(crate) async fn redis_limits(board: &RedisBoard) -> Result<Limits> {
    let trivial = Trivial::load(board).await?;
    let n = 5000;
    let trivial_one_per_s = n as f64 / trivial.time(n).await?.as_secs_f64();
    let mut con = board.connection();
    let mut pipe = redis::pipe();
    for _ in 0..100 {
        pipe.invoke_script(&trivial.script.prepare_invoke());
    }
    let start = Instant::now();
    for _ in 0..(n / 100) {
        pipe.query_async::<Vec<i64>>(&mut con).await?;
    }
    let trivial_pipelined_per_s = rate_of(n, start).await;
    let q = scratch_queue("limit");
    let start = Instant::now();
    for _ in 0..2000 {
        board.claim(&[&q], "bench", Duration::from_secs(60), 1).await?;
    }
    let claim_one_per_s = rate_of(2000, start).await;
    let cycles = 2000;
    let before = counters(board).await?;
    for _ in 0..cycles {
        board.post(&q, NewJob::new(super::handler::NAME)).await?;
        let c = board.claim(&[&q], "bench", Duration::from_secs(60), 1).await?;
        for c in c {
            board.consume(c.lease).await?;
        }
    }
    let after = counters(board).await?;
    drop_queue(board, &q).await?;
    // INFO itself is charged too; it is two calls against thousands.
    let lifecycle_cpu_us = (after.command_us - before.command_us) / cycles as f64;
    Ok(Limits {
        trivial_one_per_s,
        trivial_pipelined_per_s,
        claim_one_per_s,
        lifecycle_cpu_us,
        lifecycle_limit_per_s: 1e6 / lifecycle_cpu_us.max(0.001),
    })
}

/// Claim latency and server time with `depths` ready jobs queued: claim one
/// job and release it again (the depth stays the same), `cycles` times.
pub async fn claim_cost(board: &RedisBoard, depths: &[usize], cycles: usize) -> Result<Vec<ClaimCost>> {
    let mut out = Vec::new();
    for &depth in depths {
        let q = scratch_queue(&format!("depth-{depth}"));
        super::post_noops(board, &q, depth).await?;
        let mut lat = Vec::with_capacity(cycles);
        let before = counters(board).await?;
        for _ in 0..cycles {
            let t = Instant::now();
            let claimed = board.claim(&[&q], "bench", Duration::from_secs(60), 1).await?;
            lat.push(t.elapsed().as_secs_f64() * 1e6);
            for c in claimed {
                board.abandon(c.lease, Abandon::Release).await?;
            }
        }
        let after = counters(board).await?;
        drop_queue(board, &q).await?;
        let p = super::Percentiles::of(lat);
        out.push(ClaimCost {
            depth,
            p50_us: p.p50,
            p99_us: p.p99,
            redis_us_per_cycle: (after.command_us - before.command_us) / cycles as f64,
        });
    }
    Ok(out)
}
