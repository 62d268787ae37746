//! Helpers shared by the tests of the `jobworker` binary: the supervisor
//! and its forked workers against the shared Redis, one test at a time,
//! the scripted handler's records, and the operator commands ([`Cli`]).
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Display};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, MutexGuard};

use jobworker::redis::RedisBoard;
use jobworker::{Board, JobId, JobState, NewJob};
use jobworker_examples::scripted::{Action, Script};
use jobworker_tests::{shared_redis, unique_queue, wait_until};
use redis::AsyncCommands;

pub mod cli;
pub mod runs;
pub mod web;
pub mod zookeeper;

/// These tests start several processes each; run them one at a time so
/// that timing bounds measure jobworker, not a crowded machine.
static SERIAL: Mutex<()> = Mutex::const_new(());

pub async fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().await
}

/// A running `jobworker` supervisor.
pub struct Supervisor {
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
    pub workdir: PathBuf,
}

impl Supervisor {
    pub fn start(queues: &str, args: &[&str]) -> Supervisor {
        Self::start_in(queues, args, None)
    }

    /// Starts with its own work directory, or `workdir` when given.
    pub fn start_in(queues: &str, args: &[&str], workdir: Option<PathBuf>) -> Supervisor {
        Self::start_on(&["--redis", shared_redis().url()], queues, args, workdir)
    }

    /// Starts on the board given by `board` (e.g. `["--zookeeper", …]`).
    pub fn start_on(board: &[&str], queues: &str, args: &[&str], workdir: Option<PathBuf>) -> Supervisor {
        Self::start_with_env(board, queues, args, workdir, &[])
    }

