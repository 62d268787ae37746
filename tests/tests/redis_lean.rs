//! Lean jobs on the Redis board against a real server: a plain job posted
//! under a generated id with the default priority and attempts gets no
//! job hash until its first claim (`runtime/lua/lib/lean.lua`). Every
//! reader and verb sees it as if it had one.

use std::time::Duration;

use jobworker::codec::{decode_posting, CreatedOn};
use jobworker::job::DEFAULT_MAX_ATTEMPTS;
use jobworker::redis::RedisBoard;
use jobworker::{Abandon, Board, JobId, JobState, NewJob, Priority};
use jobworker_tests::features::*;
use redis::AsyncCommands;

/// Whether job `id` of `q` has a job hash.
async fn hashed(b: &RedisBoard, q: &str, id: &str) -> bool {
    let keys = b.keys(q).unwrap();
    b.connection().exists(keys.job(id)).await.unwrap()
}

/// The post time (ms) in job `id`'s listing, as taskflow reads it.
async fn created_ms(b: &RedisBoard, q: &str, id: &str) -> i64 {
    let keys = b.keys(q).unwrap();
    let bytes: Vec<u8> = b.connection().hget(keys.listings(), id).await.unwrap();
    match decode_posting(&bytes).unwrap().created_on {
        CreatedOn::DateTime(at) => at.to_unix_micros() / 1000,
        other => panic!("created_on is not a datetime: {other:?}"),
    }
}

/// What taskflow's trash (`to_trash`) or consume does to the listings of
/// `q`, and nothing else of ours: the posting moves to the trash, or goes.
async fn finished_outside(b: &RedisBoard, q: &str, to_trash: &[&JobId], consumed: &[&JobId]) {
    let keys = b.keys(q).unwrap();
    let mut con = b.connection();
    for id in to_trash {
        let posting: Vec<u8> = con.hget(keys.listings(), id.as_str()).await.unwrap();
        let _: () = con.hset(keys.trash(), id.as_str(), posting).await.unwrap();
    }
    for id in to_trash.iter().chain(consumed) {
        let _: () = con.hdel(keys.listings(), id.as_str()).await.unwrap();
    }
}

#[tokio::test]
async fn a_plain_job_has_no_hash_until_its_claim_writes_the_posts_fields() {
    let (b, q) = board_and_queue("lean").await;
    let id = b.post(&q, NewJob::new("lean-job")).await.unwrap();
    assert!(
        !hashed(&b, &q, id.as_str()).await,
        "a plain post writes no job hash"
    );
    let posted = created_ms(&b, &q, id.as_str()).await;

    let shown = b.show(&q, &id).await.unwrap();
    assert_eq!((shown.name.as_str(), shown.state), ("lean-job", JobState::Ready));
    assert_eq!((shown.priority, shown.max_attempts), (0, DEFAULT_MAX_ATTEMPTS));
    assert!(shown.sequence.is_some() && shown.created_on.is_some());
    let history = b.history(&q, &id).await.unwrap();
    assert_eq!(history[0]["event"], "posted");
    assert_eq!(
        (history[0]["name"].as_str(), history[0]["at"].as_i64()),
        (Some("lean-job"), Some(posted))
    );

    let c = claim_one(&b, &q).await;
    assert_eq!(
        (c.name.as_str(), c.max_attempts),
        ("lean-job", DEFAULT_MAX_ATTEMPTS)
    );
    let keys = b.keys(&q).unwrap();
    let fields: Vec<Option<String>> = redis::cmd("HMGET")
        .arg(keys.job(id.as_str()))
        .arg(&["name", "posted", "seq", "token", "max", "prio"])
        .query_async(&mut b.connection())
        .await
        .unwrap();
    let posted_text = posted.to_string();
    let seq_text = shown.sequence.unwrap().to_string();
    // (Not its default priority and attempts: readers default them.)
    assert_eq!(
        fields.iter().map(|f| f.as_deref()).collect::<Vec<_>>(),
        [
            Some("lean-job"),
            Some(posted_text.as_str()),
            Some(seq_text.as_str()),
            Some("1"),
            None,
            None
        ]
    );
    b.consume(jobworker_tests::copy_of(&c.lease)).await.unwrap();
    let done = b.show(&q, &id).await.unwrap();
    assert_eq!(
        (done.name.as_str(), done.state),
        ("lean-job", JobState::Completed)
    );
    assert_eq!(
        (done.priority, done.max_attempts, done.sequence),
        (0, DEFAULT_MAX_ATTEMPTS, shown.sequence)
    );
    assert_eq!(event_kinds(&b, &q, &id).await, ["posted", "claimed", "consumed"]);
}

