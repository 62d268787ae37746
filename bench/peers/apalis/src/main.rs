//! apalis peer benchmark for scripts/bench-peers; mirrors bench/peers/bullmq/bench.mjs
//! (same phases, same JSON keys).
//!   apalis-peer-bench --redis redis://127.0.0.1:PORT --jobs N --concurrency 50
//! Progress goes to stderr; the last stdout line is one JSON object.
//!
//! apalis-redis 0.7 fetches by polling: every `poll_interval` (default 100 ms)
//! the worker runs a Lua script that moves up to `buffer_size` (default 10)
//! job ids from the queue's active list into the worker's inflight set; an
//! ack (after the handler returned) moves the id to the done set. The poll
//! interval is apalis' default; the buffer is set to the worker's
//! concurrency (its default of 10 would cap a worker of 50 at 10 jobs per
//! poll, 100 jobs/s): both reported as poll_interval_ms and fetch_size. The
//! pickup latency is then about half the poll interval, which is what an
//! application with the default interval sees.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use apalis::prelude::*;
use apalis_redis::{Config, ConnectionManager, RedisStorage};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Notify;

const PICKUP_JOBS: usize = 200;
const PICKUP_GAP: Duration = Duration::from_millis(20);
const BULK_CHUNK: usize = 1000;
/// The drain fails after this long without progress.
const STALL: Duration = Duration::from_secs(60);

#[derive(Debug, Serialize, Deserialize)]
struct Noop {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    i: Option<u64>,
    /// Post time, µs since the epoch (pickup jobs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    posted: Option<u64>,
}

#[derive(Default)]
struct State {
    ran: AtomicUsize,
    drained: Notify,
    drain_target: AtomicUsize,
    pickups: Mutex<Vec<f64>>,
    picked_up: Notify,
}

fn log(msg: impl AsRef<str>) {
    eprintln!("[apalis] {}", msg.as_ref());
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

async fn handle(job: Noop, state: Data<Arc<State>>) -> Result<(), Error> {
    if let Some(posted) = job.posted {
        let ms = now_us().saturating_sub(posted) as f64 / 1000.0;
        let mut p = state.pickups.lock().unwrap();
        p.push(ms);
        if p.len() == PICKUP_JOBS {
            state.picked_up.notify_one();
        }
        return Ok(());
    }
    if state.ran.fetch_add(1, Ordering::SeqCst) + 1 == state.drain_target.load(Ordering::SeqCst) {
        state.drained.notify_one();
    }
    Ok(())
}

struct Args {
    redis: String,
    jobs: usize,
    concurrency: usize,
}

fn args() -> Args {
    let mut a = Args {
        redis: "redis://127.0.0.1:6379".into(),
        jobs: 20000,
        concurrency: 50,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let val = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--redis" => a.redis = val,
            "--jobs" => a.jobs = val.parse().expect("--jobs needs a number"),
            "--concurrency" => a.concurrency = val.parse().expect("--concurrency needs a number"),
            _ => panic!("usage: apalis-peer-bench --redis URL --jobs N --concurrency C"),
        }
    }
    assert!(
        a.jobs > 0 && a.concurrency > 0,
        "--jobs and --concurrency must be positive"
    );
    a
}

/// (used_cpu_sys + used_cpu_user in seconds, total_commands_processed)
async fn redis_counters(admin: &mut ConnectionManager) -> (f64, f64) {
    let num = |text: &str, key: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("INFO has no {key}"))
    };
    let cpu: String = redis::cmd("INFO").arg("cpu").query_async(admin).await.unwrap();
    let stats: String = redis::cmd("INFO").arg("stats").query_async(admin).await.unwrap();
    (
        num(&cpu, "used_cpu_sys") + num(&cpu, "used_cpu_user"),
        num(&stats, "total_commands_processed"),
    )
}

/// Deletes every key of the apalis queue `ns` (all are named `ns:...`).
async fn clear_queue(admin: &mut ConnectionManager, ns: &str) {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{ns}:*"))
        .query_async(admin)
        .await
        .unwrap();
    if !keys.is_empty() {
        let _: i64 = redis::cmd("DEL").arg(&keys).query_async(admin).await.unwrap();
    }
}

