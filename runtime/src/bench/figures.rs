//! The figures a bench run reports, as a table or one JSON line.

use serde::Serialize;

use crate::bench::limits::{ClaimCost, Limits};
use crate::bench::BenchOptions;

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl Percentiles {
    /// Percentiles of `samples` (any unit; sorted here).
    pub fn of(mut samples: Vec<f64>) -> Percentiles {
        if samples.is_empty() {
            return Percentiles::default();
        }
        samples.sort_by(f64::total_cmp);
        let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
        Percentiles {
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
        }
    }
}

/// Everything one run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Figures {
    /// Always "jobworker".
    pub system: &'static str,
    /// jobworker's version.
    pub version: &'static str,
    /// Jobs per drain run.
    pub jobs: usize,
    /// Worker processes.
    pub workers: usize,
    /// Concurrency per worker.
    pub concurrency: usize,
    /// Redis ran with AOF everysec.
    pub aof: bool,
    /// Posts per second, one round trip each.
    pub enqueue_one_per_s: f64,
    /// Calls of a trivial script per second, one round trip each, timed
    /// between the one-by-one posts: the round trip's own rate at the
    /// same moments, which those posts cannot pass.
    pub enqueue_one_round_trip_per_s: f64,
    /// Floor posts per second, one round trip each, timed between the
    /// one-by-one posts: the least a post on the taskflow layout does
    /// (`bench/floor.rs`).
    pub enqueue_one_floor_post_per_s: f64,
    /// Posts per second from `concurrency` tasks, each posting one job at
    /// a time.
    pub enqueue_concurrent_per_s: f64,
    /// Redis server CPU (user + sys) per post from concurrent tasks, µs.
    pub enqueue_concurrent_redis_us_per_job: f64,
    /// Posts per second, pipelined in chunks of 1,000.
    pub enqueue_bulk_per_s: f64,
    /// Jobs per second through the running supervisor (start-up excluded).
    pub drain_per_s: f64,
    /// Jobs per second from starting `jobworker` to the queue drained.
    pub drain_incl_startup_per_s: f64,
    /// Post → handler start with idle workers.
    pub pickup_ms: Percentiles,
    /// Floor hand-off → its subscriber, as many probes at the same pace
    /// right after ours: the least a pickup without a claim round trip
    /// takes here.
    pub pickup_floor_ms: Percentiles,
    /// Redis server CPU (user + sys) per job over bulk post + drain.
    pub redis_cpu_us_per_job: f64,
    /// Commands Redis processed per job over bulk post + drain.
    pub commands_per_job: f64,
    /// Script calls per job over bulk post + drain (a call settles or
    /// claims a batch: fewer is larger batches).
    pub script_calls_per_job: f64,
    /// Socket reads Redis made per job over bulk post + drain (about the
    /// round trips).
    pub reads_per_job: f64,
    /// Peak PSS of supervisor + workers during the drain, MiB.
    pub worker_mem_mib: f64,
    /// PSS growth from the drain's first second to its end, percent.
    pub worker_mem_growth_pct: f64,
    /// Always "pss".
    pub mem_kind: &'static str,
    /// From `jobworker` start to the first job handled, ms.
    pub first_job_ms: f64,
    /// Redis' own limit on this machine.
    pub limits: Limits,
    /// Claim cost against queue depth.
    pub claim_cost: Option<Vec<ClaimCost>>,
}

impl Figures {
    /// Empty figures for a run with `opts`.
    pub fn new(opts: &BenchOptions) -> Figures {
        Figures {
            system: "jobworker",
            version: env!("CARGO_PKG_VERSION"),
            jobs: opts.jobs,
            workers: opts.workers,
            concurrency: opts.concurrency,
            aof: opts.aof,
            mem_kind: "pss",
            ..Figures::default()
        }
    }

    /// Prints the human table.
    pub fn print_table(&self) {
        println!(
            "jobworker bench: {} no-op jobs, --workers {} --concurrency {}, redis {}",
            self.jobs,
            self.workers,
            self.concurrency,
            if self.aof {
                "with AOF everysec"
            } else {
                "without persistence"
            }
        );
        for (k, v) in self.rows() {
            println!("  {k:<26} {v}");
        }
        self.print_claim_costs();
    }