#[tokio::test]
async fn a_lean_jobs_wait_is_counted_from_its_post() {
    let (b, q) = board_and_queue("lean-wait").await;
    assert_eq!(b.stats(&q, None).await.unwrap().wait.count, 0);
    let id = b.post(&q, NewJob::new("waits")).await.unwrap();
    let posted = created_ms(&b, &q, id.as_str()).await;
    server_clock_passes(&b, posted + 300).await;
    let c = claim_one(&b, &q).await;
    let stats = b.stats(&q, None).await.unwrap();
    assert_eq!(stats.wait.count, 1);
    // At least the 300 ms the clock passed.
    assert!(stats.wait.mean_ms >= 300.0, "wait {} ms", stats.wait.mean_ms);
    b.consume(jobworker_tests::copy_of(&c.lease)).await.unwrap();
}

#[tokio::test]
async fn other_settings_or_an_own_id_keep_the_hash_at_post() {
    let (b, q) = board_and_queue("lean-not").await;
    let high = b
        .post(&q, NewJob::new("high").priority(Priority::HIGH))
        .await
        .unwrap();
    let three = b.post(&q, NewJob::new("three").max_attempts(3)).await.unwrap();
    let own = b.post(&q, NewJob::new("own").id("lean-own-id")).await.unwrap();
    let tagged = b.post(&q, NewJob::new("tagged").tag("t")).await.unwrap();
    for id in [&high, &three, &own, &tagged] {
        assert!(hashed(&b, &q, id.as_str()).await, "{id:?} has its hash at post");
    }
    assert_eq!(b.show(&q, &three).await.unwrap().max_attempts, 3);
}

#[tokio::test]
async fn verbs_on_a_ready_lean_job_keep_what_its_post_said() {
    let (b, q) = board_and_queue("lean-verbs").await;
    let first = b.post(&q, NewJob::new("first")).await.unwrap();
    let second = b.post(&q, NewJob::new("second")).await.unwrap();
    let third = b.post(&q, NewJob::new("third")).await.unwrap();
    b.post(&q, NewJob::new("untouched")).await.unwrap();
    let gone = b.post(&q, NewJob::new("gone")).await.unwrap();
    let posted = created_ms(&b, &q, third.as_str()).await;

    assert_eq!(
        b.set_priority(&q, &third, Priority::HIGH).await.unwrap(),
        JobState::Ready
    );
    assert_eq!(b.tag(&q, &second, &["blue"]).await.unwrap(), ["blue"]);
    b.track(&q, &first).await.unwrap();
    b.cancel(&q, std::slice::from_ref(&gone), false).await.unwrap();

    let cancelled = b.show(&q, &gone).await.unwrap();
    assert_eq!(
        (cancelled.name.as_str(), cancelled.state),
        ("gone", JobState::Cancelled)
    );
    assert_eq!(b.history(&q, &gone).await.unwrap()[0]["name"], "gone");
    let shown = b.show(&q, &third).await.unwrap();
    assert_eq!(
        (shown.priority, shown.max_attempts),
        (Priority::HIGH.0, DEFAULT_MAX_ATTEMPTS)
    );
    assert_eq!(
        b.history(&q, &third).await.unwrap()[0]["at"].as_i64(),
        Some(posted)
    );
    // The new priority first, then FIFO among the rest (lean or not).
    let got = claim(&b, &q, 4).await;
    assert_eq!(names(&got), ["third", "first", "second", "untouched"]);
    assert_eq!(b.show(&q, &second).await.unwrap().tags, ["blue"]);
    for c in got {
        b.consume(jobworker_tests::copy_of(&c.lease)).await.unwrap();
    }
}

