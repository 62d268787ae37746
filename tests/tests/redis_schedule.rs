//! Jobs that run later on the Redis board against a real server: delays
//! and run-at times (claimable when due, without a reap; `wait` wakes for
//! them) and recurring templates (intervals, cron rules with time zones,
//! updates, deletion, backlog).

use jobworker_tests::copy_of;
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use jobworker::recurring::RecurringJob;
use jobworker::schedule::Rule;
use jobworker::{Board, JobState, ListFilter, NewJob, Page, Priority};
use jobworker_tests::features::*;
use jobworker_tests::unique_queue;
use tokio::time::Instant;

#[tokio::test]
async fn a_delayed_job_is_claimable_only_after_its_delay_without_reap() {
    let (b, q) = board_and_queue("delay").await;
    let before = server_ms(&b).await;
    let id = b
        .post(&q, NewJob::new("later").delay(Duration::from_millis(700)))
        .await
        .unwrap();
    let info = b.show(&q, &id).await.unwrap();
    assert_eq!(info.state, JobState::Scheduled);
    let run_at = info.run_at_ms.expect("a scheduled job has a run-at");
    assert!(
        (before + 690..=before + 2000).contains(&run_at),
        "run_at {run_at} is not 700 ms after {before}"
    );
    assert!(claim(&b, &q, 10).await.is_empty(), "claimed before its delay");
    assert_eq!(b.job_count(&q).await.unwrap(), 1, "taskflow lists it meanwhile");
    let c = claim_within(&b, &q, SOON).await;
    let at = server_ms(&b).await;
    assert_eq!(c.lease.job(), id);
    assert!(at >= run_at, "claimed at {at}, before its run-at {run_at}");
}

#[tokio::test]
async fn run_at_a_wall_clock_time_and_in_the_past() {
    let (b, q) = board_and_queue("run-at").await;
    let past = b
        .post(
            &q,
            NewJob::new("past").run_at(SystemTime::now() - Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert_eq!(b.state(&q, &past).await.unwrap(), JobState::Ready);
    let c = claim_one(&b, &q).await;
    assert_eq!(c.lease.job(), past);
    let when = SystemTime::now() + Duration::from_millis(800);
    let future = b.post(&q, NewJob::new("future").run_at(when)).await.unwrap();
    assert_eq!(b.state(&q, &future).await.unwrap(), JobState::Scheduled);
    let when_ms = when.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis() as i64;
    // The board schedules the time left on the server's clock (the same
    // clock as this host's here, to within the post's round trip).
    let run_at = b.show(&q, &future).await.unwrap().run_at_ms.unwrap();
    assert!((run_at - when_ms).abs() < 250, "run_at {run_at} vs {when_ms}");
    assert!(claim(&b, &q, 10).await.is_empty());
    let c = claim_within(&b, &q, SOON).await;
    assert_eq!(c.lease.job(), future);
    assert!(server_ms(&b).await >= run_at);
}

#[tokio::test]
async fn wait_wakes_when_a_delayed_job_falls_due() {
    let (b, q) = board_and_queue("delay-wait").await;
    b.post(&q, NewJob::new("later").delay(Duration::from_millis(400)))
        .await
        .unwrap();
    let start = Instant::now();
    assert!(b.wait(&[&q], Duration::from_secs(30)).await.unwrap());
    let waited = start.elapsed();
    // Woken by the timer, well before the wait's own end.
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(20),
        "wait returned after {waited:?}"
    );
    claim_within(&b, &q, Duration::from_secs(2)).await;
}

#[tokio::test]
async fn an_interval_template_spawns_runs_on_claim() {
    let (b, q) = board_and_queue("recur").await;
    let tid = b
        .recur(
            &q,
            RecurringJob::new("tick", Rule::every(Duration::from_millis(200)).unwrap())
                .args(&("hello", 7u8))
                .unwrap()
                .priority(Priority::HIGH)
                .tag("periodic"),
        )
        .await
        .unwrap();
    let listed = b.recurring(&q).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, tid);
    assert_eq!(listed[0].name, "tick");
    assert_eq!(listed[0].rule, "every 200ms");
    assert_eq!(listed[0].runs, 0);
    assert_eq!(b.job_count(&q).await.unwrap(), 0, "nothing runs before a claim");

    let c = claim_within(&b, &q, SOON).await;
    assert_eq!(c.name, "tick");
    assert_eq!(c.priority, Priority::HIGH);
    assert_eq!(
        jobworker::codec::value_to_json(&c.args),
        serde_json::json!(["hello", 7])
    );
    let info = b.show(&q, c.lease.job()).await.unwrap();
    assert_eq!(info.tags, ["periodic"]);
    b.consume(copy_of(&c.lease)).await.unwrap();

    // Later slots keep coming, one per interval.
    let c2 = claim_within(&b, &q, SOON).await;
    assert_eq!(c2.name, "tick");
    assert_ne!(c2.lease.job(), c.lease.job());
    let now = server_ms(&b).await;
    let listed = b.recurring(&q).await.unwrap();
    assert!(listed[0].runs >= 2, "{listed:?}");
    assert!(
        listed[0].next_ms > now - 200 && listed[0].next_ms <= now + 200,
        "next slot {} vs now {now}",
        listed[0].next_ms
    );
}

/// The template `nightly` named `name`, every `hours` hours from `offset`.
fn nightly(name: &str, hours: u64, offset: Duration) -> RecurringJob {
    let rule = Rule::every(Duration::from_secs(hours * 3600)).unwrap();
    RecurringJob::new(name, rule).id("nightly").offset(offset)
}

