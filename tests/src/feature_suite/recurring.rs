//! Recurring jobs: templates are created, updated (same id), listed and
//! deleted; the recurring service's spawn posts a due slot once, with the
//! template's name, arguments, priority, attempts and tags; the backlog
//! caps a catch-up; and spawners racing on many boards post exactly one
//! run per slot.
//!
//! The spawns are called directly ([`Maintenance::spawn_recurring`], what
//! the leader's recurring service calls), so nothing here hangs on an
//! election or on a claim's no-worker path (which only Redis has).

use std::collections::BTreeMap;
use std::time::Duration;

use jobworker::board::{Admin, Maintenance};
use jobworker::recurring::RecurringJob;
use jobworker::schedule::Rule;
use jobworker::{Board, ListFilter, Page, Priority};

use super::{FeatureHarness, LONG, SOON};
use crate::{unique_queue, wait_until};

/// One day in ms.
const DAY_MS: i64 = 86_400_000;

/// Waits until the board's clock passed `ms` (plus what is left until then).
async fn clock_passes<B: Admin>(b: &B, ms: i64) {
    let left = u64::try_from(ms - b.server_ms().await.unwrap()).unwrap_or(0);
    wait_until(
        "the board's clock to pass a slot",
        SOON + Duration::from_millis(left),
        || async { b.server_ms().await.unwrap() > ms },
    )
    .await;
}

/// The template `nightly` named `name`, every `hours` hours from `offset`.
fn nightly(name: &str, hours: u64, offset: Duration) -> RecurringJob {
    let rule = Rule::every(Duration::from_secs(hours * 3600)).unwrap();
    RecurringJob::new(name, rule).id("nightly").offset(offset)
}

/// `recur` with the same id updates the template: its next slot is kept
/// unless the rule or offset changes; tags are replaced; `unrecur` deletes
/// it (and again is not found); a backlog of 0 is refused.
pub async fn templates_are_created_updated_listed_and_deleted<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("recur-upd");
    let ten_minutes = Duration::from_secs(600);
    let now = b.server_ms().await.unwrap();
    let id = b.recur(&q, nightly("nightly", 1, ten_minutes)).await.unwrap();
    assert_eq!(id, "nightly");
    let first = b.recurring(&q).await.unwrap().remove(0);
    assert_eq!(
        (first.name.as_str(), first.rule.as_str(), first.runs),
        ("nightly", "every 1h", 0)
    );
    assert!(
        (now + 600_000..now + 602_000).contains(&first.next_ms),
        "offset: next {} vs now {now}",
        first.next_ms
    );
    // Time passes: a slot computed again now would differ from the first.
    clock_passes(&b, first.next_ms - 600_000 + 20).await;
    let v2 = nightly("nightly-v2", 1, ten_minutes)
        .priority(Priority::HIGH)
        .tag("v2")
        .backlog(5);
    b.recur(&q, v2).await.unwrap();
    let same = b.recurring(&q).await.unwrap();
    assert_eq!(same.len(), 1, "same id: an update, not a second template");
    assert_eq!(
        same[0].next_ms, first.next_ms,
        "same rule and offset keep the slot"
    );
    assert_eq!(
        (same[0].name.as_str(), same[0].priority, same[0].backlog),
        ("nightly-v2", 1, 5)
    );
    assert_eq!(same[0].tags, ["v2"]);

    b.recur(&q, nightly("nightly", 2, ten_minutes)).await.unwrap();
    let changed = b.recurring(&q).await.unwrap().remove(0);
    assert!(changed.next_ms > first.next_ms, "a new rule starts a new count");
    assert_eq!(changed.rule, "every 2h");
    assert!(changed.tags.is_empty(), "tags are replaced, not merged");
    b.recur(&q, nightly("nightly", 2, Duration::from_secs(60)))
        .await
        .unwrap();
    let now = b.server_ms().await.unwrap();
    let moved = b.recurring(&q).await.unwrap().remove(0);
    assert!(
        (now + 58_000..=now + 60_000).contains(&moved.next_ms),
        "a new offset moves the slot: {} vs now {now}",
        moved.next_ms
    );

    let other = b
        .recur(&q, RecurringJob::new("other", Rule::every(LONG).unwrap()))
        .await
        .unwrap();
    let listed: Vec<String> = b.recurring(&q).await.unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(listed, [other.clone(), id.clone()], "listed by next slot");
    b.unrecur(&q, &id).await.unwrap();
    assert_eq!(b.recurring(&q).await.unwrap().len(), 1);
    assert!(b.unrecur(&q, &id).await.unwrap_err().is_not_found());
    let zero = RecurringJob::new("x", Rule::every(Duration::from_secs(1)).unwrap()).backlog(0);
    assert!(b.recur(&q, zero).await.unwrap_err().is_invalid());
}