    /// The table's rows: a label and its figures.
    fn rows(&self) -> Vec<(&'static str, String)> {
        let l = &self.limits;
        let mut rows = self.enqueue_rows();
        rows.extend([
            (
                "drain (running workers)",
                format!(
                    "{:>10.0} jobs/s  = {:.2}× redis' unbatched limit",
                    self.drain_per_s,
                    self.drain_per_s / l.lifecycle_limit_per_s.max(1.0)
                ),
            ),
            (
                "drain (incl. start-up)",
                format!("{:>10.0} jobs/s", self.drain_incl_startup_per_s),
            ),
            (
                "pickup latency, idle",
                format!(
                    "p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
                    self.pickup_ms.p50, self.pickup_ms.p90, self.pickup_ms.p99
                ),
            ),
            (
                "  the floor's hand-off",
                format!(
                    "p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
                    self.pickup_floor_ms.p50, self.pickup_floor_ms.p90, self.pickup_floor_ms.p99
                ),
            ),
            (
                "redis CPU per job",
                format!("{:>10.1} µs", self.redis_cpu_us_per_job),
            ),
            (
                "redis commands per job",
                format!("{:>10.2}", self.commands_per_job),
            ),
            (
                "script calls per job",
                format!("{:>10.3}", self.script_calls_per_job),
            ),
            ("socket reads per job", format!("{:>10.3}", self.reads_per_job)),
            (
                "supervisor + workers",
                format!(
                    "{:>10.1} MiB PSS (peak), {:+.1} % over the drain",
                    self.worker_mem_mib, self.worker_mem_growth_pct
                ),
            ),
            (
                "first job handled",
                format!("{:>10.1} ms after start", self.first_job_ms),
            ),
        ]);
        rows.extend(self.limit_rows());
        rows
    }

    /// The enqueue rows: one by one (beside the trivial call and the floor
    /// post timed between the posts), from concurrent tasks, pipelined.
    fn enqueue_rows(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "enqueue, one by one",
                format!(
                    "{:>10.0} jobs/s  = {:.2}× the rate of a trivial call between them ({:.0}/s)",
                    self.enqueue_one_per_s,
                    self.enqueue_one_per_s / self.enqueue_one_round_trip_per_s.max(1.0),
                    self.enqueue_one_round_trip_per_s
                ),
            ),
            (
                "  the floor's post",
                format!(
                    "{:>10.0} jobs/s  = {:.2}× that trivial call; ours = {:.2}× the floor",
                    self.enqueue_one_floor_post_per_s,
                    self.enqueue_one_floor_post_per_s / self.enqueue_one_round_trip_per_s.max(1.0),
                    self.enqueue_one_per_s / self.enqueue_one_floor_post_per_s.max(1.0)
                ),
            ),
            (
                "enqueue, concurrent tasks",
                format!(
                    "{:>10.0} jobs/s  ({} tasks, {:.1} µs redis CPU per post)",
                    self.enqueue_concurrent_per_s, self.concurrency, self.enqueue_concurrent_redis_us_per_job
                ),
            ),
            (
                "enqueue, pipelined",
                format!("{:>10.0} jobs/s", self.enqueue_bulk_per_s),
            ),
        ]
    }

    /// The rows of Redis' own limit, measured in the same run.
    fn limit_rows(&self) -> Vec<(&'static str, String)> {
        let l = &self.limits;
        vec![
            (
                "redis: trivial EVALSHA",
                format!(
                    "{:>10.0} calls/s one by one, {:.0} pipelined",
                    l.trivial_one_per_s, l.trivial_pipelined_per_s
                ),
            ),
            (
                "redis: claim script",
                format!("{:>10.0} calls/s one by one (empty queue)", l.claim_one_per_s),
            ),
            (
                "redis: unbatched limit",
                format!(
                    "{:>10.0} jobs/s (one post + claim + consume each, 1 / {:.1} µs of server time)",
                    l.lifecycle_limit_per_s, l.lifecycle_cpu_us
                ),
            ),
        ]
    }

    /// The claim cost lines (claims on a short and a deep queue), when measured.
    fn print_claim_costs(&self) {
        if let Some(costs) = &self.claim_cost {
            for c in costs {
                println!(
                    "  claim with {:>7} queued   p50 {:.1} µs, p99 {:.1} µs, redis CPU {:.1} µs per claim + release",
                    c.depth, c.p50_us, c.p99_us, c.redis_us_per_cycle
                );
            }
            if let [small, big, ..] = costs.as_slice() {
                println!(
                    "  claim cost ratio {} / {}: {:.2}× latency, {:.2}× redis CPU",
                    big.depth,
                    small.depth,
                    big.p50_us / small.p50_us,
                    big.redis_us_per_cycle / small.redis_us_per_cycle
                );
            }
        }
    }
}
