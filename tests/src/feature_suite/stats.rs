//! Statistics and throughput: a day's wait and run times, failures and
//! retries, and the jobs finished per minute, exact while several boards
//! work the queue.

use std::time::Duration;

use jobworker::board::{Admin, Inspect};
use jobworker::{Abandon, Board, NewJob};

use super::{FeatureHarness, LONG, SOON};
use crate::unique_queue;

/// One day in ms.
const DAY_MS: i64 = 86_400_000;

/// The board's clock (the one its statistics use), in ms.
async fn clock<B: Admin>(b: &B) -> i64 {
    b.server_ms().await.expect("read the board's clock")
}

/// Waits until the board's clock is past `ms`.
async fn clock_passes<B: Admin>(b: &B, ms: i64) {
    let deadline =
        tokio::time::Instant::now() + SOON + Duration::from_millis((ms - clock(b).await).max(0) as u64);
    while clock(b).await <= ms {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the clock did not pass {ms}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn retry_now(error: &str) -> Abandon {
    Abandon::Retry {
        delay: Duration::ZERO,
        error: error.into(),
    }
}

/// Three jobs that waited about 300, 450 and 600 ms and ran 150 ms each
/// give the day's wait and run figures; a job failing twice counts a retry
/// and a failure (and its waits, not its runs); another day has nothing.
pub async fn stats_count_wait_and_run_times_failures_and_retries<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("stats");
    for _ in 0..3 {
        b.post(&q, NewJob::new("timed")).await.unwrap();
    }
    let posted = clock(&b).await;
    clock_passes(&b, posted + 300).await;
    for _ in 0..3 {
        let c = b.claim(&[&q], "w-stats", LONG, 1).await.unwrap().remove(0);
        let claimed = clock(&b).await;
        clock_passes(&b, claimed + 150).await;
        b.consume(c.lease).await.unwrap();
    }
    let s = b.stats(&q, None).await.unwrap();
    assert_eq!(s.queue, q);
    let today = clock(&b).await.div_euclid(DAY_MS);
    assert_eq!(s.day, jobworker::stats::day_name(today));
    assert_eq!(s.wait.count, 3);
    assert!(
        (400.0..5_000.0).contains(&s.wait.mean_ms),
        "wait mean {}",
        s.wait.mean_ms
    );
    assert!(s.wait.std_dev_ms > 50.0, "wait std dev {}", s.wait.std_dev_ms);
    assert_eq!(s.run.count, 3);
    assert!(
        (145.0..5_000.0).contains(&s.run.mean_ms),
        "run mean {}",
        s.run.mean_ms
    );
    assert_eq!(s.wait.histogram.iter().map(|(_, n)| n).sum::<u64>(), 3);
    assert_eq!(s.run.histogram, [("s0".to_owned(), 3)]);
    assert_eq!((s.failed, s.retried), (0, 0));

    b.post(&q, NewJob::new("failing").max_attempts(2)).await.unwrap();
    for _ in 0..2 {
        let c = b.claim(&[&q], "w-stats", LONG, 1).await.unwrap().remove(0);
        b.abandon(c.lease, retry_now("nope")).await.unwrap();
    }
    let s = b.stats(&q, None).await.unwrap();
    assert_eq!((s.failed, s.retried), (1, 1), "{s:?}");
    assert_eq!(s.wait.count, 5, "both claims of the failing job waited");
    assert_eq!(s.run.count, 3, "failed runs are not counted as runs");
    let yesterday = b.stats(&q, Some(today - 1)).await.unwrap();
    assert_eq!(
        (yesterday.wait.count, yesterday.run.count, yesterday.failed),
        (0, 0, 0)
    );
}

/// Completed and trashed jobs are counted in their minute; a retry out of
/// the trash counts as a retry; at most two hours of minutes are kept.
pub async fn throughput_counts_completed_and_trashed_jobs_per_minute<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("tput");
    for name in ["a", "b", "c"] {
        b.post(&q, NewJob::new(name)).await.unwrap();
    }
    for _ in 0..2 {
        let c = b.claim(&[&q], "w-tput", LONG, 1).await.unwrap().remove(0);
        b.consume(c.lease).await.unwrap();
    }
    let c = b.claim(&[&q], "w-tput", LONG, 1).await.unwrap().remove(0);
    let trashed = c.lease.job().clone();
    b.trash(c.lease, "boom").await.unwrap();
    // Two minutes, in case the minute turned during the test.
    let minutes = b.throughput(&q, 2).await.unwrap();
    assert_eq!(minutes.len(), 2);
    assert_eq!(minutes[0].at_ms + 60_000, minutes[1].at_ms);
    let completed: u64 = minutes.iter().map(|m| m.completed).sum();
    let failed: u64 = minutes.iter().map(|m| m.failed).sum();
    assert_eq!((completed, failed), (2, 1));
    assert_eq!(
        b.throughput(&q, 500).await.unwrap().len(),
        120,
        "at most two hours are kept"
    );
    let before = b.stats(&q, None).await.unwrap().retried;
    let retried = b.retry(&q, &[trashed]).await.unwrap();
    assert!(retried.iter().all(|r| r.is_ok()), "{retried:?}");
    assert_eq!(b.stats(&q, None).await.unwrap().retried, before + 1);
}