#[tokio::test]
async fn a_lean_job_taskflow_trashed_or_consumed_is_recorded_finished() {
    let (b, q) = board_and_queue("lean-gone").await;
    let trashed = b.post(&q, NewJob::new("trashed-outside")).await.unwrap();
    let consumed = b.post(&q, NewJob::new("consumed-outside")).await.unwrap();
    finished_outside(&b, &q, &[&trashed], &[&consumed]).await;
    // A claim meets both, finds nothing to run, and records them.
    assert!(claim(&b, &q, 2).await.is_empty());
    assert!(hashed(&b, &q, trashed.as_str()).await && hashed(&b, &q, consumed.as_str()).await);
    let t = b.show(&q, &trashed).await.unwrap();
    assert_eq!((t.name.as_str(), t.state), ("trashed-outside", JobState::Trashed));
    assert_eq!(b.show(&q, &consumed).await.unwrap().state, JobState::Completed);
}

#[tokio::test]
async fn a_lean_job_taskflow_finished_before_any_claim_is_still_found() {
    let (b, q) = board_and_queue("lean-early").await;
    let consumed = b.post(&q, NewJob::new("consumed-early")).await.unwrap();
    let trashed = b.post(&q, NewJob::new("trashed-early")).await.unwrap();
    finished_outside(&b, &q, &[&trashed], &[&consumed]).await;

    // No claim has met them yet: neither has a hash.
    assert_eq!(b.show(&q, &consumed).await.unwrap().state, JobState::Completed);
    assert!(b.history(&q, &consumed).await.unwrap().is_empty());
    assert_eq!(b.queues_of(&consumed).await.unwrap(), std::slice::from_ref(&q));
    let history = b.history(&q, &trashed).await.unwrap();
    assert_eq!(
        (history[0]["event"].as_str(), history[0]["name"].as_str()),
        (Some("posted"), Some("trashed-early"))
    );
    // Once a claim met it, a lean job taskflow consumed keeps a history
    // without its post (its post time went with the posting).
    assert!(claim(&b, &q, 2).await.is_empty());
    assert_eq!(event_kinds(&b, &q, &consumed).await, ["consumed"]);
    assert_eq!(b.show(&q, &consumed).await.unwrap().state, JobState::Completed);
}

#[tokio::test]
async fn a_lean_job_taskflow_trashed_before_any_claim_can_be_retried() {
    let (b, q) = board_and_queue("lean-retry").await;
    let id = b.post(&q, NewJob::new("again-please")).await.unwrap();
    finished_outside(&b, &q, &[&id], &[]).await;
    for done in b.retry(&q, std::slice::from_ref(&id)).await.unwrap() {
        done.unwrap();
    }
    let c = claim_one(&b, &q).await;
    assert_eq!(
        (c.name.as_str(), c.max_attempts),
        ("again-please", DEFAULT_MAX_ATTEMPTS)
    );
    b.consume(jobworker_tests::copy_of(&c.lease)).await.unwrap();
}

#[tokio::test]
async fn a_purged_lean_job_does_not_come_back() {
    let (b, q) = board_and_queue("lean-purge").await;
    let id = b.post(&q, NewJob::new("purged")).await.unwrap();
    finished_outside(&b, &q, &[&id], &[]).await;
    for done in b.purge(&q, std::slice::from_ref(&id)).await.unwrap() {
        done.unwrap();
    }
    assert!(claim(&b, &q, 1).await.is_empty());
    assert!(b.show(&q, &id).await.unwrap_err().is_not_found());
    assert!(!hashed(&b, &q, id.as_str()).await);
}