/// Cron templates find their next slot in their time zone.
pub async fn cron_templates_find_their_next_slot_in_their_time_zone<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("cron");
    // Asia/Tokyo is UTC+9 all year: 09:00 there is 00:00 UTC.
    let tokyo = Rule::cron("0 9 * * *", "Asia/Tokyo").unwrap();
    b.recur(&q, RecurringJob::new("tokyo", tokyo).id("tokyo"))
        .await
        .unwrap();
    // Asia/Kolkata is UTC+5:30 all year: 14:30 there is 09:00 UTC.
    let kolkata = Rule::cron("30 14 * * *", "Asia/Kolkata").unwrap();
    b.recur(&q, RecurringJob::new("kolkata", kolkata).id("kolkata"))
        .await
        .unwrap();
    let now = b.server_ms().await.unwrap();
    let all: BTreeMap<String, _> = b
        .recurring(&q)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.id.clone(), r))
        .collect();
    assert_eq!(all["tokyo"].rule, "cron '0 9 * * *' in Asia/Tokyo");
    assert_eq!(all["tokyo"].next_ms.rem_euclid(DAY_MS), 0);
    assert_eq!(all["kolkata"].next_ms.rem_euclid(DAY_MS), 9 * 3_600_000);
    for r in all.values() {
        assert!(r.next_ms > now - 1000 && r.next_ms <= now + DAY_MS, "{r:?}");
    }
}

/// A due slot is posted once, ready, carrying the template's name,
/// arguments, priority, attempts and tags; the next slot moves one
/// interval on; a deleted template posts nothing.
pub async fn a_due_slot_is_spawned_once_with_the_templates_fields<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("recur-due");
    let hourly = RecurringJob::new("tick", Rule::every(Duration::from_secs(3600)).unwrap())
        .args(&("hello", 7u8))
        .unwrap()
        .priority(Priority::HIGH)
        .max_attempts(4)
        .tag("periodic");
    let tid = b.recur(&q, hourly).await.unwrap();
    let first = b.recurring(&q).await.unwrap().remove(0);
    clock_passes(&b, first.next_ms).await;
    assert_eq!(b.spawn_recurring(&q).await.unwrap(), 1, "the first slot is due");
    assert_eq!(b.spawn_recurring(&q).await.unwrap(), 0, "and posted once");
    assert_eq!(b.job_count(&q).await.unwrap(), 1);
    let t = b.recurring(&q).await.unwrap().remove(0);
    assert_eq!((t.id.as_str(), t.runs), (tid.as_str(), 1));
    assert_eq!(
        t.next_ms,
        first.next_ms + 3_600_000,
        "the next slot is an interval on"
    );

    let c = b.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    assert_eq!((c.name.as_str(), c.priority), ("tick", Priority::HIGH));
    assert_eq!(
        jobworker::codec::value_to_json(&c.args),
        serde_json::json!(["hello", 7])
    );
    let info = b.show(&q, c.lease.job()).await.unwrap();
    assert_eq!(
        (info.tags.as_slice(), info.max_attempts),
        (["periodic".to_owned()].as_slice(), 4)
    );

    let gone = b
        .recur(
            &q,
            RecurringJob::new("gone", Rule::every(Duration::from_millis(50)).unwrap()),
        )
        .await
        .unwrap();
    b.unrecur(&q, &gone).await.unwrap();
    let deleted_at = b.server_ms().await.unwrap();
    clock_passes(&b, deleted_at + 250).await;
    assert_eq!(
        b.spawn_recurring(&q).await.unwrap(),
        0,
        "a deleted template spawns nothing"
    );
    assert_eq!(b.job_count(&q).await.unwrap(), 1);
}

