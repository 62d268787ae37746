//! What a chaos run does: the backend, the jobs, the supervisor's flags and
//! the faults, with defaults and validation.

use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

/// Default number of jobs.
pub const DEFAULT_JOBS: usize = 2_000;
/// Default `--workers` of the supervisor.
pub const DEFAULT_WORKERS: usize = 2;
/// Default `--concurrency` of each worker.
pub const DEFAULT_CONCURRENCY: usize = 4;
/// Default lease length (`--expiry`): short, so that the leases of a killed
/// supervisor tree run out quickly.
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(3);
/// Default pause between two worker kills: a random time in this range.
pub const DEFAULT_KILL_EVERY_MS: RangeInclusive<u64> = 100..=300;
/// Default time one job's handler sleeps: a random time in this range.
pub const DEFAULT_JOB_MS: RangeInclusive<u64> = 5..=30;
/// Jobs cancelled during a run by default: this share of the jobs …
pub const CANCEL_SHARE: f64 = 0.01;
/// … and at least this many (at most half the jobs).
pub const MIN_CANCELS: usize = 10;
/// Time the handler of a job to cancel while it runs sleeps: far longer
/// than a `jobworker cancel` takes to land, so that its run is still in
/// flight when the cancel comes (the other jobs end in 5–30 ms, before
/// any CLI call could reach them).
pub const SLOW_JOB_MS: RangeInclusive<u64> = 2_000..=4_000;
/// Tries every job is posted with: high enough that the attempts counted
/// by kills and expired leases never trash a job.
pub const JOB_MAX_ATTEMPTS: u32 = 1_000;
/// How long the SIGSTOP outlasts the lease (or, on ZooKeeper, the session).
pub const FREEZE_MARGIN: Duration = Duration::from_millis(1_500);
/// How long the queue stays paused.
pub const PAUSE_FOR: Duration = Duration::from_secs(2);
/// How long the board server stays down between its kill and its restart.
pub const SERVER_DOWN: Duration = Duration::from_millis(500);
/// `--grace` of the supervisor (a drain at the end, or after a crash loop).
pub const SUPERVISOR_GRACE: Duration = Duration::from_secs(5);
/// Default longest wait, after the faults, for the board to settle.
pub const DEFAULT_SETTLE_TIMEOUT: Duration = Duration::from_secs(300);

/// Which board the run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A private `redis-server` with AOF.
    Redis,
    /// A private ZooKeeper server.
    ZooKeeper,
}

impl Backend {
    /// The backend's name, for the report.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Redis => "Redis",
            Backend::ZooKeeper => "ZooKeeper",
        }
    }
}

/// Redis' `appendfsync` for the run's server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appendfsync {
    /// fsync the AOF before replying: a write Redis acknowledged survives
    /// a kill -9 and a power loss. Any lost job is jobworker's fault.
    Always,
    /// fsync once a second: a kill -9 of the process keeps what was
    /// written to the kernel, which is nearly always everything
    /// acknowledged, but Redis may postpone a write while an fsync is slow,
    /// and a power loss drops up to a second.
    Everysec,
}

impl Appendfsync {
    /// The value given to `--appendfsync`.
    pub fn as_str(self) -> &'static str {
        match self {
            Appendfsync::Always => "always",
            Appendfsync::Everysec => "everysec",
        }
    }
}

/// A chaos run.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// Jobs posted (all before the supervisor starts).
    pub jobs: usize,
    /// The board.
    pub backend: Backend,
    /// The `jobworker` binary to run (it must link the scripted handler,
    /// as `worker-bin`'s does).
    pub jobworker: PathBuf,
    /// `--workers`.
    pub workers: usize,
    /// `--concurrency`.
    pub concurrency: usize,
    /// `--expiry`: the lease length.
    pub expiry: Duration,
    /// Seed of every random choice (job lengths, kill times, victims, jobs
    /// to cancel).
    pub seed: u64,
    /// Pause between two worker kills (milliseconds, inclusive).
    pub kill_every_ms: RangeInclusive<u64>,
    /// Time one job's handler sleeps (milliseconds, inclusive).
    pub job_ms: RangeInclusive<u64>,
    /// Jobs cancelled with `jobworker cancel` while the run goes on (see
    /// [`cancels`](crate::chaos::cancels); 0: none).
    pub cancels: usize,
    /// Redis' `appendfsync`.
    pub appendfsync: Appendfsync,
    /// Longest wait, after the faults, for every job to be settled.
    pub settle_timeout: Duration,
    /// Where the run's files go (server data, logs, run log); `None`: a
    /// temp dir, removed after a run that passed.
    pub dir: Option<PathBuf>,
}

