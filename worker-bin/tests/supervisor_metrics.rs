//! `jobworker run --metrics-listen`, on the real binary with real signals:
//! the supervisor serves its own metrics from its poll loop (workers,
//! respawns, crashes, jobs in flight), answers only `/metrics`, is not held
//! up by a client that sends nothing, keeps the listener out of its
//! workers, and refuses an address it cannot listen on before it forks.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use common::cli::{jobworker_command, private_redis};
use common::*;
use jobworker::redis::RedisBoard;
use jobworker::JobState;
use jobworker_examples::scripted::{Action, Script};
use jobworker_tests::{unique_queue, wait_for_blocking};

/// A generous bound for anything a busy 2-core machine must get done.
const PATIENCE: Duration = Duration::from_secs(60);

/// The address the supervisor logged (`metrics on http://ADDR/metrics`).
fn metrics_addr(sup: &Supervisor) -> SocketAddr {
    wait_for_blocking(sup.and_log("the metrics line"), PATIENCE, || {
        let log = sup.log();
        let rest = log.split("metrics on http://").nth(1)?;
        rest.split("/metrics").next()?.parse().ok()
    })
}

/// `GET path` over HTTP/1.0; returns the status line and the body.
fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to the metrics listener");
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read the response");
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end: {response:?}"));
    (
        head.lines().next().unwrap_or_default().to_owned(),
        body.to_owned(),
    )
}

/// The metrics now, by name (a sample labelled `how` as `name{how}`).
fn scrape(addr: SocketAddr) -> HashMap<String, f64> {
    let (status, body) = get(addr, "/metrics");
    assert!(status.contains(" 200 "), "{status}\n{body}");
    let lines = body.lines().map(|l| Ok(l.to_owned()));
    let parsed = prometheus_parse::Scrape::parse(lines).expect("parse the metrics");
    let mut by_name = HashMap::new();
    for sample in parsed.samples {
        let value = match sample.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            other => panic!("{}: unexpected {other:?}", sample.metric),
        };
        let name = match sample.labels.get("how") {
            Some(how) => format!("{}{{{how}}}", sample.metric),
            None => sample.metric,
        };
        by_name.insert(name, value);
    }
    by_name
}

/// Waits until the scraped metrics satisfy `ok`; returns them.
fn wait_metrics(sup: &Supervisor, addr: SocketAddr, what: &str, ok: impl Fn(&Metrics) -> bool) -> Metrics {
    wait_for_blocking(sup.and_log(what), PATIENCE, || {
        let m = Metrics(scrape(addr));
        ok(&m).then_some(m)
    })
}

/// Scraped metrics.
struct Metrics(HashMap<String, f64>);

impl Metrics {
    /// `jobworker_supervisor_<name>` (0 when absent, as a counter never
    /// bumped may be).
    fn get(&self, name: &str) -> f64 {
        self.0
            .get(&format!("jobworker_supervisor_{name}"))
            .copied()
            .unwrap_or(0.0)
    }
}

/// The socket inode of the TCP listener on `port` (from /proc/net/tcp).
fn listener_inode(port: u16) -> String {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f[1].ends_with(&local) && f[3] == "0A")
        .map(|f| f[9].to_owned())
        .unwrap_or_else(|| panic!("no listener on port {port}:\n{table}"))
}

/// Each of `workers` drops the supervisor's metrics listener. A worker
/// counts as alive once forked, before its first line runs, so a
/// just-forked one may still hold it for a moment: this waits for the
/// outcome (up to 10 s) instead of checking at one instant.
fn drop_the_listener(workers: &[i32], inode: &str) {
    for pid in workers {
        wait_for_blocking(
            format!("worker {pid} drops the metrics listener"),
            Duration::from_secs(10),
            || (!holds_socket(*pid, inode)).then_some(()),
        );
    }
}

/// True when process `pid` holds socket `inode`.
fn holds_socket(pid: i32, inode: &str) -> bool {
    let want = format!("socket:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .any(|link| link.to_string_lossy() == want)
        })
        .unwrap_or(false)
}