/// A /proc/self/smaps_rollup or /proc/self/status field in MiB.
fn proc_mib(file: &str, field: &str) -> Option<f64> {
    let text = std::fs::read_to_string(file).ok()?;
    let kb: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

fn percentiles(xs: &[f64]) -> serde_json::Value {
    if xs.is_empty() {
        return json!({"p50": null, "p90": null, "p99": null});
    }
    let mut s = xs.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| s[((q * s.len() as f64).ceil() as usize).max(1) - 1];
    let r3 = |x: f64| (x * 1000.0).round() / 1000.0;
    json!({"p50": r3(at(0.5)), "p90": r3(at(0.9)), "p99": r3(at(0.99))})
}

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[tokio::main]
async fn main() {
    let a = args();
    let n = a.jobs;
    let conn = apalis_redis::connect(a.redis.as_str())
        .await
        .expect("cannot connect to redis");
    let mut admin = conn.clone();
    let ns = format!("bench-{}-{}", std::process::id(), now_us() / 1000);
    let config = Config::default()
        .set_namespace(&ns)
        .set_buffer_size(a.concurrency);
    let poll_interval_ms = config.get_poll_interval().as_millis() as u64;
    let fetch_size = config.get_buffer_size();
    let mut storage: RedisStorage<Noop> = RedisStorage::new_with_config(conn, config);

    // 1. enqueue, one awaited push at a time.
    let t0 = Instant::now();
    for i in 0..n as u64 {
        storage
            .push(Noop {
                i: Some(i),
                posted: None,
            })
            .await
            .expect("push");
    }
    let enqueue_one = n as f64 / t0.elapsed().as_secs_f64();
    log(format!("enqueue one-by-one: {enqueue_one:.0}/s"));
    clear_queue(&mut admin, &ns).await;

    // 2. enqueue in bulk, then drain with one worker; Redis counters span both.
    // apalis-redis 0.7 has no batch push: each chunk is 1000 concurrent push()
    // calls on clones of the storage, which share one multiplexed connection,
    // so a chunk goes out as one pipeline of 1000 push_job script calls.
    let before = redis_counters(&mut admin).await;
    let t0 = Instant::now();
    for start in (0..n).step_by(BULK_CHUNK) {
        let pushes = (start..n.min(start + BULK_CHUNK)).map(|i| {
            let mut s = storage.clone();
            async move {
                s.push(Noop {
                    i: Some(i as u64),
                    posted: None,
                })
                .await
            }
        });
        futures::future::try_join_all(pushes).await.expect("bulk push");
    }
    let enqueue_bulk = n as f64 / t0.elapsed().as_secs_f64();
    log(format!("enqueue bulk: {enqueue_bulk:.0}/s"));

    let state = Arc::new(State::default());
    state.drain_target.store(n, Ordering::SeqCst);
    let done_set = storage.get_config().done_jobs_set();
    let t0 = Instant::now();
    let worker = WorkerBuilder::new(format!("{ns}-worker"))
        .concurrency(a.concurrency)
        .data(state.clone())
        .backend(storage.clone())
        .build_fn(handle)
        .on_event(|e| {
            if let Event::Error(err) = e.inner() {
                log(format!("worker error: {err}"));
            }
        });
    let runnable = worker.run();
    let handle = runnable.get_handle();
    let running = tokio::spawn(runnable);
    // All N handlers ran (gives up after STALL without progress) ...
    let drained = state.drained.notified();
    tokio::pin!(drained);
    drained.as_mut().enable();
    let (mut seen, mut since) = (0, Instant::now());
    while state.ran.load(Ordering::SeqCst) < n {
        tokio::select! {
            _ = &mut drained => break,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                let ran = state.ran.load(Ordering::SeqCst);
                if ran != seen {
                    (seen, since) = (ran, Instant::now());
                } else if since.elapsed() > STALL {
                    log(format!("drain stalled: {ran}/{n} jobs ran"));
                    std::process::exit(1);
                }
            }
        }
    }
    // ... and all N acks reached Redis (the done set), i.e. completed.
    let since = Instant::now();
    loop {
        let done: usize = redis::cmd("ZCARD")
            .arg(&done_set)
            .query_async(&mut admin)
            .await
            .unwrap();
        if done >= n {
            break;
        }
        if since.elapsed() > STALL {
            log(format!("drain stalled: {done}/{n} jobs acked"));
            std::process::exit(1);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let drain = n as f64 / t0.elapsed().as_secs_f64();
    let rss = proc_mib("/proc/self/status", "VmRSS:");
    let pss = proc_mib("/proc/self/smaps_rollup", "Pss:");
    let after = redis_counters(&mut admin).await;
    log(format!("drain: {drain:.0}/s"));

    // 3. pickup latency: worker idle, jobs posted one at a time.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let picked_up = state.picked_up.notified();
    tokio::pin!(picked_up);
    picked_up.as_mut().enable();
    for _ in 0..PICKUP_JOBS {
        storage
            .push(Noop {
                i: None,
                posted: Some(now_us()),
            })
            .await
            .expect("push");
        tokio::time::sleep(PICKUP_GAP).await;
    }
    if state.pickups.lock().unwrap().len() < PICKUP_JOBS {
        let _ = tokio::time::timeout(Duration::from_secs(10), picked_up).await;
    }
    let pickups = state.pickups.lock().unwrap().clone();
    if pickups.len() < PICKUP_JOBS {
        log(format!("only {}/{PICKUP_JOBS} pickup jobs ran", pickups.len()));
    }

    handle.stop();
    let _ = tokio::time::timeout(Duration::from_secs(5), running).await;
    clear_queue(&mut admin, &ns).await;

    let result = json!({
        "system": "apalis",
        "version": env!("APALIS_VERSION"),
        "jobs": n,
        "concurrency": a.concurrency,
        "workers": 1,
        "enqueue_one_per_s": r1(enqueue_one),
        "enqueue_bulk_per_s": r1(enqueue_bulk),
        "drain_per_s": r1(drain),
        "pickup_ms": percentiles(&pickups),
        "redis_cpu_us_per_job": r1((after.0 - before.0) * 1e6 / n as f64),
        "commands_per_job": ((after.1 - before.1) / n as f64 * 100.0).round() / 100.0,
        "worker_mem_mib": rss.map(r1),
        "mem_kind": "rss",
        "worker_pss_mib": pss.map(r1),
        "poll_interval_ms": poll_interval_ms,
        "fetch_size": fetch_size,
    });
    println!("{result}");
    // The spawned worker may still hold the runtime; leave at once.
    std::process::exit(0);
}