impl ChaosConfig {
    /// Defaults for `jobs` jobs on `backend` with the `jobworker` binary at
    /// `jobworker`; the seed comes from the clock.
    pub fn new(jobs: usize, backend: Backend, jobworker: impl Into<PathBuf>) -> ChaosConfig {
        ChaosConfig {
            jobs,
            backend,
            jobworker: jobworker.into(),
            workers: DEFAULT_WORKERS,
            concurrency: DEFAULT_CONCURRENCY,
            expiry: DEFAULT_EXPIRY,
            seed: clock_seed(),
            kill_every_ms: DEFAULT_KILL_EVERY_MS,
            job_ms: DEFAULT_JOB_MS,
            cancels: default_cancels(jobs),
            appendfsync: Appendfsync::Always,
            settle_timeout: DEFAULT_SETTLE_TIMEOUT,
            dir: None,
        }
    }

    /// Checks the values; the message says which is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.jobs == 0 {
            return Err("--jobs must be at least 1".into());
        }
        if self.workers < 2 {
            return Err("--workers must be at least 2 (one is frozen while the others go on)".into());
        }
        if self.concurrency < 2 {
            return Err(
                "--concurrency must be at least 2 (only workers running two jobs or more are killed)".into(),
            );
        }
        if self.expiry < Duration::from_millis(300) {
            return Err("--expiry must be at least 0.3 seconds".into());
        }
        if self.kill_every_ms.is_empty() || *self.kill_every_ms.start() == 0 {
            return Err("the kill interval must be a non-empty range above 0 ms".into());
        }
        if self.job_ms.is_empty() {
            return Err("the job length must be a non-empty range".into());
        }
        if self.cancels > self.jobs / 2 {
            return Err("--cancels must be at most half the jobs (the rest must complete)".into());
        }
        if !self.jobworker.is_file() {
            return Err(format!(
                "the jobworker binary {} does not exist (build it with `cargo build -p jobworker-cli`)",
                self.jobworker.display()
            ));
        }
        Ok(())
    }

    /// How long a lease can be trusted without an extend: the expiry, and on
    /// ZooKeeper at most the session timeout (as the runtime computes it).
    pub fn lease_horizon(&self) -> Duration {
        match self.backend {
            Backend::Redis => self.expiry,
            Backend::ZooKeeper => self.expiry.min(zookeeper_session()),
        }
    }

    /// How long the frozen worker stays stopped: past its lease and, on
    /// ZooKeeper, past its session too (so its claims are gone for good).
    pub fn freeze_for(&self) -> Duration {
        let past = match self.backend {
            Backend::Redis => self.expiry,
            Backend::ZooKeeper => self.expiry.max(zookeeper_session()),
        };
        past + FREEZE_MARGIN
    }
}

/// Jobs cancelled in a run of `jobs` jobs by default: 1 %, at least 10,
/// at most half of them.
pub fn default_cancels(jobs: usize) -> usize {
    // Truncation intended: a share of the job count.
    let share = (CANCEL_SHARE * jobs as f64) as usize;
    share.max(MIN_CANCELS).min(jobs / 2)
}

/// The session timeout `jobworker --zookeeper` workers use.
pub fn zookeeper_session() -> Duration {
    jobworker::zookeeper::DEFAULT_SESSION_TIMEOUT
}

/// A seed from the wall clock.
fn clock_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    // Truncation intended: the low bits vary the most.
    (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_percent_of_the_jobs_are_cancelled_at_least_ten_at_most_half() {
        assert_eq!(default_cancels(20_000), 200);
        assert_eq!(default_cancels(2_000), 20);
        assert_eq!(default_cancels(500), 10);
        assert_eq!(default_cancels(12), 6);
        assert_eq!(default_cancels(1), 0);
    }
}