#[tokio::test]
async fn a_lean_job_with_a_long_name_reads_whole() {
    let (b, q) = board_and_queue("lean-long").await;
    for len in [40, 300, 70_000] {
        let name = "n".repeat(len);
        let id = b.post(&q, NewJob::new(name.clone())).await.unwrap();
        assert!(!hashed(&b, &q, id.as_str()).await);
        let c = claim_one(&b, &q).await;
        assert_eq!((c.name.len(), c.max_attempts), (len, DEFAULT_MAX_ATTEMPTS));
        b.consume(jobworker_tests::copy_of(&c.lease)).await.unwrap();
        let history = b.history(&q, &id).await.unwrap();
        assert_eq!(
            history[0]["name"].as_str().map(str::len),
            Some(len),
            "name of {len} bytes"
        );
    }
}

#[tokio::test]
async fn a_lean_job_gets_the_default_attempts_then_goes_to_the_trash() {
    let (b, q) = board_and_queue("lean-attempts").await;
    let id = b.post(&q, NewJob::new("flaky")).await.unwrap();
    for attempt in 1..=DEFAULT_MAX_ATTEMPTS {
        let c = claim_one(&b, &q).await;
        assert_eq!((c.attempt, c.max_attempts), (attempt, DEFAULT_MAX_ATTEMPTS));
        let state = b
            .abandon(jobworker_tests::copy_of(&c.lease), retry_now("boom"))
            .await
            .unwrap();
        let expected = if attempt < DEFAULT_MAX_ATTEMPTS {
            JobState::Ready
        } else {
            JobState::Trashed
        };
        assert_eq!(state, expected, "after attempt {attempt}");
    }
    let trashed = b.show(&q, &id).await.unwrap();
    assert_eq!(
        (trashed.name.as_str(), trashed.attempts),
        ("flaky", DEFAULT_MAX_ATTEMPTS)
    );
}

#[tokio::test]
async fn the_indexer_leaves_a_lean_job_as_it_is() {
    let (b, q) = board_and_queue("lean-index").await;
    let id = b.post(&q, NewJob::new("indexed-once")).await.unwrap();
    b.index_foreign(&q).await.unwrap();
    assert!(
        !hashed(&b, &q, id.as_str()).await,
        "the indexer took a lean job for taskflow's"
    );
    let c = claim_one(&b, &q).await;
    assert_eq!(c.name, "indexed-once");
    b.consume(jobworker_tests::copy_of(&c.lease)).await.unwrap();
}

/// A job posted with a lean job as its dependency (in its queue and in
/// another) marks the lean job's hash as having dependents: the lean job
/// still reads as its post wrote it, runs with its default attempts, and
/// its consume releases both dependents.
#[tokio::test]
async fn a_lean_job_that_others_depend_on_reads_and_runs_as_posted() {
    let (b, [q, other]) = board_and_queues(["lean-dep", "lean-dep-other"]).await;
    let parent = b.post(&q, NewJob::new("parent")).await.unwrap();
    let posted = created_ms(&b, &q, parent.as_str()).await;
    let here = b
        .post(&q, NewJob::new("here").depends_on(parent.clone()))
        .await
        .unwrap();
    let there = b
        .post(
            &other,
            NewJob::new("there").depends_on_in(q.clone(), parent.clone()),
        )
        .await
        .unwrap();
    assert!(
        hashed(&b, &q, parent.as_str()).await,
        "the dependents' mark is in a hash"
    );

    let shown = b.show(&q, &parent).await.unwrap();
    assert_eq!((shown.name.as_str(), shown.state), ("parent", JobState::Ready));
    assert_eq!((shown.priority, shown.max_attempts), (0, DEFAULT_MAX_ATTEMPTS));
    let history = b.history(&q, &parent).await.unwrap();
    assert_eq!(
        (history[0]["name"].as_str(), history[0]["at"].as_i64()),
        (Some("parent"), Some(posted))
    );

    let c = claim_one(&b, &q).await;
    assert_eq!(
        (c.lease.job(), c.name.as_str(), c.max_attempts),
        (&parent, "parent", DEFAULT_MAX_ATTEMPTS)
    );
    b.consume(jobworker_tests::copy_of(&c.lease)).await.unwrap();
    let done = b.show(&q, &parent).await.unwrap();
    assert_eq!((done.name.as_str(), done.state), ("parent", JobState::Completed));
    assert_eq!(
        event_kinds(&b, &q, &parent).await,
        ["posted", "claimed", "consumed"]
    );
    assert_eq!(claim_one(&b, &q).await.lease.job(), &here);
    assert_eq!(claim_one(&b, &other).await.lease.job(), &there);
}

