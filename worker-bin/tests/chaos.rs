//! The short fault-injection run (issue 10), once per backend: the real
//! `jobworker` binary over 2,000 jobs while workers are SIGKILLed every
//! 100–300 ms, the supervisor tree and the board server are SIGKILLed and
//! restarted once, the queue is paused once, a worker is frozen past its
//! lease, and 20 jobs are cancelled with `jobworker cancel`, most of them
//! while they run (see `jobworker_tests::chaos`; `scripts/chaos` runs the
//! long version).
//!
//! The tests assert outcomes, never timings: every job completed exactly
//! once on the board or, when its cancel was accepted, cancelled and never
//! completed; none lost; a cancel reached a running job; no overlapping
//! runs unexplained by a lease expiry; and the supervisor never exited on
//! its own.

use std::sync::Mutex;
use std::time::Instant;

use jobworker_tests::chaos::analysis::Explanation;
use jobworker_tests::chaos::{self, Backend, ChaosConfig};

/// Jobs per run: about a minute (Redis) and two (ZooKeeper) on the
/// project's 2-core machine with a debug build.
const JOBS: usize = 2_000;

/// One chaos run at a time: each wants the whole machine.
static SERIAL: Mutex<()> = Mutex::new(());

fn chaos_run(backend: Backend) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cfg = ChaosConfig::new(JOBS, backend, env!("CARGO_BIN_EXE_jobworker"));
    let started = Instant::now();
    let report = chaos::run(&cfg).expect("the chaos run could not start");
    println!("{report}");
    println!(
        "{} chaos run of {JOBS} jobs in {:?}",
        backend.name(),
        started.elapsed()
    );
    assert_eq!(report.analysis.lost, 0, "jobs lost:\n{report}");
    assert!(
        report.exactly_once(),
        "not completed exactly once or cancelled as asked:\n{report}"
    );
    assert!(
        report.analysis.cancels.cancelled_running > 0,
        "no cancel reached a running job:\n{report}"
    );
    assert_eq!(
        report.analysis.overlaps_by(Explanation::Unexplained),
        0,
        "unexplained overlaps:\n{report}"
    );
    assert!(report.passed(), "{report}");
}

#[test]
fn redis_survives_the_chaos_run_with_every_job_completed_once() {
    chaos_run(Backend::Redis);
}

#[test]
fn zookeeper_survives_the_chaos_run_with_every_job_completed_once() {
    chaos_run(Backend::ZooKeeper);
}
