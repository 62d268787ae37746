//! Checks the test support itself: the shared redis-server, unique names,
//! waiting, the fixtures and the taskflow virtualenv.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jobworker_tests::{fixtures_dir, run_python, run_python_async, shared_redis, unique_queue, wait_until};

/// True while a process with `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the ")" that closes the command name.
        Ok(stat) => !matches!(stat.rsplit(')').next().map(str::trim_start), Some(s) if s.starts_with('Z')),
        Err(_) => false,
    }
}

#[tokio::test]
async fn shared_redis_answers_ping() -> redis::RedisResult<()> {
    let redis = shared_redis();
    assert!(redis.url().starts_with("redis://127.0.0.1:"), "{}", redis.url());
    let client = redis::Client::open(redis.url())?;
    let mut con = client.get_multiplexed_async_connection().await?;
    let pong: String = redis::cmd("PING").query_async(&mut con).await?;
    assert_eq!(pong, "PONG");

    let info: String = redis::cmd("INFO").arg("server").query_async(&mut con).await?;
    assert!(
        info.contains(&format!("process_id:{}", redis.pid())),
        "shared redis url and pid disagree"
    );
    assert!(std::ptr::eq(redis, shared_redis()), "one server per binary");
    Ok(())
}

#[test]
fn shared_redis_outlives_the_thread_that_first_asked() {
    let pid = std::thread::spawn(|| shared_redis().pid()).join().unwrap();
    assert_eq!(pid, shared_redis().pid());
    // Its parent-death signal would fire within milliseconds of a thread exit
    // (kept: watching it live through that time is the test).
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        assert!(alive(pid), "shared redis-server {pid} died with a test thread");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn unique_queue_gives_different_names() {
    let names: HashSet<String> = (0..1000).map(|_| unique_queue("selftest")).collect();
    assert_eq!(names.len(), 1000);
    for name in &names {
        let suffix = name.strip_prefix("selftest-").expect("prefix kept");
        assert!(
            !suffix.is_empty() && suffix.chars().all(|c| c.is_ascii_hexdigit()),
            "{name}"
        );
    }
}

#[tokio::test]
async fn wait_until_returns_when_the_condition_holds() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    wait_until("third call", Duration::from_secs(5), move || {
        let counter = counter.clone();
        async move { counter.fetch_add(1, Ordering::SeqCst) + 1 >= 3 }
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
#[should_panic(expected = "timed out after 50ms: never")]
async fn wait_until_panics_at_the_deadline() {
    wait_until("never", Duration::from_millis(50), || async { false }).await;
}

#[test]
fn fixtures_are_found() {
    let dir = fixtures_dir();
    assert!(dir.join("redis_golden.json").is_file(), "{}", dir.display());
}

const TASKFLOW_PROBE: &str = r#"
import json, sys
import importlib.metadata as m
import taskflow
from taskflow.jobs.backends import impl_redis
print("noise before the result line")
print(json.dumps({"taskflow": m.version("taskflow"), "board": impl_redis.RedisJobBoard.__name__, "argv": sys.argv[1:]}))
"#;

#[test]
fn run_python_imports_taskflow() {
    let out = run_python(TASKFLOW_PROBE, &["a", "b c"]);
    let json = out.json();
    assert_eq!(json["taskflow"], "6.5.0", "{json}");
    assert_eq!(json["board"], "RedisJobBoard");
    assert_eq!(json["argv"], serde_json::json!(["a", "b c"]));
}

#[tokio::test]
async fn run_python_async_reports_failures() {
    let out = run_python_async("import sys\nprint('partial')\nsys.exit(3)\n", &[]).await;
    assert!(!out.success());
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(out.stdout.trim(), "partial");
    let err = std::panic::catch_unwind(|| out.json()).expect_err("json() of a failed script");
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("--- stdout ---\npartial"), "{msg}");
}