/// Missed slots are caught up, at most `backlog` of them (1 by default),
/// and the next slot is the first after the catch-up.
pub async fn backlog_caps_how_many_missed_runs_are_caught_up<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let (capped, single) = (unique_queue("backlog3"), unique_queue("backlog1"));
    let every = Rule::every(Duration::from_millis(100)).unwrap();
    b.recur(&capped, RecurringJob::new("b3", every.clone()).backlog(3))
        .await
        .unwrap();
    b.recur(&single, RecurringJob::new("b1", every)).await.unwrap();
    // About 15 slots go by with nobody spawning.
    let posted_at = b.server_ms().await.unwrap();
    clock_passes(&b, posted_at + 1500).await;
    let before = b.server_ms().await.unwrap();
    assert_eq!(
        b.spawn_recurring(&capped).await.unwrap(),
        3,
        "backlog 3 posts exactly 3"
    );
    assert_eq!(
        b.spawn_recurring(&single).await.unwrap(),
        1,
        "the default backlog is 1"
    );
    assert_eq!(b.job_count(&capped).await.unwrap(), 3);
    assert_eq!(b.job_count(&single).await.unwrap(), 1);
    let after = b.server_ms().await.unwrap();
    let t = b.recurring(&capped).await.unwrap().remove(0);
    assert_eq!(t.runs, 3);
    assert!(
        t.next_ms > before - 100 && t.next_ms <= after + 100,
        "the next slot {} is the first after the catch-up ({before}..{after})",
        t.next_ms
    );
    let jobs = b.list(&capped, ListFilter::Live, Page::default()).await.unwrap();
    assert!(jobs.iter().all(|j| j.name == "b3"), "{jobs:?}");
}

/// Eight boards spawn at once, round after round, each round once a slot
/// is due: every slot is posted exactly once (the jobs posted are the
/// slots the template's next slot moved over, and what the spawns said
/// they posted).
pub async fn racing_spawners_post_exactly_one_run_per_slot<H: FeatureHarness>(h: &H) {
    const STEP_MS: i64 = 50;
    const ROUNDS: usize = 15;
    let mut boards = Vec::new();
    for _ in 0..8 {
        boards.push(h.board().await);
    }
    let b = boards[0].clone();
    let q = unique_queue("recur-race");
    let every = Rule::every(Duration::from_millis(STEP_MS as u64)).unwrap();
    // A backlog no round outgrows, so that no slot is skipped.
    b.recur(&q, RecurringJob::new("race", every).backlog(5000))
        .await
        .unwrap();
    let first = b.recurring(&q).await.unwrap().remove(0).next_ms;
    let mut said = 0;
    for _ in 0..ROUNDS {
        let next = b.recurring(&q).await.unwrap().remove(0).next_ms;
        clock_passes(&b, next).await;
        let spawns = boards.iter().map(|board| {
            let (board, q) = (board.clone(), q.clone());
            tokio::spawn(async move { board.spawn_recurring(&q).await })
        });
        for spawned in futures_util::future::join_all(spawns).await {
            said += spawned.unwrap().unwrap();
        }
    }
    let t = b.recurring(&q).await.unwrap().remove(0);
    let slots = usize::try_from((t.next_ms - first) / STEP_MS).unwrap();
    assert!(slots >= ROUNDS, "every round had a slot due: {slots}");
    let posted = b.job_count(&q).await.unwrap();
    assert_eq!(posted, slots, "one run per slot (the spawns said {said})");
    assert_eq!((said, t.runs), (slots, slots as u64));
}

/// A catch-up bigger than one transaction can carry (30 runs of 40 kB
/// arguments) still posts every run of the backlog, once.
pub async fn a_large_catch_up_posts_every_run_of_its_backlog<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("recur-big");
    let every = Rule::every(Duration::from_millis(10)).unwrap();
    let big = "x".repeat(40_000);
    let template = RecurringJob::new("big", every).args(&big).unwrap().backlog(30);
    b.recur(&q, template).await.unwrap();
    let first = b.recurring(&q).await.unwrap().remove(0).next_ms;
    // Well over 30 slots go by.
    clock_passes(&b, first + 600).await;
    assert_eq!(b.spawn_recurring(&q).await.unwrap(), 30);
    assert_eq!(b.job_count(&q).await.unwrap(), 30);
    let t = b.recurring(&q).await.unwrap().remove(0);
    assert_eq!(t.runs, 30);
    assert!(
        t.next_ms > first + 600,
        "the next slot is after the catch-up: {}",
        t.next_ms
    );
    let c = b.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    assert_eq!(jobworker::codec::value_to_json(&c.args), serde_json::json!(big));
}
