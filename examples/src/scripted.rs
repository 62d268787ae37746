//! The scripted test handler: does what its arguments say (succeed, fail,
//! panic, sleep, spin without yielding, abort its process) and records
//! what it saw in Redis, or in a run log on any board ([`run_log`]), so
//! end-to-end tests and the chaos tool can drive the real binary.

pub mod run_log;

use std::time::{Duration, Instant};

use jobworker::{HandlerError, JobContext};
use redis::AsyncCommands;
use run_log::{RunOutcome, RunRecorder};
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
    /// Redis hash recording, per job id, the name of the thread the
    /// handler's first step ran on (`jobworker-handler` on the handler
    /// runtime).
    #[serde(default)]
    pub thread_key: Option<String>,
    /// On success, post the same script (without this field) to this queue
    /// as the pipeline's next step (`JobContext::complete_into`).
    #[serde(default)]
    pub next_queue: Option<String>,
    /// A run log (any board): a `start` line when a run starts and an
    /// `end` line when it ends, with the job id, pid, fencing token, time
    /// and outcome (see [`run_log`]).
    #[serde(default)]
    pub log_file: Option<String>,
}

/// The name of the thread this runs on ("" when it has none).
fn thread_name() -> String {
    std::thread::current().name().unwrap_or_default().to_owned()
}

/// Records what `s` asks for; `started_on` is the thread the handler's
/// first step ran on.
async fn record(cx: &JobContext, s: &Script, started_on: &str) -> Result<(), HandlerError> {
    if s.count_key.is_none() && s.sandbox_key.is_none() && s.thread_key.is_none() {
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
    if let Some(key) = &s.thread_key {
        let _: () = con.hset(key, id, started_on).await?;
    }
    Ok(())
}

/// Runs a [`Script`].
#[jobworker::handler(name = "scripted")]
pub async fn scripted(cx: JobContext, s: Script) -> Result<(), HandlerError> {
    let started_on = thread_name();
    logged(&cx, &s, script(&cx, &s, &started_on)).await
}

/// [`scripted`]'s action and records, in the other order, with its first
/// step on the worker loop's thread: a `Spin` or a `Panic` happens there,
/// before anything waits (after the run log's `start` line, written
/// without waiting); a `Sleep` moves the rest to the handler runtime.
#[jobworker::handler(name = "scripted-on-loop", start_on_loop = true)]
pub async fn scripted_on_loop(cx: JobContext, s: Script) -> Result<(), HandlerError> {
    let started_on = thread_name();
    let work = async {
        run(&cx, &s).await?;
        record(&cx, &s, &started_on).await
    };
    logged(&cx, &s, work).await
}

/// Runs `work` between the run log's lines when `s` asks for a run log.
/// The `start` line is written before `work` is first polled; were the
/// handler stopped, the recorder, dropped with it, logs the end.
async fn logged(
    cx: &JobContext,
    s: &Script,
    work: impl std::future::Future<Output = Result<(), HandlerError>>,
) -> Result<(), HandlerError> {
    let run = match &s.log_file {
        Some(path) => Some(RunRecorder::start(path, cx)?),
        None => None,
    };
    let result = work.await;
    if let Some(run) = run {
        run.end(match result {
            Ok(()) => RunOutcome::Ok,
            Err(_) => RunOutcome::Error,
        })?;
    }
    result
}

/// What [`scripted`] does between its run-log lines.
async fn script(cx: &JobContext, s: &Script, started_on: &str) -> Result<(), HandlerError> {
    record(cx, s, started_on).await?;
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
    run(cx, s).await
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
