//! The scripted test handler: does what its arguments say (succeed, fail,
//! panic, sleep, spin without yielding, abort its process) and records
//! what it saw in Redis, so end-to-end tests can drive the real binary.

use std::time::{Duration, Instant};

use jobworker::{HandlerError, JobContext};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

/// What the scripted handler does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Succeed.
    Ok,
    /// Fail with an error (retry after the worker's backoff).
    Retry,
    /// Fail fatally (trash at once).
    Fatal,
    /// Panic.
    Panic,
    /// Sleep `millis` (stops early when cancelled), then succeed.
    Sleep,
    /// Burn CPU for `millis` without ever yielding, then succeed.
    Spin,
    /// Abort the whole worker process (SIGABRT).
    Abort,
    /// End the whole worker process with exit status 0 (as a handler
    /// calling `std::process::exit(0)` would).
    Exit,
}

/// Arguments of [`scripted`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Script {
    /// What to do.
    pub action: Action,
    /// Duration for `sleep` and `spin`.
    #[serde(default)]
    pub millis: u64,
    /// Succeed instead once the attempt number is above this (0: never).
    #[serde(default)]
    pub until_attempt: u32,
    /// Redis hash counting runs per job id (`HINCRBY key <id> 1` at start).
    #[serde(default)]
    pub count_key: Option<String>,
    /// Redis hash recording, per job id, `pid|sandbox|entries at start`.
    #[serde(default)]
    pub sandbox_key: Option<String>,
    /// On success, post the same script (without this field) to this queue
    /// as the pipeline's next step (`JobContext::complete_into`).
    #[serde(default)]
    pub next_queue: Option<String>,
    /// A file that gets a line `start <id>` when the job starts and
    /// `done <id>` when it succeeds (any board; appends are atomic).
    #[serde(default)]
    pub log_file: Option<String>,
}

/// Appends one line to `path`.
fn log_line(path: &str, line: String) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(format!("{line}\n").as_bytes())
}

async fn record(cx: &JobContext, s: &Script) -> Result<(), HandlerError> {
    if let Some(path) = &s.log_file {
        log_line(path, format!("start {}", cx.id()))?;
    }
    if s.count_key.is_none() && s.sandbox_key.is_none() {
        return Ok(());
    }
    let board = cx
        .board()
        .as_redis()
        .ok_or_else(|| HandlerError::fatal("the scripted handler needs a Redis board"))?;
    let mut con = board.connection();
    let id = cx.id().as_str();
    if let Some(key) = &s.count_key {
        let _: i64 = con.hincr(key, id, 1).await?;
    }
    if let Some(key) = &s.sandbox_key {
        let entries = std::fs::read_dir(cx.sandbox())?.count();
        let seen = format!("{}|{}|{entries}", std::process::id(), cx.sandbox().display());
        let _: () = con.hset(key, id, seen).await?;
        std::fs::write(cx.sandbox().join(format!("left-by-{id}")), b"leftover")?;
    }
    Ok(())
}

/// Runs a [`Script`].
#[jobworker::handler(name = "scripted")]
pub async fn scripted(cx: JobContext, s: Script) -> Result<(), HandlerError> {
    record(&cx, &s).await?;
    if let Some(queue) = &s.next_queue {
        let next = Script {
            next_queue: None,
            ..s.clone()
        };
        cx.complete_into(queue, jobworker::NewJob::new("scripted").args(&next)?);
    }
    if s.until_attempt > 0 && cx.attempt() > s.until_attempt {
        return Ok(());
    }
    let result = run(&cx, &s).await;
    if let (Ok(()), Some(path)) = (&result, &s.log_file) {
        log_line(path, format!("done {}", cx.id()))?;
    }
    result
}

async fn run(cx: &JobContext, s: &Script) -> Result<(), HandlerError> {
    match s.action {
        Action::Ok => Ok(()),
        Action::Retry => Err(HandlerError::retry_msg(format!(
            "scripted failure on attempt {}",
            cx.attempt()
        ))),
        Action::Fatal => Err(HandlerError::fatal("scripted fatal error")),
        Action::Panic => panic!("scripted panic on attempt {}", cx.attempt()),
        Action::Sleep => {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(s.millis)) => Ok(()),
                _ = cx.cancelled() => Err(HandlerError::retry_msg("cancelled")),
            }
        }
        Action::Spin => {
            let end = Instant::now() + Duration::from_millis(s.millis);
            let mut x = 1u64;
            while Instant::now() < end {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            std::hint::black_box(x);
            Ok(())
        }
        Action::Abort => std::process::abort(),
        Action::Exit => std::process::exit(0),
    }
}