    /// [`Supervisor::start_on`] with extra environment variables.
    pub fn start_with_env(
        board: &[&str],
        queues: &str,
        args: &[&str],
        workdir: Option<PathBuf>,
        env: &[(&str, &str)],
    ) -> Supervisor {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("jobworker.log");
        let workdir = workdir.unwrap_or_else(|| dir.path().join("work"));
        std::fs::create_dir_all(&workdir).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_jobworker"))
            .args(board)
            .args(["--queues", queues, "--workdir", workdir.to_str().unwrap()])
            .args(args)
            .env("RUST_LOG", "info")
            .env_remove("JOBWORKER_REDIS_URL")
            .env_remove("JOBWORKER_ZOOKEEPER")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start jobworker");
        Supervisor {
            child,
            log,
            _dir: dir,
            workdir,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: sending a signal to our own child process by its pid.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0, "kill {sig}");
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `what`, followed by the supervisor's log when displayed: the message
    /// of a wait, which shows it only when it times out.
    pub fn and_log<'a>(&'a self, what: &'a str) -> impl Display + 'a {
        struct AndLog<'a>(&'a Supervisor, &'a str);
        impl Display for AndLog<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}; log:\n{}", self.1, self.0.log())
            }
        }
        AndLog(self, what)
    }

    /// The pids of its live workers (its children but the ZooKeeper agent).
    pub fn worker_pids(&self) -> Vec<i32> {
        let path = format!("/proc/{}/task/{}/children", self.pid(), self.pid());
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .filter(|p| !jobworker_tests::is_zookeeper_agent(*p as u32))
            .collect()
    }

    /// The pid of its ZooKeeper agent, when it runs one.
    pub fn agent_pid(&self) -> Option<i32> {
        let path = format!("/proc/{}/task/{}/children", self.pid(), self.pid());
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .find(|p| jobworker_tests::is_zookeeper_agent(*p as u32))
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Stops the supervisor with SIGTERM and asserts it exits 0 within
    /// `timeout` (its log in the message otherwise).
    pub fn stop_cleanly(&mut self, timeout: Duration) {
        self.signal(libc::SIGTERM);
        let status = self.wait_exit(timeout);
        assert_eq!(status.code(), Some(0), "{}", self.log());
    }

    /// Waits for the supervisor to exit; panics with its log on timeout.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let end = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < end,
                "jobworker did not exit within {timeout:?}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        if self.alive() {
            self.signal(libc::SIGQUIT);
            let end = Instant::now() + Duration::from_secs(10);
            while self.alive() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub async fn board() -> RedisBoard {
    RedisBoard::connect(shared_redis().url()).await.unwrap()
}

/// The start of most tests: the serial guard, a board, a fresh queue and
/// the Redis hash the scripted handler counts runs in.
pub async fn setup(prefix: &str) -> (MutexGuard<'static, ()>, RedisBoard, String, String) {
    let guard = serial().await;
    let q = unique_queue(prefix);
    let key = format!("runs:{q}");
    (guard, board().await, q, key)
}

pub fn script(action: Action, millis: u64, count_key: &str) -> Script {
    Script {
        action,
        millis,
        until_attempt: 0,
        count_key: Some(count_key.to_owned()),
        sandbox_key: None,
        thread_key: None,
        next_queue: None,
        log_file: None,
    }
}

pub async fn post(board: &RedisBoard, q: &str, s: &Script, max_attempts: u32) -> JobId {
    post_to(board, q, "scripted", s, max_attempts).await
}

/// Posts `n` copies of `job` in one call; their ids.
pub async fn post_copies(board: &impl Board, q: &str, job: NewJob, n: usize) -> Vec<JobId> {
    let posted = board.post_many(q, &vec![job; n]).await.unwrap();
    posted.into_iter().map(Result::unwrap).collect()
}

/// Posts a job of the scripted handler named `handler` (`scripted` or
/// `scripted-on-loop`).
pub async fn post_to(board: &RedisBoard, q: &str, handler: &str, s: &Script, max_attempts: u32) -> JobId {
    board
        .post(
            q,
            NewJob::new(handler).args(s).unwrap().max_attempts(max_attempts),
        )
        .await
        .unwrap()
}

/// Registers `who` for a hand-off on `q` as its empty claim would (until
/// far off, leases of 30 s): as if it had registered just then.
pub async fn register_for_handoff(board: &RedisBoard, q: &str, who: &str) {
    let mut con = board.connection();
    let _: () = con
        .hset(board.keys(q).unwrap().idle(), who, "99999999999999 30000 0")
        .await
        .unwrap();
}

pub async fn runs(board: &RedisBoard, key: &str) -> HashMap<String, i64> {
    hash_of(board, key).await
}

/// The Redis hash at `key`, field by field (what the scripted handler
/// records).
pub async fn hash_of<V: redis::FromRedisValue>(board: &RedisBoard, key: &str) -> HashMap<String, V> {
    board.connection().hgetall(key).await.unwrap()
}

pub async fn state(board: &RedisBoard, q: &str, id: &JobId) -> JobState {
    board.state(q, id).await.unwrap()
}

/// Waits until job `id` reaches state `want` (at most `secs` seconds).
pub async fn wait_state(board: &RedisBoard, q: &str, id: &JobId, want: JobState, secs: u64) {
    let what = format!("job {id} to be {want}");
    wait_until(&what, Duration::from_secs(secs), || async {
        state(board, q, id).await == want
    })
    .await;
}

/// The worker pid in an owner string `host:supervisor:w<slot>:<pid>`.
pub fn worker_pid(owner: &str) -> i32 {
    owner
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("owner {owner:?}"))
}

/// Claims up to `max` jobs of `q` as a test owner and returns their ids,
/// asserting that each is at its first attempt: jobs a worker gave back
/// were not counted.
pub async fn claim_uncounted(board: &RedisBoard, q: &str, max: usize) -> HashSet<JobId> {
    let claimed = board
        .claim(&[q], "test", Duration::from_secs(60), max)
        .await
        .unwrap();
    claimed
        .into_iter()
        .map(|c| {
            assert_eq!(c.attempt, 1, "a job given back was counted as an attempt");
            c.lease.job().clone()
        })
        .collect()
}
