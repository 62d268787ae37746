//! Limiting a queue's concurrency on the Redis board against a real
//! server: claims hand out no more, and `wait` sleeps until a freed lease
//! instead of letting idle workers spin. (Pause and resume are in the
//! feature suite both backends run, `jobworker_tests::feature_suite`.)

use jobworker_tests::copy_of;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jobworker::redis::RedisBoard;
use jobworker::Board;
use jobworker_tests::features::*;
use redis::AsyncCommands;
use tokio::time::Instant;

/// Starts a `wait` on `q` in a task, lets 500 ms pass, runs `wake_up`, and
/// checks that the wait slept until then (an idle worker would spin on
/// empty claims otherwise) and that `wake_up` woke it.
async fn assert_wait_sleeps_until(b: &RedisBoard, q: &str, what: &str, wake_up: impl Future<Output = ()>) {
    let start = Instant::now();
    let waiter = {
        let (b, q) = (b.clone(), q.to_owned());
        tokio::spawn(async move { b.wait(&[&q], Duration::from_secs(5)).await.unwrap() })
    };
    // Kept: what is tested is that the wait sleeps through this time.
    tokio::time::sleep(Duration::from_millis(500)).await;
    wake_up.await;
    let woke = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("wait did not return")
        .unwrap();
    let after = start.elapsed();
    assert!(woke, "{what}: wait timed out instead of waking");
    assert!(
        after >= Duration::from_millis(450),
        "{what}: wait returned after {after:?} while nothing could be claimed: idle workers would spin"
    );
    assert!(
        after < Duration::from_secs(3),
        "{what} did not wake the wait ({after:?})"
    );
}

/// An idle worker at the queue's concurrency limit should sleep until a
/// lease is given up (consumed or trashed), not spin on empty claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_at_the_concurrency_limit_sleeps_until_a_lease_is_freed() {
    let (b, q) = board_and_queue("limit-wait").await;
    b.set_limit(&q, Some(1)).await.unwrap();
    post_n(&b, &q, "l", 3).await;
    let mut held = claim_one(&b, &q).await.lease;
    for free in ["consume", "trash"] {
        assert!(claim(&b, &q, 1).await.is_empty(), "the limit is reached");
        assert_wait_sleeps_until(&b, &q, free, async {
            match free {
                "consume" => b.consume(held).await.unwrap(),
                _ => b.trash(held, "fatal: no").await.unwrap(),
            }
        })
        .await;
        held = claim_one(&b, &q).await.lease;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_concurrency_limit_caps_leases_across_claimers() {
    let (b, q) = board_and_queue("limit").await;
    assert!(b.set_limit(&q, Some(0)).await.unwrap_err().is_invalid());
    b.set_limit(&q, Some(2)).await.unwrap();
    assert_eq!(b.settings(&q).await.unwrap().limit, Some(2));
    let total = 20;
    post_n(&b, &q, "l", total).await;
    let held = Arc::new(AtomicUsize::new(0));
    let max_held = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut tasks = Vec::new();
    for k in 0..5 {
        let (b, q) = (b.clone(), q.clone());
        let (held, max_held, done) = (held.clone(), max_held.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let who = format!("limited-{k}");
            while done.load(Ordering::SeqCst) < total && Instant::now() < deadline {
                let got = b.claim(&[&q], &who, LONG, 3).await.unwrap();
                if got.is_empty() {
                    // Idle until a lease is freed (or a while).
                    b.wait(&[&q], Duration::from_millis(100)).await.unwrap();
                    continue;
                }
                // Counted only while the server surely holds the leases:
                // from after the claim to before the consume.
                let now = held.fetch_add(got.len(), Ordering::SeqCst) + got.len();
                max_held.fetch_max(now, Ordering::SeqCst);
                // Kept: holding the leases a while (the jobs' work) is what
                // makes the other claimers press against the limit.
                tokio::time::sleep(Duration::from_millis(30)).await;
                held.fetch_sub(got.len(), Ordering::SeqCst);
                for c in &got {
                    b.consume(copy_of(&c.lease)).await.unwrap();
                }
                done.fetch_add(got.len(), Ordering::SeqCst);
            }
        }));
    }
    let sampler = {
        let (b, q, done) = (b.clone(), q.clone(), done.clone());
        tokio::spawn(async move {
            let keys = b.keys(&q).unwrap();
            let mut con = b.connection();
            let mut most = 0;
            while done.load(Ordering::SeqCst) < total && Instant::now() < deadline {
                let n: usize = con.zcard(keys.leases()).await.unwrap();
                most = most.max(n);
                // Kept: the sampling interval, not a wait for anything.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            most
        })
    };
    for t in tasks {
        t.await.unwrap();
    }
    let server_most = sampler.await.unwrap();
    assert_eq!(done.load(Ordering::SeqCst), total, "not every job ran");
    let most = max_held.load(Ordering::SeqCst);
    assert!(most <= 2, "{most} jobs held at once under a limit of 2");
    assert!(
        server_most <= 2,
        "the server held {server_most} leases under a limit of 2"
    );
    assert_eq!(most, 2, "five claimers should reach the limit");

    b.set_limit(&q, None).await.unwrap();
    assert_eq!(b.settings(&q).await.unwrap().limit, None);
    post_n(&b, &q, "l", 5).await;
    assert_eq!(claim(&b, &q, 10).await.len(), 5, "no limit once removed");
}