/// Four boards consume 1,200 jobs while reaping (which folds the counts
/// on ZooKeeper): every job is counted exactly once.
pub async fn stats_stay_exact_while_boards_work_and_fold<H: FeatureHarness>(h: &H) {
    const JOBS: usize = 1_200;
    let b = h.board().await;
    let q = unique_queue("stats-fold");
    let jobs: Vec<NewJob> = (0..JOBS).map(|i| NewJob::new("n").args(&i).unwrap()).collect();
    b.post_many(&q, &jobs).await.unwrap();
    let mut workers = Vec::new();
    for w in 0..4 {
        let (b, q) = (h.board().await, q.clone());
        workers.push(tokio::spawn(async move {
            let owner = format!("w-fold-{w}");
            loop {
                let claimed = b.claim(&[&q], &owner, LONG, 50).await.unwrap();
                if claimed.is_empty() {
                    break;
                }
                for c in claimed {
                    b.consume(c.lease).await.unwrap();
                }
                b.reap(&q).await.unwrap();
            }
        }));
    }
    for w in workers {
        w.await.unwrap();
    }
    let s = b.stats(&q, None).await.unwrap();
    assert_eq!((s.wait.count, s.run.count), (JOBS as u64, JOBS as u64), "{s:?}");
    let in_buckets = |h: &[(String, u64)]| h.iter().map(|(_, n)| n).sum::<u64>();
    assert_eq!(in_buckets(&s.wait.histogram), JOBS as u64, "{s:?}");
    assert_eq!(in_buckets(&s.run.histogram), JOBS as u64, "{s:?}");
    let done: u64 = b
        .throughput(&q, 120)
        .await
        .unwrap()
        .iter()
        .map(|m| m.completed)
        .sum();
    assert_eq!(done, JOBS as u64);
}

/// One claim whose jobs waited over a second and under one counts each
/// wait in its own bucket, and a later claim adds to the buckets' counts
/// (the jobs are consumed: ZooKeeper counts a wait when its job ends).
pub async fn one_claim_counts_each_wait_in_its_bucket<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("stats-buckets");
    b.post(&q, NewJob::new("early")).await.unwrap();
    let posted = clock(&b).await;
    clock_passes(&b, posted + 1_100).await;
    for _ in 0..2 {
        b.post(&q, NewJob::new("late")).await.unwrap();
    }
    let mut claimed = b.claim(&[&q], "w-buckets", LONG, 3).await.unwrap();
    assert_eq!(claimed.len(), 3);
    b.post(&q, NewJob::new("later")).await.unwrap();
    claimed.extend(b.claim(&[&q], "w-buckets", LONG, 1).await.unwrap());
    assert_eq!(claimed.len(), 4);
    let leases = claimed.into_iter().map(|c| c.lease).collect();
    for done in b.consume_many(leases).await {
        done.unwrap();
    }
    let s = b.stats(&q, None).await.unwrap();
    assert_eq!(s.wait.count, 4, "{s:?}");
    let waits: u64 = s.wait.histogram.iter().map(|(_, n)| n).sum();
    assert_eq!(waits, 4, "every wait is in a bucket: {s:?}");
    let a_second_or_more: u64 = s
        .wait
        .histogram
        .iter()
        .filter(|(b, _)| b != "s0")
        .map(|(_, n)| n)
        .sum();
    assert!(a_second_or_more >= 1, "the early job waited over a second: {s:?}");
    assert!(s.wait.mean_ms >= 1_100.0 / 4.0, "{s:?}");
}
