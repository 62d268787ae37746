//! The supervisor under workers that end on their own, on the real binary:
//! it keeps serving under any rate of outside kills, recovers the leases of
//! a worker that exits mid-job whatever its exit status, gives up only
//! when workers cannot start at all, and sleeps while nothing happens.

mod common;

use std::time::{Duration, Instant};

use common::*;
use jobworker::{Board, JobState};
use jobworker_examples::scripted::{Action, Script};
use jobworker_tests::wait_until;

/// Seen: the supervisor exited (code 5) after 10 worker crashes in 60 s,
/// counting kill -9 from outside. Now it serves on through 40 kills and
/// every job completes.
#[tokio::test(flavor = "multi_thread")]
async fn forty_outside_kills_neither_stop_the_supervisor_nor_lose_a_job() {
    let (_serial, board, q, key) = setup("e2e-kills").await;
    let mut ids = Vec::new();
    for _ in 0..200 {
        ids.push(post(&board, &q, &script(Action::Sleep, 20, &key), 100).await);
    }
    let mut sup = Supervisor::start(&q, &["--workers", "2", "--expiry", "60"]);
    let mut kills = 0;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    while kills < 40 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // Kept: the kills are spread out in time on purpose.
        tokio::time::sleep(Duration::from_millis(100 + rng % 200)).await;
        assert!(
            sup.alive(),
            "the supervisor exited after {kills} kills; log:\n{}",
            sup.log()
        );
        let live = sup.worker_pids();
        if let Some(pid) = live.get(rng as usize % live.len().max(1)) {
            // SAFETY: kill -9 of one of the supervisor's worker processes.
            if unsafe { libc::kill(*pid, libc::SIGKILL) } == 0 {
                kills += 1;
            }
        }
    }
    for id in &ids {
        wait_state(&board, &q, id, JobState::Completed, 120).await;
    }
    assert!(sup.alive(), "the supervisor exited; log:\n{}", sup.log());
    sup.stop_cleanly(Duration::from_secs(30));
}

/// Seen: a worker that exited with status 0 mid-job (a handler calling
/// `exit(0)`) was noticed only when its lease expired. Now its job is given
/// back at once: it completes long before its 60 s lease would end.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_exiting_0_mid_job_has_its_job_recovered_at_once() {
    let (_serial, board, q, key) = setup("e2e-exit0").await;
    let exits_once = Script {
        until_attempt: 1,
        ..script(Action::Exit, 0, &key)
    };
    let id = post(&board, &q, &exits_once, 5).await;
    let sup = Supervisor::start(&q, &["--workers", "1", "--expiry", "60"]);
    let started = Instant::now();
    wait_state(&board, &q, &id, JobState::Completed, 40).await;
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "recovered only after {:?}",
        started.elapsed()
    );
    let info = board.show(&q, &id).await.unwrap();
    assert_eq!(info.attempts, 1, "the exit counts one attempt: {info:?}");
    assert_eq!(runs(&board, &key).await[id.as_str()], 2);
    let history = board.history(&q, &id).await.unwrap();
    let failure = history
        .iter()
        .find(|e| e["event"] == "failed")
        .unwrap_or_else(|| panic!("no failure in {history:?}"));
    let text = failure.to_string();
    assert!(
        text.contains("crashed") && text.contains("exited with status 0"),
        "{text}"
    );
    drop(sup);
}

/// A second supervisor on the same --workdir cannot take the sandboxes of
/// the first: its workers cannot start, over and over, and it ends with
/// exit code 5 and the reason, while the first keeps working.
#[tokio::test(flavor = "multi_thread")]
async fn workers_that_cannot_start_end_the_supervisor_with_the_reason() {
    let (_serial, board, q, key) = setup("e2e-nostart").await;
    let first = Supervisor::start(&q, &["--workers", "1"]);
    wait_until("the first worker", Duration::from_secs(10), || async {
        jobworker::board::Presence::live_workers(&board)
            .await
            .unwrap()
            .iter()
            .any(|w| w.queues == [q.clone()])
    })
    .await;
    let mut second = Supervisor::start_in(&q, &["--workers", "1"], Some(first.workdir.clone()));
    let status = second.wait_exit(Duration::from_secs(90));
    let log = second.log();
    assert_eq!(status.code(), Some(5), "{log}");
    assert!(log.contains("in use by another worker"), "{log}");
    assert!(log.contains("workers cannot start"), "{log}");
    let id = post(&board, &q, &script(Action::Ok, 0, &key), 5).await;
    wait_state(&board, &q, &id, JobState::Completed, 10).await;
}

/// How often the supervisor's (only) thread gave up the CPU of its own
/// accord (each time it blocked) and the CPU it used, in clock ticks.
fn wakeups_and_cpu(pid: i32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/status")).unwrap();
    let switches = status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("voluntary_ctxt_switches");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces): utime and
    // stime are the 12th and 13th.
    let rest: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let cpu = rest[11].parse::<u64>().unwrap() + rest[12].parse::<u64>().unwrap();
    (switches, cpu)
}

/// Seen: the supervisor looked at its signals, children and timers every
/// 20 ms, idle or not (about 150 wake-ups in 3 s). Now it blocks until a
/// signal, a worker's exit or a deadline of its own: with its workers
/// running and nothing happening it hardly wakes at all, and it still
/// replaces a killed worker at once and stops cleanly on TERM.
#[tokio::test(flavor = "multi_thread")]
async fn an_idle_supervisor_sleeps_until_something_happens() {
    let (_serial, board, q, key) = setup("e2e-idle").await;
    let mut sup = Supervisor::start(&q, &["--workers", "2"]);
    wait_until("two started workers", Duration::from_secs(20), || async {
        let mine = jobworker::board::Presence::live_workers(&board).await.unwrap();
        mine.iter().filter(|w| w.queues == [q.clone()]).count() == 2
    })
    .await;
    let (switches, cpu) = wakeups_and_cpu(sup.pid());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (switches_after, cpu_after) = wakeups_and_cpu(sup.pid());
    let (woke, used) = (switches_after - switches, cpu_after - cpu);
    assert!(
        woke <= 10,
        "the idle supervisor woke {woke} times in 3 s; log:\n{}",
        sup.log()
    );
    assert!(used <= 20, "the idle supervisor used {used} clock ticks in 3 s");
    // A worker's exit still wakes it: the slot is forked again at once.
    let before = sup.worker_pids();
    assert_eq!(before.len(), 2, "{before:?}");
    // SAFETY: kill -9 of one of the supervisor's worker processes.
    assert_eq!(unsafe { libc::kill(before[0], libc::SIGKILL) }, 0);
    wait_until("a replacement worker", Duration::from_secs(20), || async {
        let now = sup.worker_pids();
        now.len() == 2 && !now.contains(&before[0])
    })
    .await;
    let id = post(&board, &q, &script(Action::Ok, 0, &key), 5).await;
    wait_state(&board, &q, &id, JobState::Completed, 20).await;
    sup.stop_cleanly(Duration::from_secs(30));
}
