//! Concurrency limits: at most `limit` jobs of a queue held at once across
//! every claimer (also when claimers race), and an idle worker at the limit
//! sleeps until a lease is freed instead of spinning on empty claims.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jobworker::board::Admin;
use jobworker::{Board, Claimed, NewJob};
use tokio::time::Instant;

use super::{FeatureHarness, LONG, SOON};
use crate::{copy_of, unique_queue};

/// Posts `n` jobs named `name`.
async fn post_n<B: Board>(b: &B, q: &str, name: &str, n: usize) {
    for _ in 0..n {
        b.post(q, NewJob::new(name)).await.unwrap();
    }
}

/// A limit is checked, stored and removed; five claimers working through
/// 20 jobs never hold more than the limit at once (counted by the claimers
/// and sampled on the server), and reach it.
pub async fn a_concurrency_limit_caps_leases_across_claimers<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("limit");
    assert!(b.set_limit(&q, Some(0)).await.unwrap_err().is_invalid());
    b.set_limit(&q, Some(2)).await.unwrap();
    assert_eq!(b.settings(&q).await.unwrap().limit, Some(2));
    let total = 20;
    post_n(&b, &q, "l", total).await;
    let (held, most, done) = (Arc::default(), Arc::default(), Arc::new(AtomicUsize::new(0)));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut tasks = Vec::new();
    for k in 0..5 {
        let (b, q) = (h.board().await, q.clone());
        let (held, most, done): (Arc<AtomicUsize>, Arc<AtomicUsize>, _) =
            (Arc::clone(&held), Arc::clone(&most), done.clone());
        tasks.push(tokio::spawn(async move {
            let who = format!("limited-{k}");
            while done.load(Ordering::SeqCst) < total && Instant::now() < deadline {
                let got = b.claim(&[&q], &who, LONG, 3).await.unwrap();
                if got.is_empty() {
                    // Idle until a lease is freed (or a while).
                    b.wait(&[&q], Duration::from_millis(200)).await.unwrap();
                    continue;
                }
                // Counted only while the server surely holds the leases:
                // from after the claim to before the consume.
                let now = held.fetch_add(got.len(), Ordering::SeqCst) + got.len();
                most.fetch_max(now, Ordering::SeqCst);
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
            let mut server_most = 0;
            while done.load(Ordering::SeqCst) < total && Instant::now() < deadline {
                let claimed = b.counts(std::slice::from_ref(&q)).await.unwrap().claimed;
                server_most = server_most.max(claimed);
            }
            server_most
        })
    };
    for t in tasks {
        t.await.unwrap();
    }
    let server_most = sampler.await.unwrap();
    assert_eq!(done.load(Ordering::SeqCst), total, "not every job ran");
    let most = most.load(Ordering::SeqCst);
    assert!(most <= 2, "{most} jobs held at once under a limit of 2");
    assert!(
        server_most <= 2,
        "the board held {server_most} jobs under a limit of 2"
    );
    assert_eq!(most, 2, "five claimers should reach the limit");

    b.set_limit(&q, None).await.unwrap();
    assert_eq!(b.settings(&q).await.unwrap().limit, None);
    post_n(&b, &q, "l", 5).await;
    assert_eq!(
        b.claim(&[&q], "w", LONG, 10).await.unwrap().len(),
        5,
        "no limit once removed"
    );
}

/// Eight claimers, each with its own connection, race for 30 jobs under a
/// limit of 3 and keep what they get: exactly 3 are held, whatever the
/// interleaving. A freed lease makes room for exactly one more.
pub async fn claimers_racing_under_a_limit_hold_exactly_the_limit<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    for round in 0..5 {
        let q = unique_queue("limit-race");
        b.set_limit(&q, Some(3)).await.unwrap();
        post_n(&b, &q, "r", 30).await;
        let mut boards = Vec::new();
        for _ in 0..8 {
            boards.push(h.board().await);
        }
        let claims = boards.iter().enumerate().map(|(k, b)| {
            let q = q.clone();
            async move {
                let mut mine: Vec<Claimed> = Vec::new();
                // Until two empty claims in a row: the limit is reached.
                let mut empty = 0;
                while empty < 2 {
                    let got = b.claim(&[&q], &format!("racer-{k}"), LONG, 2).await.unwrap();
                    empty = if got.is_empty() { empty + 1 } else { 0 };
                    mine.extend(got);
                }
                mine
            }
        });
        let held: Vec<Claimed> = futures_util::future::join_all(claims)
            .await
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(
            held.len(),
            3,
            "round {round}: {} jobs held under a limit of 3",
            held.len()
        );
        assert_eq!(b.counts(std::slice::from_ref(&q)).await.unwrap().claimed, 3);
        b.consume(copy_of(&held[0].lease)).await.unwrap();
        assert_eq!(
            b.claim(&[&q], "w", LONG, 10).await.unwrap().len(),
            1,
            "round {round}: one freed"
        );
        assert!(
            b.claim(&[&q], "w", LONG, 10).await.unwrap().is_empty(),
            "round {round}"
        );
    }
}

/// An idle worker at the queue's limit sleeps until a lease is given up
/// (consumed or trashed), which wakes it; raising the limit wakes it too.
pub async fn wait_at_the_limit_sleeps_until_a_lease_is_freed<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("limit-wait");
    b.set_limit(&q, Some(1)).await.unwrap();
    post_n(&b, &q, "l", 4).await;
    let mut held = b.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0).lease;
    for free in ["consume", "trash", "raise"] {
        assert!(
            b.claim(&[&q], "w", LONG, 1).await.unwrap().is_empty(),
            "{free}: the limit is reached"
        );
        let waiter = {
            let (b, q) = (b.clone(), q.clone());
            tokio::spawn(async move { b.wait(&[&q], Duration::from_secs(60)).await.unwrap() })
        };
        // Kept: what is tested is that the wait sleeps through this time.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            !waiter.is_finished(),
            "{free}: wait returned at the limit: idle workers would spin"
        );
        match free {
            "consume" => b.consume(copy_of(&held)).await.unwrap(),
            "trash" => b.trash(copy_of(&held), "fatal: no").await.unwrap(),
            _ => b.set_limit(&q, Some(2)).await.unwrap(),
        }
        let woke = tokio::time::timeout(SOON, waiter)
            .await
            .expect("nothing woke the wait")
            .unwrap();
        assert!(woke, "{free}: wait timed out instead of waking");
        if free != "raise" {
            held = b.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0).lease;
        }
    }
    assert_eq!(
        b.claim(&[&q], "w", LONG, 5).await.unwrap().len(),
        1,
        "room for one more under 2"
    );
}