/// A job that sleeps ten minutes on its first attempt and succeeds at once
/// on the next (after its worker was killed and its lease given back).
fn long_first_attempt(key: &str) -> Script {
    Script {
        until_attempt: 1,
        ..script(Action::Sleep, 600_000, key)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_workers_jobs_in_flight_respawns_and_crashes() {
    let _serial = serial().await;
    let server = private_redis();
    let url = server.url();
    let board = RedisBoard::connect(&url).await.unwrap();
    let q = unique_queue("metrics");
    let key = format!("runs:{q}");
    let args = [
        "--workers",
        "2",
        "--metrics-listen",
        "127.0.0.1:0",
        "--expiry",
        "60",
    ];
    let mut sup = Supervisor::start_on(&["--redis", &url], &q, &args, None);
    let addr = metrics_addr(&sup);
    let m = wait_metrics(&sup, addr, "two workers alive", |m| m.get("workers_alive") == 2.0);
    assert_eq!(m.get("workers"), 2.0);
    assert_eq!(m.get("jobs_in_flight"), 0.0);
    assert_eq!(m.get("respawns_total"), 0.0);
    assert_eq!(m.get("worker_crashes_total"), 0.0);
    assert!(m.get("start_time_seconds") > 1.6e9, "{:?}", m.0);

    // The workers do not hold the supervisor's listener.
    let inode = listener_inode(addr.port());
    assert!(
        holds_socket(sup.pid(), &inode),
        "the supervisor holds its listener"
    );
    let first = sup.worker_pids();
    assert_eq!(first.len(), 2, "{first:?}");
    drop_the_listener(&first, &inode);

    // Each worker runs one job: two in flight.
    let ids = [
        post(&board, &q, &long_first_attempt(&key), 5).await,
        post(&board, &q, &long_first_attempt(&key), 5).await,
    ];
    wait_metrics(&sup, addr, "two jobs in flight", |m| {
        m.get("jobs_in_flight") == 2.0
    });

    // kill -9 of one worker: a crash, a respawn, its lease given back.
    // SAFETY: kill -9 of one of the supervisor's worker processes.
    assert_eq!(unsafe { libc::kill(first[0], libc::SIGKILL) }, 0);
    let m = wait_metrics(&sup, addr, "the killed worker replaced", |m| {
        m.get("respawns_total") >= 1.0
            && m.get("worker_crashes_total") >= 1.0
            && m.get("workers_alive") == 2.0
    });
    assert_eq!(m.get("workers"), 2.0);
    assert!(m.get("recovered_leases_total") >= 1.0, "{:?}", m.0);
    assert!(m.get("worker_exits_total{killed}") >= 1.0, "{:?}", m.0);
    let now = sup.worker_pids();
    assert!(!now.contains(&first[0]), "{now:?}");
    drop_the_listener(&now, &inode);

    // The other first worker goes too; both jobs then complete on their
    // second attempt and nothing is in flight.
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(first[1], libc::SIGKILL) }, 0);
    for id in &ids {
        wait_state(&board, &q, id, JobState::Completed, PATIENCE.as_secs()).await;
    }
    let m = wait_metrics(&sup, addr, "nothing in flight", |m| {
        m.get("jobs_in_flight") == 0.0
            && m.get("worker_crashes_total") >= 2.0
            && m.get("workers_alive") == 2.0
    });
    assert!(m.get("respawns_total") >= 2.0, "{:?}", m.0);
    sup.stop_cleanly(PATIENCE);
}

#[tokio::test(flavor = "multi_thread")]
async fn other_paths_get_404_and_a_silent_client_does_not_hold_up_a_scrape() {
    let _serial = serial().await;
    let server = private_redis();
    let q = unique_queue("metrics-http");
    let args = ["--workers", "1", "--metrics-listen", "127.0.0.1:0"];
    let mut sup = Supervisor::start_on(&["--redis", &server.url()], &q, &args, None);
    let addr = metrics_addr(&sup);
    let (status, _) = get(addr, "/");
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    let (status, _) = get(addr, "/metrics/extra");
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    // Connected, sending nothing (and a half-sent request): scrapes are
    // answered all the same, while these wait.
    let _silent = TcpStream::connect(addr).unwrap();
    let mut half = TcpStream::connect(addr).unwrap();
    half.write_all(b"GET /metr").unwrap();
    for _ in 0..3 {
        let m = scrape(addr);
        assert_eq!(m.get("jobworker_supervisor_workers"), Some(&1.0), "{m:?}");
    }
    // The silent client is dropped in time: its read ends (EOF or reset).
    let mut silent = TcpStream::connect(addr).unwrap();
    silent.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 16];
    let got = silent.read(&mut buf);
    assert!(matches!(got, Ok(0) | Err(_)), "{got:?}");
    assert!(sup.alive(), "{}", sup.log());
    sup.stop_cleanly(PATIENCE);
}

#[test]
fn an_address_it_cannot_listen_on_fails_at_start_before_any_worker() {
    let server = private_redis();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().to_string();
    let q = unique_queue("metrics-taken");
    let args = ["--workers", "1", "--metrics-listen", &port];
    let mut sup = Supervisor::start_on(&["--redis", &server.url()], &q, &args, None);
    let status = sup.wait_exit(PATIENCE);
    let log = sup.log();
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(
        log.contains(&format!("--metrics-listen {port}: cannot listen there")),
        "{log}"
    );
    assert!(!log.contains("worker started"), "{log}");

    for (bad, says) in [
        (vec!["--metrics-listen", "nowhere"], "invalid value 'nowhere'"),
        (
            vec!["--metrics-listen", "127.0.0.1:0", "--workers", "0"],
            "needs --workers 1 or more",
        ),
    ] {
        let out = jobworker_command()
            .args(["--redis", &server.url(), "run", "-q", &q])
            .args(&bad)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(stderr.contains(says), "{bad:?}: {stderr}");
    }
}
