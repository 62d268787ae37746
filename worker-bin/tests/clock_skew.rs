//! Host clocks do not matter: worker liveness is measured on the server's
//! clock. Hosts whose clocks are an hour off run under libfaketime (Debian's
//! `faketime` package, installed by `scripts/install-deps --tests`).

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use jobworker::board::{Presence, WorkerInfo};
use jobworker::AnyBoard;
use jobworker_tests::{shared_redis, wait_until};

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// The environment of a process whose wall clock is `offset` seconds off
/// (its monotonic clock is left alone).
fn skewed(offset: &str) -> [(&'static str, String); 3] {
    assert!(
        std::path::Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: run `bash scripts/install-deps --tests` (Debian package faketime)"
    );
    [
        ("LD_PRELOAD", LIBFAKETIME.to_owned()),
        ("FAKETIME", offset.to_owned()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_owned()),
    ]
}

/// `jobworker workers --json` run on a host whose clock is `offset` off.
fn workers_seen_from(offset: &str) -> Vec<WorkerInfo> {
    let out = Command::new(env!("CARGO_BIN_EXE_jobworker"))
        .args(["--redis", shared_redis().url(), "--json", "workers"])
        .envs(skewed(offset))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Seen: the registry compared host clocks, so a reader whose clock ran
/// ahead deleted live workers' entries, and a worker whose clock ran behind
/// never showed. Both are listed now, with beats on the server's clock.
#[tokio::test(flavor = "multi_thread")]
async fn workers_on_hosts_an_hour_off_are_listed_as_live_from_either_side() {
    let (_serial, board, q, _key) = setup("e2e-skew").await;
    let behind = skewed("-3600");
    let env: Vec<(&str, &str)> = behind.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let url = shared_redis().url();
    let sup = Supervisor::start_with_env(&["--redis", url], &q, &["--workers", "1"], None, &env);
    let any = AnyBoard::Redis(board.clone());
    let mine = |list: Vec<WorkerInfo>| list.into_iter().filter(|w| w.queues == [q.clone()]).count();
    wait_until(
        "the worker an hour behind to be listed",
        Duration::from_secs(20),
        || async { mine(any.live_workers().await.unwrap()) == 1 },
    )
    .await;
    // A reader an hour ahead sees it too, and does not delete it.
    assert_eq!(mine(workers_seen_from("+3600")), 1, "log:\n{}", sup.log());
    assert_eq!(mine(any.live_workers().await.unwrap()), 1);
    let info = any
        .live_workers()
        .await
        .unwrap()
        .into_iter()
        .find(|w| w.queues == [q.clone()])
        .unwrap();
    let server = board.server_ms().await.unwrap() as u64;
    assert!(
        server.abs_diff(info.beat_ms) < 60_000,
        "beat {} is not on the server's clock ({server})",
        info.beat_ms
    );
    drop(sup);
}