#[tokio::test]
async fn updating_a_template_keeps_its_next_slot_unless_the_rule_or_offset_changes() {
    let (b, q) = board_and_queue("recur-upd").await;
    let ten_minutes = Duration::from_secs(600);
    let now = server_ms(&b).await;
    let id = b.recur(&q, nightly("nightly", 1, ten_minutes)).await.unwrap();
    assert_eq!(id, "nightly");
    let first = b.recurring(&q).await.unwrap().remove(0);
    assert!(
        (now + 600_000..now + 602_000).contains(&first.next_ms),
        "offset: next {} vs now {now}",
        first.next_ms
    );

    // Time passes on the server's clock: a slot computed again now would
    // differ from the first one.
    server_clock_passes(&b, first.next_ms - 600_000 + 20).await;
    let v2 = nightly("nightly-v2", 1, ten_minutes)
        .priority(Priority::HIGH)
        .tag("v2")
        .backlog(5);
    b.recur(&q, v2).await.unwrap();
    let same = b.recurring(&q).await.unwrap();
    assert_eq!(same.len(), 1, "same id: an update, not a second template");
    let same = &same[0];
    assert_eq!(same.next_ms, first.next_ms, "same rule and offset keep the slot");
    assert_eq!(
        (same.name.as_str(), same.priority, same.backlog),
        ("nightly-v2", 1, 5)
    );
    assert_eq!(same.tags, ["v2"]);

    b.recur(&q, nightly("nightly", 2, ten_minutes)).await.unwrap();
    let changed = b.recurring(&q).await.unwrap().remove(0);
    assert!(changed.next_ms > first.next_ms, "a new rule starts a new count");
    assert_eq!(changed.rule, "every 2h");
    assert!(changed.tags.is_empty(), "tags are replaced, not merged");

    b.recur(&q, nightly("nightly", 2, Duration::from_secs(60)))
        .await
        .unwrap();
    let now = server_ms(&b).await;
    let moved = b.recurring(&q).await.unwrap().remove(0);
    assert!(
        (now + 58_000..=now + 60_000).contains(&moved.next_ms),
        "a new offset moves the slot: {} vs now {now}",
        moved.next_ms
    );
}

#[tokio::test]
async fn a_deleted_template_spawns_nothing() {
    let (b, q) = board_and_queue("recur-del").await;
    let id = b
        .recur(
            &q,
            RecurringJob::new("gone", Rule::every(Duration::from_millis(50)).unwrap()),
        )
        .await
        .unwrap();
    b.unrecur(&q, &id).await.unwrap();
    assert!(b.recurring(&q).await.unwrap().is_empty());
    assert!(b.unrecur(&q, &id).await.unwrap_err().is_not_found());
    // What is tested is that time passes without runs: five of its
    // intervals go by on the server's clock.
    let deleted_at = server_ms(&b).await;
    server_clock_passes(&b, deleted_at + 250).await;
    assert!(claim(&b, &q, 10).await.is_empty());
    assert_eq!(b.spawn_due(&q).await.unwrap(), 0);
    assert_eq!(b.job_count(&q).await.unwrap(), 0);
}

#[tokio::test]
async fn a_cron_template_with_seconds_spawns_on_claim() {
    let (b, q) = board_and_queue("cron-run").await;
    b.recur(
        &q,
        RecurringJob::new("each-second", Rule::cron("* * * * * *", "UTC").unwrap()),
    )
    .await
    .unwrap();
    let next = b.recurring(&q).await.unwrap()[0].next_ms;
    assert_eq!(next % 1000, 0, "cron slots are whole seconds");
    let c = claim_within(&b, &q, SOON).await;
    assert_eq!(c.name, "each-second");
}

#[tokio::test]
async fn backlog_caps_how_many_missed_runs_are_caught_up() {
    let b = board().await;
    let capped = unique_queue("backlog3");
    let single = unique_queue("backlog1");
    let every = Rule::every(Duration::from_millis(100)).unwrap();
    b.recur(&capped, RecurringJob::new("b3", every.clone()).backlog(3))
        .await
        .unwrap();
    b.recur(&single, RecurringJob::new("b1", every)).await.unwrap();
    // About 15 slots go by on the server's clock with nobody claiming (the
    // missed slots are what is tested).
    let posted_at = server_ms(&b).await;
    server_clock_passes(&b, posted_at + 1500).await;
    let before = server_ms(&b).await;
    // The claims post the due runs (and may take some of them at once:
    // claimed jobs stay in the listings, so they count either way).
    let got = claim(&b, &capped, 10).await;
    assert!(got.iter().all(|c| c.name == "b3") && got.len() <= 3, "{got:?}");
    claim(&b, &single, 10).await;
    assert_eq!(
        b.job_count(&capped).await.unwrap(),
        3,
        "backlog 3 posts exactly 3"
    );
    assert_eq!(b.job_count(&single).await.unwrap(), 1, "the default backlog is 1");
    let after = server_ms(&b).await;
    let t = b.recurring(&capped).await.unwrap().remove(0);
    assert_eq!(t.runs, 3);
    assert!(
        t.next_ms > before && t.next_ms <= after + 100,
        "the next slot {} is the first after the catch-up ({before}..{after})",
        t.next_ms
    );
    let names: BTreeSet<String> = b
        .list(&capped, ListFilter::Live, Page::default())
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.name)
        .collect();
    assert_eq!(names, ["b3".to_owned()].into());
}