/// A lean job taskflow claimed and jobworker gives back (`--any-token`)
/// keeps its place behind the jobs posted before it.
#[tokio::test]
async fn a_lean_job_taskflow_claimed_and_given_back_keeps_its_place() {
    let (b, q) = board_and_queue("lean-back").await;
    b.post(&q, NewJob::new("older")).await.unwrap();
    let taken = b.post(&q, NewJob::new("taken")).await.unwrap();
    let lease = claimed_outside(&b, &q, &taken, "taskflow-owner").await;
    b.abandon(lease, Abandon::Release).await.unwrap();
    let shown = b.show(&q, &taken).await.unwrap();
    assert_eq!((shown.name.as_str(), shown.priority), ("taken", 0));
    let got = claim(&b, &q, 2).await;
    assert_eq!(names(&got), ["older", "taken"]);
    for c in got {
        b.consume(jobworker_tests::copy_of(&c.lease)).await.unwrap();
    }

    // Failed there, to retry later: it waits out its delay.
    let failed = b.post(&q, NewJob::new("failed")).await.unwrap();
    let lease = claimed_outside(&b, &q, &failed, "taskflow-owner").await;
    let retry = Abandon::Retry {
        delay: Duration::from_secs(600),
        error: "boom".into(),
    };
    b.abandon(lease, retry).await.unwrap();
    let shown = b.show(&q, &failed).await.unwrap();
    assert_eq!((shown.state, shown.attempts), (JobState::Scheduled, 1));
    let counts = &b.overview(std::slice::from_ref(&q)).await.unwrap()[0].counts;
    assert_eq!((counts.ready, counts.scheduled), (Some(0), Some(1)));
    assert!(claim(&b, &q, 1).await.is_empty());
}

/// A lean job taskflow claimed and jobworker consumes (`--any-token`) is
/// completed once: it leaves the ready index, and no claim meets it
/// again.
#[tokio::test]
async fn a_lean_job_taskflow_claimed_and_consumed_here_is_completed_once() {
    let (b, q) = board_and_queue("lean-done").await;
    let id = b.post(&q, NewJob::new("done-here")).await.unwrap();
    let lease = claimed_outside(&b, &q, &id, "taskflow-owner").await;
    b.consume(lease).await.unwrap();
    assert_eq!(b.show(&q, &id).await.unwrap().state, JobState::Completed);
    let counts = &b.overview(std::slice::from_ref(&q)).await.unwrap()[0].counts;
    assert_eq!((counts.ready, counts.completed), (Some(0), Some(1)));
    assert!(claim(&b, &q, 1).await.is_empty());
    assert_eq!(b.show(&q, &id).await.unwrap().state, JobState::Completed);
    assert_eq!(event_kinds(&b, &q, &id).await, ["posted", "consumed"]);
}

/// A job taskflow claimed whose lease jobworker extends (`--any-token`)
/// counts as claimed, not as ready as well, and a claim leaves it alone.
#[tokio::test]
async fn a_lean_job_taskflow_claimed_and_extended_here_counts_as_claimed_only() {
    let (b, q) = board_and_queue("lean-extend").await;
    let id = b.post(&q, NewJob::new("held-outside")).await.unwrap();
    let lease = claimed_outside(&b, &q, &id, "taskflow-owner").await;
    b.extend(&lease, Duration::from_secs(600)).await.unwrap();
    let counts = &b.overview(std::slice::from_ref(&q)).await.unwrap()[0].counts;
    assert_eq!((counts.ready, counts.claimed), (Some(0), Some(1)));
    assert!(claim(&b, &q, 1).await.is_empty());
    b.consume(lease).await.unwrap();
    assert_eq!(b.show(&q, &id).await.unwrap().state, JobState::Completed);
    assert_eq!(event_kinds(&b, &q, &id).await, ["posted", "consumed"]);
}
