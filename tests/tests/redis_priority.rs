//! Priorities on the Redis board against a real server: claim order, a
//! waiting job's new priority, and taskflow's priority names in the
//! posting (priority changes both backends make are in the feature suite,
//! `tests/src/feature_suite/priority.rs`).

use std::time::Duration;

use jobworker::codec::decode_posting;
use jobworker::{Board, JobState, NewJob, Priority};
use jobworker_tests::features::*;
use redis::AsyncCommands;

#[tokio::test]
async fn higher_priority_is_claimed_first_and_fifo_among_equals() {
    let (b, q) = board_and_queue("prio").await;
    for (name, p) in [
        ("low", Priority::LOW),
        ("n1", Priority::NORMAL),
        ("very-high", Priority::VERY_HIGH),
        ("n2", Priority::NORMAL),
        ("fifty", Priority(50)),
        ("very-low", Priority::VERY_LOW),
        ("n3", Priority::NORMAL),
        ("high", Priority::HIGH),
    ] {
        b.post(&q, NewJob::new(name).priority(p)).await.unwrap();
    }
    let mut order = Vec::new();
    for _ in 0..8 {
        order.push(claim_one(&b, &q).await.name);
    }
    assert_eq!(
        order,
        ["fifty", "very-high", "high", "n1", "n2", "n3", "low", "very-low"]
    );
}

#[tokio::test]
async fn a_waiting_or_scheduled_jobs_new_priority_applies_when_it_becomes_ready() {
    let (b, q) = board_and_queue("prio-wait").await;
    let blocker = b.post(&q, NewJob::new("blocker")).await.unwrap();
    let waiting = b
        .post(
            &q,
            NewJob::new("waiting")
                .priority(Priority::LOW)
                .depends_on(blocker.clone()),
        )
        .await
        .unwrap();
    let scheduled = b
        .post(&q, NewJob::new("scheduled").delay(Duration::from_millis(300)))
        .await
        .unwrap();
    b.post(&q, NewJob::new("r1")).await.unwrap();
    b.post(&q, NewJob::new("r2")).await.unwrap();
    assert_eq!(
        b.set_priority(&q, &waiting, Priority::VERY_HIGH).await.unwrap(),
        JobState::Waiting
    );
    assert_eq!(
        b.set_priority(&q, &scheduled, Priority::HIGH).await.unwrap(),
        JobState::Scheduled
    );
    assert_eq!(claim_and_consume(&b, &q).await.name, "blocker");
    let run_at = b.show(&q, &scheduled).await.unwrap().run_at_ms.unwrap_or(0);
    // The scheduled job falls due.
    server_clock_passes(&b, run_at - 1).await;
    let got = claim(&b, &q, 4).await;
    assert_eq!(names(&got), ["waiting", "scheduled", "r1", "r2"]);
    assert_eq!(got[0].priority, Priority::VERY_HIGH);
}

#[tokio::test]
async fn priorities_map_to_taskflow_names_in_the_posting() {
    assert_eq!(Priority::VERY_HIGH.taskflow_name(), "VERY_HIGH");
    assert_eq!(Priority::HIGH.taskflow_name(), "HIGH");
    assert_eq!(Priority::NORMAL.taskflow_name(), "NORMAL");
    assert_eq!(Priority::LOW.taskflow_name(), "LOW");
    assert_eq!(Priority::VERY_LOW.taskflow_name(), "VERY_LOW");
    assert_eq!(Priority(9).taskflow_name(), "VERY_HIGH");
    assert_eq!(Priority(-9).taskflow_name(), "VERY_LOW");
    assert_eq!(Priority::parse("very_high").unwrap(), Priority::VERY_HIGH);
    assert_eq!(Priority::parse("Low").unwrap(), Priority::LOW);
    assert_eq!(Priority::parse("17").unwrap(), Priority(17));
    assert!(Priority::parse("urgent").unwrap_err().is_invalid());
    assert!(Priority::parse("9999999999").unwrap_err().is_invalid());

    let (b, q) = board_and_queue("prio-names").await;
    let keys = b.keys(&q).unwrap();
    let mut con = b.connection();
    let cases = [
        (Priority(9), "VERY_HIGH"),
        (Priority::HIGH, "HIGH"),
        (Priority::NORMAL, "NORMAL"),
        (Priority::LOW, "LOW"),
        (Priority(-9), "VERY_LOW"),
    ];
    let mut ids = Vec::new();
    for (p, name) in cases {
        let id = b.post(&q, NewJob::new(name).priority(p)).await.unwrap();
        let bytes: Vec<u8> = con.hget(keys.listings(), id.as_str()).await.unwrap();
        let posting = decode_posting(&bytes).unwrap();
        assert_eq!(posting.priority.taskflow_name(), name, "posting of {p:?}");
        assert_eq!(
            b.show(&q, &id).await.unwrap().priority,
            p.0,
            "jobworker keeps the exact value"
        );
        ids.push(id);
    }
    // A priority change never rewrites the taskflow posting.
    b.set_priority(&q, &ids[2], Priority::VERY_HIGH).await.unwrap();
    let bytes: Vec<u8> = con.hget(keys.listings(), ids[2].as_str()).await.unwrap();
    assert_eq!(decode_posting(&bytes).unwrap().priority, Priority::NORMAL);
    let first = claim_one(&b, &q).await;
    assert_eq!(first.priority, Priority(9), "claims carry the exact priority");
}
