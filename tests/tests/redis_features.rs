//! The qless-style features of the Redis board against a real server:
//! priorities, delays, recurring jobs, dependencies (within and across
//! queues), failure groups and retries, unique keys, tags, tracking and
//! events, statistics, history, pause and concurrency limits, cancel and
//! the stored configuration; plus bounded memory over 200,000 jobs.

use jobworker_tests::copy_of;
use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures_util::{Stream, StreamExt};
use jobworker::codec::decode_posting;
use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::recurring::RecurringJob;
use jobworker::redis::{RedisBoard, RedisOptions};
use jobworker::schedule::Rule;
use jobworker::{Abandon, Board, Claimed, JobId, JobState, ListFilter, NewJob, Page, Priority};
use jobworker_tests::{shared_redis, unique_queue, wait_until};
use redis::AsyncCommands;
use serde_json::Value;
use tokio::time::Instant;

const LONG: Duration = Duration::from_secs(60);
const DAY_MS: i64 = 86_400_000;

async fn board() -> RedisBoard {
    RedisBoard::connect(shared_redis().url())
        .await
        .expect("connect to the test redis-server")
}

/// A board whose prefix (config key, event channels, namespaces) is its own.
async fn private_prefix_board(prefix: &str) -> RedisBoard {
    let mut opts = RedisOptions::new(shared_redis().url());
    opts.prefix = prefix.to_owned();
    RedisBoard::with_options(opts).await.unwrap()
}

fn page(limit: usize) -> Page {
    Page { offset: 0, limit }
}

async fn claim(b: &RedisBoard, q: &str, count: usize) -> Vec<Claimed> {
    b.claim(&[q], "w", LONG, count).await.unwrap()
}

async fn claim_one(b: &RedisBoard, q: &str) -> Claimed {
    let mut got = claim(b, q, 1).await;
    assert_eq!(got.len(), 1, "expected one claimable job in {q}");
    got.remove(0)
}

/// Claims until one job comes back (claims only: no reap), or panics.
async fn claim_within(b: &RedisBoard, q: &str, timeout: Duration) -> Claimed {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(c) = claim(b, q, 1).await.into_iter().next() {
            return c;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?}: nothing claimable in {q}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn server_ms(b: &RedisBoard) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query_async(&mut b.connection()).await.unwrap();
    s * 1000 + us / 1000
}

fn names(claimed: &[Claimed]) -> Vec<&str> {
    claimed.iter().map(|c| c.name.as_str()).collect()
}

async fn ids_in(b: &RedisBoard, q: &str, state: JobState) -> BTreeSet<JobId> {
    b.list(q, ListFilter::State(state), page(10_000))
        .await
        .unwrap()
        .into_iter()
        .map(|j| JobId(j.id))
        .collect()
}

fn set<const N: usize>(ids: [&JobId; N]) -> BTreeSet<JobId> {
    ids.into_iter().cloned().collect()
}

// ---------------------------------------------------------------- priorities

#[tokio::test]
async fn higher_priority_is_claimed_first_and_fifo_among_equals() {
    let b = board().await;
    let q = unique_queue("prio");
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
async fn changing_a_ready_jobs_priority_moves_it_at_once() {
    let b = board().await;
    let q = unique_queue("prio-set");
    let mut ids = Vec::new();
    for name in ["a", "b", "c", "d"] {
        ids.push(b.post(&q, NewJob::new(name)).await.unwrap());
    }
    assert_eq!(
        b.set_priority(&q, &ids[3], Priority::HIGH).await.unwrap(),
        JobState::Ready
    );
    assert_eq!(
        b.set_priority(&q, &ids[0], Priority::LOW).await.unwrap(),
        JobState::Ready
    );
    let listed: Vec<String> = b
        .list(&q, ListFilter::Live, Page::default())
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.name)
        .collect();
    assert_eq!(listed, ["d", "b", "c", "a"], "listing follows the new order");
    let got = claim(&b, &q, 4).await;
    assert_eq!(names(&got), ["d", "b", "c", "a"]);
    assert_eq!(got[0].priority, Priority::HIGH);
    assert_eq!(b.show(&q, &ids[0]).await.unwrap().priority, -1);
}

#[tokio::test]
async fn a_waiting_or_scheduled_jobs_new_priority_applies_when_it_becomes_ready() {
    let b = board().await;
    let q = unique_queue("prio-wait");
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
    let first = claim_one(&b, &q).await;
    assert_eq!(first.name, "blocker");
    b.consume(first.lease).await.unwrap();
    wait_until("the scheduled job falls due", Duration::from_secs(5), || {
        let (b, q, scheduled) = (&b, &q, &scheduled);
        async move { server_ms(b).await >= b.show(q, scheduled).await.unwrap().run_at_ms.unwrap_or(0) }
    })
    .await;
    let got = claim(&b, &q, 4).await;
    assert_eq!(names(&got), ["waiting", "scheduled", "r1", "r2"]);
    assert_eq!(got[0].priority, Priority::VERY_HIGH);
}

#[tokio::test]
async fn priority_changes_are_refused_for_finished_missing_or_out_of_range() {
    let b = board().await;
    let q = unique_queue("prio-bad");
    let id = b.post(&q, NewJob::new("x")).await.unwrap();
    let e = b
        .set_priority(&q, &id, Priority(Priority::LIMIT + 1))
        .await
        .unwrap_err();
    assert!(e.is_invalid(), "{e}");
    let e = b
        .post(&q, NewJob::new("y").priority(Priority(-Priority::LIMIT - 1)))
        .await
        .unwrap_err();
    assert!(e.is_invalid(), "{e}");
    let c = claim_one(&b, &q).await;
    b.consume(c.lease).await.unwrap();
    let e = b.set_priority(&q, &id, Priority::HIGH).await.unwrap_err();
    assert!(e.is_finished(), "{e}");
    let e = b
        .set_priority(&q, &JobId::from("no-such-job"), Priority::HIGH)
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
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

    let b = board().await;
    let q = unique_queue("prio-names");
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

// ------------------------------------------------------------ delay / run_at

#[tokio::test]
async fn a_delayed_job_is_claimable_only_after_its_delay_without_reap() {
    let b = board().await;
    let q = unique_queue("delay");
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
    let c = claim_within(&b, &q, Duration::from_secs(5)).await;
    let at = server_ms(&b).await;
    assert_eq!(*c.lease.job(), id);
    assert!(at >= run_at, "claimed at {at}, before its run-at {run_at}");
}

#[tokio::test]
async fn run_at_a_wall_clock_time_and_in_the_past() {
    let b = board().await;
    let q = unique_queue("run-at");
    let past = b
        .post(
            &q,
            NewJob::new("past").run_at(SystemTime::now() - Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert_eq!(b.state(&q, &past).await.unwrap(), JobState::Ready);
    let c = claim_one(&b, &q).await;
    assert_eq!(*c.lease.job(), past);
    let when = SystemTime::now() + Duration::from_millis(800);
    let future = b.post(&q, NewJob::new("future").run_at(when)).await.unwrap();
    assert_eq!(b.state(&q, &future).await.unwrap(), JobState::Scheduled);
    let when_ms = when.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis() as i64;
    // The board schedules the time left on the server's clock (the same
    // clock as this host's here, to within the post's round trip).
    let run_at = b.show(&q, &future).await.unwrap().run_at_ms.unwrap();
    assert!((run_at - when_ms).abs() < 250, "run_at {run_at} vs {when_ms}");
    assert!(claim(&b, &q, 10).await.is_empty());
    let c = claim_within(&b, &q, Duration::from_secs(5)).await;
    assert_eq!(*c.lease.job(), future);
    assert!(server_ms(&b).await >= run_at);
}

#[tokio::test]
async fn wait_wakes_when_a_delayed_job_falls_due() {
    let b = board().await;
    let q = unique_queue("delay-wait");
    b.post(&q, NewJob::new("later").delay(Duration::from_millis(400)))
        .await
        .unwrap();
    let start = Instant::now();
    assert!(b.wait(&[&q], Duration::from_secs(5)).await.unwrap());
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "wait returned after {waited:?}"
    );
    claim_within(&b, &q, Duration::from_secs(2)).await;
}

// ------------------------------------------------------------------ recurring

#[tokio::test]
async fn an_interval_template_spawns_runs_on_claim() {
    let b = board().await;
    let q = unique_queue("recur");
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

    let c = claim_within(&b, &q, Duration::from_secs(5)).await;
    assert_eq!(c.name, "tick");
    assert_eq!(c.priority, Priority::HIGH);
    assert_eq!(
        jobworker::codec::value_to_json(&c.args),
        serde_json::json!(["hello", 7])
    );
    let info = b.show(&q, c.lease.job()).await.unwrap();
    assert_eq!(info.tags, ["periodic"]);
    let first = c.lease.job().clone();
    b.consume(c.lease).await.unwrap();

    // Later slots keep coming, one per interval.
    let c2 = claim_within(&b, &q, Duration::from_secs(5)).await;
    assert_eq!(c2.name, "tick");
    assert_ne!(*c2.lease.job(), first);
    let now = server_ms(&b).await;
    let listed = b.recurring(&q).await.unwrap();
    assert!(listed[0].runs >= 2, "{listed:?}");
    assert!(
        listed[0].next_ms > now - 200 && listed[0].next_ms <= now + 200,
        "next slot {} vs now {now}",
        listed[0].next_ms
    );
}

#[tokio::test]
async fn updating_a_template_keeps_its_next_slot_unless_the_rule_or_offset_changes() {
    let b = board().await;
    let q = unique_queue("recur-upd");
    let hour = Rule::every(Duration::from_secs(3600)).unwrap();
    let now = server_ms(&b).await;
    let id = b
        .recur(
            &q,
            RecurringJob::new("nightly", hour.clone())
                .id("nightly")
                .offset(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    assert_eq!(id, "nightly");
    let first = b.recurring(&q).await.unwrap().remove(0);
    assert!(
        (now + 600_000..now + 602_000).contains(&first.next_ms),
        "offset: next {} vs now {now}",
        first.next_ms
    );

    tokio::time::sleep(Duration::from_millis(20)).await;
    b.recur(
        &q,
        RecurringJob::new("nightly-v2", hour.clone())
            .id("nightly")
            .offset(Duration::from_secs(600))
            .priority(Priority::HIGH)
            .tag("v2")
            .backlog(5),
    )
    .await
    .unwrap();
    let same = b.recurring(&q).await.unwrap();
    assert_eq!(same.len(), 1, "same id: an update, not a second template");
    let same = &same[0];
    assert_eq!(same.next_ms, first.next_ms, "same rule and offset keep the slot");
    assert_eq!(
        (same.name.as_str(), same.priority, same.backlog),
        ("nightly-v2", 1, 5)
    );
    assert_eq!(same.tags, ["v2"]);

    b.recur(
        &q,
        RecurringJob::new("nightly", Rule::every(Duration::from_secs(7200)).unwrap())
            .id("nightly")
            .offset(Duration::from_secs(600)),
    )
    .await
    .unwrap();
    let changed = b.recurring(&q).await.unwrap().remove(0);
    assert!(changed.next_ms > first.next_ms, "a new rule starts a new count");
    assert_eq!(changed.rule, "every 2h");
    assert!(changed.tags.is_empty(), "tags are replaced, not merged");

    b.recur(
        &q,
        RecurringJob::new("nightly", Rule::every(Duration::from_secs(7200)).unwrap())
            .id("nightly")
            .offset(Duration::from_secs(60)),
    )
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
    let b = board().await;
    let q = unique_queue("recur-del");
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
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(claim(&b, &q, 10).await.is_empty());
    assert_eq!(b.spawn_due(&q).await.unwrap(), 0);
    assert_eq!(b.job_count(&q).await.unwrap(), 0);
}

#[tokio::test]
async fn cron_templates_take_a_time_zone_and_find_the_right_next_slot() {
    let b = board().await;
    let q = unique_queue("cron");
    // Asia/Tokyo is UTC+9 all year: 09:00 there is 00:00 UTC.
    b.recur(
        &q,
        RecurringJob::new("tokyo", Rule::cron("0 9 * * *", "Asia/Tokyo").unwrap()).id("tokyo"),
    )
    .await
    .unwrap();
    // Asia/Kolkata is UTC+5:30 all year: 14:30 there is 09:00 UTC.
    b.recur(
        &q,
        RecurringJob::new("kolkata", Rule::cron("30 14 * * *", "Asia/Kolkata").unwrap()).id("kolkata"),
    )
    .await
    .unwrap();
    let now = server_ms(&b).await;
    let all: BTreeMap<String, _> = b
        .recurring(&q)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.id.clone(), r))
        .collect();
    let tokyo = &all["tokyo"];
    assert_eq!(tokyo.rule, "cron '0 9 * * *' in Asia/Tokyo");
    assert_eq!(tokyo.next_ms.rem_euclid(DAY_MS), 0, "09:00 Tokyo is 00:00 UTC");
    assert!(tokyo.next_ms > now - 1000 && tokyo.next_ms <= now + DAY_MS);
    let kolkata = &all["kolkata"];
    assert_eq!(kolkata.next_ms.rem_euclid(DAY_MS), 9 * 3_600_000);
    assert!(kolkata.next_ms > now - 1000 && kolkata.next_ms <= now + DAY_MS);

    // Europe/Paris has DST: 09:00 there is 07:00 or 08:00 UTC.
    let paris = Rule::cron("0 9 * * *", "Europe/Paris").unwrap();
    let next = paris.next_after(now).unwrap();
    assert!([7, 8].contains(&(next.rem_euclid(DAY_MS) / 3_600_000)), "{next}");

    for (expr, tz) in [
        ("0 9 * * *", "Mars/Olympus_Mons"),
        ("61 * * * *", "UTC"),
        ("not cron", "UTC"),
        ("0 0 30 2 *", "UTC"),
    ] {
        let e = Rule::cron(expr, tz).unwrap_err();
        assert!(e.is_invalid(), "{expr} in {tz}: {e}");
    }
    assert!(Rule::every(Duration::ZERO).unwrap_err().is_invalid());
    let e = b
        .recur(
            &q,
            RecurringJob::new("x", Rule::every(Duration::from_secs(1)).unwrap()).backlog(0),
        )
        .await
        .unwrap_err();
    assert!(e.is_invalid(), "{e}");
}

#[tokio::test]
async fn a_cron_template_with_seconds_spawns_on_claim() {
    let b = board().await;
    let q = unique_queue("cron-run");
    b.recur(
        &q,
        RecurringJob::new("each-second", Rule::cron("* * * * * *", "UTC").unwrap()),
    )
    .await
    .unwrap();
    let next = b.recurring(&q).await.unwrap()[0].next_ms;
    assert_eq!(next % 1000, 0, "cron slots are whole seconds");
    let c = claim_within(&b, &q, Duration::from_secs(5)).await;
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
    // About 15 slots go by with nobody claiming.
    tokio::time::sleep(Duration::from_millis(1500)).await;
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

// --------------------------------------------------------------- dependencies

#[tokio::test]
async fn a_same_queue_chain_runs_in_order() {
    let b = board().await;
    let q = unique_queue("chain");
    let a = b.post(&q, NewJob::new("a")).await.unwrap();
    let bb = b.post(&q, NewJob::new("b").depends_on(a.clone())).await.unwrap();
    let c = b.post(&q, NewJob::new("c").depends_on(bb.clone())).await.unwrap();
    assert_eq!(b.state(&q, &a).await.unwrap(), JobState::Ready);
    assert_eq!(b.state(&q, &bb).await.unwrap(), JobState::Waiting);
    assert_eq!(b.state(&q, &c).await.unwrap(), JobState::Waiting);
    assert_eq!(ids_in(&b, &q, JobState::Waiting).await, set([&bb, &c]));
    assert_eq!(
        b.job_count(&q).await.unwrap(),
        1,
        "waiting jobs are not in the listings"
    );

    for (expect, next) in [(&a, Some(&bb)), (&bb, Some(&c)), (&c, None)] {
        let mut got = claim(&b, &q, 10).await;
        assert_eq!(got.len(), 1, "only the head of the chain is claimable");
        assert_eq!(got[0].lease.job(), expect);
        if let Some(next) = next {
            assert_eq!(b.state(&q, next).await.unwrap(), JobState::Waiting);
        }
        b.consume(got.remove(0).lease).await.unwrap();
        if let Some(next) = next {
            assert_eq!(b.state(&q, next).await.unwrap(), JobState::Ready);
        }
    }
    let events: Vec<String> = b
        .history(&q, &c)
        .await
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events, ["posted", "released", "claimed", "consumed"]);
}

#[tokio::test]
async fn a_cross_queue_dependency_is_released_when_consumed() {
    let b = board().await;
    let q1 = unique_queue("xq-a");
    let q2 = unique_queue("xq-b");
    let a = b.post(&q1, NewJob::new("a")).await.unwrap();
    let d = b
        .post(&q2, NewJob::new("d").depends_on_in(&q1, a.clone()))
        .await
        .unwrap();
    assert_eq!(b.state(&q2, &d).await.unwrap(), JobState::Waiting);
    assert!(claim(&b, &q2, 10).await.is_empty());
    let c = claim_one(&b, &q1).await;
    assert!(claim(&b, &q2, 10).await.is_empty(), "a claim is not a consume");
    b.consume(c.lease).await.unwrap();
    assert_eq!(b.state(&q2, &d).await.unwrap(), JobState::Ready);
    assert_eq!(*claim_one(&b, &q2).await.lease.job(), d);
}

#[tokio::test]
async fn a_job_waits_for_all_of_its_dependencies() {
    let b = board().await;
    let q1 = unique_queue("all-a");
    let q2 = unique_queue("all-b");
    let x = b.post(&q1, NewJob::new("x")).await.unwrap();
    let y = b.post(&q2, NewJob::new("y")).await.unwrap();
    let d = b
        .post(
            &q2,
            NewJob::new("d")
                .depends_on_in(&q1, x.clone())
                .depends_on(y.clone()),
        )
        .await
        .unwrap();
    let cy = claim_one(&b, &q2).await;
    assert_eq!(*cy.lease.job(), y);
    b.consume(cy.lease).await.unwrap();
    assert_eq!(
        b.state(&q2, &d).await.unwrap(),
        JobState::Waiting,
        "x is still due"
    );
    assert!(claim(&b, &q2, 10).await.is_empty());
    let cx = claim_one(&b, &q1).await;
    b.consume(cx.lease).await.unwrap();
    assert_eq!(b.state(&q2, &d).await.unwrap(), JobState::Ready);
    assert_eq!(*claim_one(&b, &q2).await.lease.job(), d);
}

#[tokio::test]
async fn a_dependency_already_consumed_leaves_the_job_ready_at_once() {
    let b = board().await;
    let q1 = unique_queue("done-a");
    let q2 = unique_queue("done-b");
    let a = b.post(&q1, NewJob::new("a")).await.unwrap();
    let c = claim_one(&b, &q1).await;
    b.consume(c.lease).await.unwrap();
    let same = b
        .post(&q1, NewJob::new("same").depends_on(a.clone()))
        .await
        .unwrap();
    let other = b
        .post(&q2, NewJob::new("other").depends_on_in(&q1, a.clone()))
        .await
        .unwrap();
    assert_eq!(b.state(&q1, &same).await.unwrap(), JobState::Ready);
    assert_eq!(b.state(&q2, &other).await.unwrap(), JobState::Ready);
    assert_eq!(*claim_one(&b, &q1).await.lease.job(), same);
    assert_eq!(*claim_one(&b, &q2).await.lease.job(), other);
}

#[tokio::test]
async fn a_missing_dependency_fails_the_post_and_leaves_nothing_behind() {
    let b = board().await;
    let q1 = unique_queue("miss-a");
    let q2 = unique_queue("miss-b");
    let e = b
        .post(&q1, NewJob::new("x").id("dep-same").depends_on("no-such-job"))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert!(e.message().contains("no-such-job"), "{e}");
    assert!(b.state(&q1, &"dep-same".into()).await.unwrap_err().is_not_found());

    let e = b
        .post(
            &q2,
            NewJob::new("y").id("dep-cross").depends_on_in(&q1, "no-such-job"),
        )
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert!(e.message().contains("no-such-job"), "{e}");
    let left = b.state(&q2, &"dep-cross".into()).await;
    assert!(
        matches!(&left, Err(e) if e.is_not_found()) || matches!(left, Ok(JobState::Cancelled)),
        "the failed post left {left:?}"
    );
    assert_eq!(b.job_count(&q2).await.unwrap(), 0);
    assert!(ids_in(&b, &q2, JobState::Waiting).await.is_empty());
    assert!(claim(&b, &q2, 10).await.is_empty());

    // The same id can be posted again once its dependency exists.
    let a = b.post(&q1, NewJob::new("a")).await.unwrap();
    let again = b
        .post(&q2, NewJob::new("y").id("dep-cross").depends_on_in(&q1, a))
        .await
        .unwrap();
    assert_eq!(b.state(&q2, &again).await.unwrap(), JobState::Waiting);
}

#[tokio::test]
async fn cancel_is_refused_with_dependents_and_cancels_the_chain_with_them() {
    let b = board().await;
    let q1 = unique_queue("cx-a");
    let q2 = unique_queue("cx-b");
    let a = b.post(&q1, NewJob::new("a")).await.unwrap();
    let bb = b
        .post(&q2, NewJob::new("b").depends_on_in(&q1, a.clone()))
        .await
        .unwrap();
    let c = b
        .post(&q1, NewJob::new("c").depends_on_in(&q2, bb.clone()))
        .await
        .unwrap();
    let d = b
        .post(&q2, NewJob::new("d").depends_on(bb.clone()))
        .await
        .unwrap();

    let e = b.cancel(&q1, std::slice::from_ref(&a), false).await.unwrap_err();
    assert!(e.is_invalid(), "{e}");
    assert!(e.message().contains(bb.as_str()), "names the dependent: {e}");
    assert_eq!(
        b.state(&q1, &a).await.unwrap(),
        JobState::Ready,
        "nothing changed"
    );
    assert_eq!(b.state(&q2, &bb).await.unwrap(), JobState::Waiting);

    let cancelled: BTreeSet<(String, JobId)> = b
        .cancel(&q1, std::slice::from_ref(&a), true)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let expected: BTreeSet<(String, JobId)> = [
        (q1.clone(), a.clone()),
        (q2.clone(), bb.clone()),
        (q1.clone(), c.clone()),
        (q2.clone(), d.clone()),
    ]
    .into();
    assert_eq!(cancelled, expected);
    for (q, id) in &expected {
        assert_eq!(b.state(q, id).await.unwrap(), JobState::Cancelled, "{q}/{id}");
    }
    assert_eq!(b.job_count(&q1).await.unwrap(), 0);
    assert_eq!(b.job_count(&q2).await.unwrap(), 0);
    assert!(ids_in(&b, &q1, JobState::Waiting).await.is_empty());
    assert!(ids_in(&b, &q2, JobState::Waiting).await.is_empty());
    assert!(claim(&b, &q1, 10).await.is_empty());
    assert!(claim(&b, &q2, 10).await.is_empty());
    assert_eq!(ids_in(&b, &q2, JobState::Cancelled).await, set([&bb, &d]));
}

/// The must-show diamond: A (q1) → B (q1) and C (q2) → D (q2), driven by
/// several concurrent claimers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn diamond_across_two_queues_runs_in_dependency_order() {
    let b = board().await;
    let q1 = unique_queue("diamond-1");
    let q2 = unique_queue("diamond-2");
    let a = b.post(&q1, NewJob::new("A")).await.unwrap();
    let bb = b.post(&q1, NewJob::new("B").depends_on(a.clone())).await.unwrap();
    let c = b
        .post(&q2, NewJob::new("C").depends_on_in(&q1, a.clone()))
        .await
        .unwrap();
    let d = b
        .post(
            &q2,
            NewJob::new("D")
                .depends_on_in(&q1, bb.clone())
                .depends_on(c.clone()),
        )
        .await
        .unwrap();
    assert_eq!(b.state(&q1, &a).await.unwrap(), JobState::Ready);
    for (q, id) in [(&q1, &bb), (&q2, &c), (&q2, &d)] {
        assert_eq!(b.state(q, id).await.unwrap(), JobState::Waiting);
    }

    // (job name, "start" | "done"), in the order claimers saw them; "done"
    // is recorded before the consume that releases dependents.
    let log: Arc<Mutex<Vec<(String, &'static str)>>> = Arc::default();
    let finished = Arc::new(AtomicUsize::new(0));
    let d_seen_waiting = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut tasks = Vec::new();
    for k in 0..4 {
        let (b, q1, q2) = (b.clone(), q1.clone(), q2.clone());
        let (log, finished, d_seen_waiting) = (log.clone(), finished.clone(), d_seen_waiting.clone());
        let (c_id, d_id) = (c.clone(), d.clone());
        tasks.push(tokio::spawn(async move {
            let who = format!("claimer-{k}");
            while finished.load(Ordering::SeqCst) < 4 && Instant::now() < deadline {
                let got = b.claim(&[&q1, &q2], &who, LONG, 1).await.unwrap();
                let Some(job) = got.into_iter().next() else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                log.lock().unwrap().push((job.name.clone(), "start"));
                let work = if job.name == "C" { 400 } else { 30 };
                tokio::time::sleep(Duration::from_millis(work)).await;
                log.lock().unwrap().push((job.name.clone(), "done"));
                b.consume(job.lease).await.unwrap();
                if job.name == "B" {
                    // Read D first: if C is still unconsumed afterwards, it
                    // was when D was read.
                    let d_state = b.state(&q2, &d_id).await.unwrap();
                    let c_state = b.state(&q2, &c_id).await.unwrap();
                    if matches!(c_state, JobState::Ready | JobState::Claimed) {
                        assert_eq!(d_state, JobState::Waiting, "D released with only B consumed");
                        d_seen_waiting.store(true, Ordering::SeqCst);
                    }
                }
                finished.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    assert_eq!(finished.load(Ordering::SeqCst), 4, "not all jobs ran: {log:?}");
    let at = |name: &str, what: &str| {
        let hits: Vec<usize> = log
            .iter()
            .enumerate()
            .filter(|(_, (n, w))| n == name && *w == what)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(hits.len(), 1, "{name} {what} seen {} times: {log:?}", hits.len());
        hits[0]
    };
    assert!(at("A", "done") < at("B", "start"), "{log:?}");
    assert!(at("A", "done") < at("C", "start"), "{log:?}");
    assert!(at("B", "done") < at("D", "start"), "{log:?}");
    assert!(at("C", "done") < at("D", "start"), "{log:?}");
    assert!(
        d_seen_waiting.load(Ordering::SeqCst),
        "D's state was never checked between B's and C's consume: {log:?}"
    );
    for (q, id) in [(&q1, &a), (&q1, &bb), (&q2, &c), (&q2, &d)] {
        assert_eq!(b.state(q, id).await.unwrap(), JobState::Completed, "{id}");
    }
}

// ---------------------------------------------------------- failure groups

#[tokio::test]
async fn trashed_jobs_go_to_failure_groups_by_reason_kind() {
    let b = board().await;
    let q = unique_queue("groups");
    let fatal = b.post(&q, NewJob::new("fatal")).await.unwrap();
    let plain = b.post(&q, NewJob::new("plain")).await.unwrap();
    let slow = b.post(&q, NewJob::new("slow").max_attempts(1)).await.unwrap();
    let flaky = b.post(&q, NewJob::new("flaky").max_attempts(2)).await.unwrap();
    let got = claim(&b, &q, 4).await;
    let lease = |id: &JobId| copy_of(&got.iter().find(|c| c.lease.job() == id).unwrap().lease);
    b.trash(lease(&fatal), "fatal: bad input").await.unwrap();
    b.trash(lease(&plain), "something broke").await.unwrap();
    let to = Abandon::Retry {
        delay: Duration::ZERO,
        error: "Timeout: took too long".into(),
    };
    assert_eq!(b.abandon(lease(&slow), to).await.unwrap(), JobState::Trashed);
    let retry = Abandon::Retry {
        delay: Duration::ZERO,
        error: "flaky failure".into(),
    };
    assert_eq!(
        b.abandon(lease(&flaky), retry.clone()).await.unwrap(),
        JobState::Ready,
        "one attempt of two used"
    );
    let again = claim_one(&b, &q).await;
    assert_eq!((again.attempt, again.max_attempts), (2, 2));
    assert_eq!(b.abandon(again.lease, retry).await.unwrap(), JobState::Trashed);

    let groups: Vec<(String, u64)> = b
        .failed(&q)
        .await
        .unwrap()
        .into_iter()
        .map(|g| {
            assert_eq!(g.queue, q);
            (g.group, g.count)
        })
        .collect();
    assert_eq!(groups[0], ("error".to_owned(), 2), "largest first: {groups:?}");
    let groups: BTreeMap<String, u64> = groups.into_iter().collect();
    assert_eq!(
        groups,
        [("error".into(), 2), ("fatal".into(), 1), ("timeout".into(), 1)].into()
    );
    let errors: BTreeSet<JobId> = b
        .failed_jobs(&q, "error", Page::default())
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(errors, set([&plain, &flaky]));
    assert_eq!(
        b.failed_jobs(&q, "fatal", Page::default()).await.unwrap(),
        std::slice::from_ref(&fatal)
    );
    let info = b.show(&q, &fatal).await.unwrap();
    assert_eq!(info.state, JobState::Trashed);
    assert_eq!(info.group.as_deref(), Some("fatal"));
    assert_eq!(info.reason.as_deref(), Some("fatal: bad input"));
    let info = b.show(&q, &flaky).await.unwrap();
    assert_eq!(info.attempts, 2);
    assert!(
        info.reason
            .as_deref()
            .unwrap_or("")
            .contains("attempts exhausted"),
        "{info:?}"
    );
}

#[tokio::test]
async fn an_expired_lease_with_no_attempts_left_lands_in_the_stalled_group() {
    let b = board().await;
    let q = unique_queue("stalled");
    let id = b.post(&q, NewJob::new("s").max_attempts(1)).await.unwrap();
    b.claim(&[&q], "sleepy", Duration::from_millis(100), 1)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(b.reap(&q).await.unwrap().stalled, 1);
    let info = b.show(&q, &id).await.unwrap();
    assert_eq!(info.state, JobState::Trashed);
    assert_eq!(info.group.as_deref(), Some("stalled"), "{info:?}");
    assert_eq!(b.failed_jobs(&q, "stalled", Page::default()).await.unwrap(), [id]);
}

/// Posts `n` jobs named `name` and trashes them with `reason`.
async fn trashed(b: &RedisBoard, q: &str, name: &str, n: usize, reason: &str) -> Vec<JobId> {
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(b.post(q, NewJob::new(name).max_attempts(3)).await.unwrap());
    }
    for c in claim(b, q, n).await {
        b.trash(c.lease, reason).await.unwrap();
    }
    ids
}

/// A board on the shared server with the trash kept to `count` jobs and
/// `age`.
async fn trash_bound_board(count: usize, age: Duration) -> RedisBoard {
    let mut opts = RedisOptions::new(shared_redis().url());
    opts.trash_count = count;
    opts.trash_age = age;
    RedisBoard::with_options(opts).await.unwrap()
}

/// Seen: the trash (dead letter) grew forever. Now claims prune it to its
/// count, oldest first, keeping the failure groups' counts right.
#[tokio::test]
async fn the_trash_is_kept_to_its_count_oldest_first() {
    let b = trash_bound_board(5, jobworker::redis::DEFAULT_TRASH_AGE).await;
    let q = unique_queue("trash-count");
    let mut ids = Vec::new();
    for _ in 0..8 {
        // One at a time, a few ms apart: their trash times (ms) differ.
        ids.extend(trashed(&b, &q, "dead", 1, "fatal: gone").await);
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    for _ in 0..3 {
        claim(&b, &q, 1).await;
    }
    let kept = ids_in(&b, &q, JobState::Trashed).await;
    assert_eq!(
        kept,
        ids[3..].iter().cloned().collect::<BTreeSet<_>>(),
        "the 5 newest stay"
    );
    for id in &ids[..3] {
        let e = b.state(&q, id).await.unwrap_err();
        assert!(e.is_not_found(), "{id} pruned: {e}");
    }
    let groups = b.failed(&q).await.unwrap();
    assert_eq!(groups.iter().map(|g| g.count).sum::<u64>(), 5, "{groups:?}");
    let trash_len: usize = b.connection().hlen(b.keys(&q).unwrap().trash()).await.unwrap();
    assert_eq!(trash_len, 5, "taskflow's trash holds the 5 kept");
}

/// Trashed jobs older than the trash's age go, and a trashed job's id
/// posted again (a new life) is not pruned with its old entry.
#[tokio::test]
async fn the_trash_is_kept_to_its_age_and_spares_a_reposted_id() {
    let b = trash_bound_board(jobworker::redis::DEFAULT_TRASH_COUNT, Duration::from_millis(300)).await;
    let q = unique_queue("trash-age");
    let old = trashed(&b, &q, "dead", 3, "fatal: gone").await;
    let reposted = b.post(&q, NewJob::new("again").id(old[0].clone())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    claim(&b, &q, 1).await.into_iter().for_each(drop);
    assert!(ids_in(&b, &q, JobState::Trashed).await.is_empty());
    assert!(b.failed(&q).await.unwrap().is_empty());
    assert_eq!(
        b.show(&q, &reposted).await.unwrap().name,
        "again",
        "the new life is kept"
    );
}

#[tokio::test]
async fn retry_one_job_resets_its_attempts() {
    let b = board().await;
    let q = unique_queue("retry-one");
    let id = b.post(&q, NewJob::new("r").max_attempts(2)).await.unwrap();
    for _ in 0..2 {
        let c = claim_one(&b, &q).await;
        b.abandon(
            c.lease,
            Abandon::Retry {
                delay: Duration::ZERO,
                error: "fatal-ish: no".into(),
            },
        )
        .await
        .unwrap();
    }
    assert_eq!(b.state(&q, &id).await.unwrap(), JobState::Trashed);
    assert_eq!(b.show(&q, &id).await.unwrap().attempts, 2);
    let results = b.retry(&q, &[id.clone(), "no-such-job".into()]).await.unwrap();
    assert!(results[0].is_ok());
    assert!(results[1].as_ref().unwrap_err().is_not_found());
    let info = b.show(&q, &id).await.unwrap();
    assert_eq!(
        (info.state, info.attempts, info.group),
        (JobState::Ready, 0, None)
    );
    assert!(b.failed(&q).await.unwrap().is_empty(), "the group emptied");
    assert!(
        ids_in(&b, &q, JobState::Trashed).await.is_empty(),
        "gone from taskflow's trash"
    );
    let c = claim_one(&b, &q).await;
    assert_eq!(
        (c.lease.job().clone(), c.attempt, c.max_attempts),
        (id.clone(), 1, 2)
    );
    // Retrying a job that is not trashed is refused.
    assert!(b.retry(&q, &[id]).await.unwrap()[0]
        .as_ref()
        .unwrap_err()
        .is_not_found());
}

#[tokio::test]
async fn retry_a_whole_group_or_every_group() {
    let b = board().await;
    let q = unique_queue("retry-group");
    let fatal = trashed(&b, &q, "f", 2, "fatal: x").await;
    let errors = trashed(&b, &q, "e", 3, "oops").await;
    let crashed = trashed(&b, &q, "c", 1, "crashed: signal 9").await;
    assert_eq!(b.settle_failed(&q, Some("error"), false).await.unwrap(), 3);
    for id in &errors {
        let info = b.show(&q, id).await.unwrap();
        assert_eq!((info.state, info.attempts), (JobState::Ready, 0));
    }
    let groups: BTreeSet<String> = b.failed(&q).await.unwrap().into_iter().map(|g| g.group).collect();
    assert_eq!(groups, ["crashed".to_owned(), "fatal".to_owned()].into());
    assert_eq!(b.settle_failed(&q, None, false).await.unwrap(), 3);
    assert!(b.failed(&q).await.unwrap().is_empty());
    for id in fatal.iter().chain(&crashed) {
        assert_eq!(b.state(&q, id).await.unwrap(), JobState::Ready);
    }
    assert_eq!(b.job_count(&q).await.unwrap(), 6);
    assert_eq!(claim(&b, &q, 10).await.len(), 6);
}

#[tokio::test]
async fn purge_deletes_trashed_jobs_for_good() {
    let b = board().await;
    let q = unique_queue("purge");
    let keys = b.keys(&q).unwrap();
    let one = trashed(&b, &q, "p", 1, "fatal: x").await.remove(0);
    let rest = trashed(&b, &q, "p", 3, "boom").await;
    let results = b.purge(&q, &[one.clone(), "no-such-job".into()]).await.unwrap();
    assert!(results[0].is_ok());
    assert!(results[1].as_ref().unwrap_err().is_not_found());
    assert!(b.state(&q, &one).await.unwrap_err().is_not_found());
    assert!(b.history(&q, &one).await.unwrap_err().is_not_found());
    let groups: Vec<String> = b.failed(&q).await.unwrap().into_iter().map(|g| g.group).collect();
    assert_eq!(groups, ["error"]);
    assert_eq!(b.settle_failed(&q, None, true).await.unwrap(), 3);
    assert!(b.failed(&q).await.unwrap().is_empty());
    for id in &rest {
        assert!(b.state(&q, id).await.unwrap_err().is_not_found());
    }
    let mut con = b.connection();
    let trash: usize = con.hlen(keys.trash()).await.unwrap();
    assert_eq!(trash, 0, "taskflow's trash is empty");
    let pattern = format!(
        "{}:jw.job.*",
        keys.namespace.replace('{', "\\{").replace('}', "\\}")
    );
    let left: Vec<String> = con.keys(pattern).await.unwrap();
    assert!(left.is_empty(), "purged jobs left state behind: {left:?}");
}

// ------------------------------------------------------------------- unique

#[tokio::test]
async fn a_unique_key_returns_the_existing_job_until_its_ttl_passes() {
    let b = board().await;
    let q = unique_queue("unique");
    let other_q = unique_queue("unique-other");
    let ttl = Duration::from_millis(500);
    let first = b
        .post(&q, NewJob::new("u").unique("report-42", ttl))
        .await
        .unwrap();
    let dup = b
        .post(&q, NewJob::new("u").args(&1u8).unwrap().unique("report-42", ttl))
        .await
        .unwrap();
    assert_eq!(dup, first, "a duplicate returns the existing id");
    assert_eq!(b.job_count(&q).await.unwrap(), 1);
    let many = b
        .post_many(
            &q,
            &[
                NewJob::new("u").unique("report-42", ttl),
                NewJob::new("u").unique("report-43", ttl),
            ],
        )
        .await
        .unwrap();
    assert_eq!(many[0].as_ref().unwrap(), &first);
    assert_ne!(many[1].as_ref().unwrap(), &first, "another key is another job");
    let elsewhere = b
        .post(&other_q, NewJob::new("u").unique("report-42", ttl))
        .await
        .unwrap();
    assert_ne!(elsewhere, first, "unique keys are per queue");
    assert_eq!(b.job_count(&q).await.unwrap(), 2);

    tokio::time::sleep(ttl + Duration::from_millis(100)).await;
    let fresh = b
        .post(&q, NewJob::new("u").unique("report-42", ttl))
        .await
        .unwrap();
    assert_ne!(fresh, first, "the key expired");
    assert_eq!(b.job_count(&q).await.unwrap(), 3);
    let again = b
        .post(&q, NewJob::new("u").unique("report-42", ttl))
        .await
        .unwrap();
    assert_eq!(again, fresh, "the new job holds the key now");
    assert!(b
        .post(&q, NewJob::new("u").unique("has space", ttl))
        .await
        .unwrap_err()
        .is_invalid());
}

// --------------------------------------------------------------------- tags

#[tokio::test]
async fn tags_are_added_removed_found_and_counted() {
    let b = board().await;
    let q = unique_queue("tags");
    let a = b.post(&q, NewJob::new("a").tag("red").tag("blue")).await.unwrap();
    let bb = b.post(&q, NewJob::new("b").tag("red")).await.unwrap();
    let c = b
        .post(&q, NewJob::new("c").tag("red").tag("green"))
        .await
        .unwrap();
    assert_eq!(b.show(&q, &a).await.unwrap().tags, ["red", "blue"]);
    // Tag times are in ms: make a's tagging the most recent one.
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(
        b.tag(&q, &a, &["green", "red"]).await.unwrap(),
        ["red", "blue", "green"],
        "an existing tag is not added twice"
    );
    assert_eq!(
        b.untag(&q, &a, &["red", "nope"]).await.unwrap(),
        ["blue", "green"]
    );
    assert_eq!(b.show(&q, &a).await.unwrap().tags, ["blue", "green"]);

    let red: BTreeSet<JobId> = b
        .tagged(&q, "red", Page::default())
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(red, set([&bb, &c]));
    let green = b.tagged(&q, "green", Page::default()).await.unwrap();
    assert_eq!(green, [a.clone(), c.clone()], "most recently tagged first");
    assert_eq!(
        b.tagged(&q, "green", page(1)).await.unwrap(),
        std::slice::from_ref(&a)
    );
    assert!(b.tagged(&q, "nobody", Page::default()).await.unwrap().is_empty());

    let top = b.top_tags(&q, Page::default()).await.unwrap();
    assert_eq!(top[0], ("red".to_owned(), 2), "{top:?}");
    let top: BTreeMap<String, u64> = top.into_iter().collect();
    assert_eq!(
        top,
        [("red".into(), 2), ("green".into(), 2), ("blue".into(), 1)].into()
    );
    assert_eq!(b.top_tags(&q, page(1)).await.unwrap().len(), 1);

    assert!(b
        .tag(&q, &"no-such-job".into(), &["x"])
        .await
        .unwrap_err()
        .is_not_found());
    assert!(b.tag(&q, &a, &["bad tag"]).await.unwrap_err().is_invalid());
    assert!(b
        .post(&q, NewJob::new("d").tag(""))
        .await
        .unwrap_err()
        .is_invalid());
}

// -------------------------------------------------------- tracking / events

type Events = Pin<Box<dyn Stream<Item = Value> + Send>>;

async fn subscribe(b: &RedisBoard, tracked_only: bool) -> Events {
    Box::pin(b.events(tracked_only).await.unwrap())
}

/// Reads events of queue `q` until `done` says so; panics after `timeout`.
async fn events_until(
    events: &mut Events,
    q: &str,
    timeout: Duration,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let mut got = Vec::new();
    let deadline = Instant::now() + timeout;
    while !done(&got) {
        match tokio::time::timeout_at(deadline, events.next()).await {
            Ok(Some(e)) if e["queue"] == q => got.push(e),
            Ok(Some(_)) => {}
            Ok(None) => panic!("event stream ended; got {got:?}"),
            Err(_) => panic!("timed out after {timeout:?} waiting for events; got {got:?}"),
        }
    }
    got
}

/// Events of queue `q` arriving within `quiet`.
async fn events_within(events: &mut Events, q: &str, quiet: Duration) -> Vec<Value> {
    let mut got = Vec::new();
    let deadline = Instant::now() + quiet;
    while let Ok(Some(e)) = tokio::time::timeout_at(deadline, events.next()).await {
        if e["queue"] == q {
            got.push(e);
        }
    }
    got
}

fn kinds_of<'a>(events: &'a [Value], job: &JobId) -> Vec<&'a str> {
    events
        .iter()
        .filter(|e| e["job"] == job.as_str())
        .map(|e| e["event"].as_str().unwrap_or("?"))
        .collect()
}

#[tokio::test]
async fn the_log_channel_carries_every_event() {
    let b = private_prefix_board(&unique_queue("ev")).await;
    let q = unique_queue("events");
    let mut log = subscribe(&b, false).await;
    let id = b.post(&q, NewJob::new("e")).await.unwrap();
    let c = b.claim(&[&q], "w-events", LONG, 1).await.unwrap().remove(0);
    b.consume(c.lease).await.unwrap();
    let got = events_until(&mut log, &q, Duration::from_secs(5), |got| got.len() >= 3).await;
    assert_eq!(kinds_of(&got, &id), ["posted", "claimed", "consumed"], "{got:?}");
    assert_eq!(got[0]["name"], "e");
    assert_eq!(got[1]["worker"], "w-events");
    assert_eq!(got[1]["token"], 1);
    let times: Vec<i64> = got.iter().map(|e| e["at"].as_i64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

#[tokio::test]
async fn the_tracked_stream_carries_only_tracked_jobs() {
    let b = private_prefix_board(&unique_queue("evt")).await;
    let q = unique_queue("tracked");
    let mut tracked = subscribe(&b, true).await;
    let mut log = subscribe(&b, false).await;
    let a = b.post(&q, NewJob::new("a").track()).await.unwrap();
    let quiet = b.post(&q, NewJob::new("quiet")).await.unwrap();
    let c = b.post(&q, NewJob::new("c")).await.unwrap();
    b.track(&q, &c).await.unwrap();
    let listed: BTreeSet<JobId> = b.tracked(&q).await.unwrap().into_iter().collect();
    assert_eq!(listed, set([&a, &c]));
    for job in claim(&b, &q, 3).await {
        b.consume(job.lease).await.unwrap();
    }
    let mut got = events_until(&mut tracked, &q, Duration::from_secs(5), |got| {
        got.iter().filter(|e| e["event"] == "consumed").count() >= 2
    })
    .await;
    got.extend(events_within(&mut tracked, &q, Duration::from_millis(300)).await);
    assert_eq!(kinds_of(&got, &a), ["posted", "claimed", "consumed"], "{got:?}");
    assert_eq!(kinds_of(&got, &c), ["track", "claimed", "consumed"], "{got:?}");
    assert!(
        kinds_of(&got, &quiet).is_empty(),
        "untracked job on the tracked stream: {got:?}"
    );
    // The log channel has all three.
    let all = events_until(&mut log, &q, Duration::from_secs(5), |got| {
        got.iter().filter(|e| e["event"] == "consumed").count() >= 3
    })
    .await;
    assert_eq!(kinds_of(&all, &quiet), ["posted", "claimed", "consumed"]);

    b.untrack(&q, &c).await.unwrap();
    assert_eq!(b.tracked(&q).await.unwrap(), [a]);
    assert!(b
        .track(&q, &"no-such-job".into())
        .await
        .unwrap_err()
        .is_not_found());
}

// -------------------------------------------------------------------- stats

#[tokio::test]
async fn stats_count_wait_and_run_times_failures_and_retries() {
    let b = board().await;
    let q = unique_queue("stats");
    for _ in 0..3 {
        b.post(&q, NewJob::new("timed")).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..3 {
        let c = claim_one(&b, &q).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
        b.consume(c.lease).await.unwrap();
    }
    let s = b.stats(&q, None).await.unwrap();
    assert_eq!(s.queue, q);
    let today = server_ms(&b).await.div_euclid(DAY_MS);
    assert_eq!(s.day, jobworker::stats::day_name(today));
    assert_eq!(s.wait.count, 3);
    // Waits are about 300, 450 and 600 ms.
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
        let c = claim_one(&b, &q).await;
        b.abandon(
            c.lease,
            Abandon::Retry {
                delay: Duration::ZERO,
                error: "nope".into(),
            },
        )
        .await
        .unwrap();
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

// ------------------------------------------------------------------ history

#[tokio::test]
async fn history_shows_a_jobs_life_in_order() {
    let b = board().await;
    let q = unique_queue("history");
    let id = b.post(&q, NewJob::new("h").max_attempts(3)).await.unwrap();
    b.set_priority(&q, &id, Priority::HIGH).await.unwrap();
    let c1 = b.claim(&[&q], "w1", LONG, 1).await.unwrap().remove(0);
    b.abandon(c1.lease, Abandon::Release).await.unwrap();
    let c2 = b.claim(&[&q], "w2", LONG, 1).await.unwrap().remove(0);
    b.abandon(
        c2.lease,
        Abandon::Retry {
            delay: Duration::ZERO,
            error: "flaky: try again".into(),
        },
    )
    .await
    .unwrap();
    let c3 = b.claim(&[&q], "w3", LONG, 1).await.unwrap().remove(0);
    b.consume(c3.lease).await.unwrap();
    let h = b.history(&q, &id).await.unwrap();
    let kinds: Vec<&str> = h.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "posted",
            "priority",
            "claimed",
            "abandoned",
            "claimed",
            "failed",
            "retried",
            "claimed",
            "consumed"
        ]
    );
    assert_eq!(h[1]["priority"], 1);
    assert_eq!((&h[2]["worker"], &h[2]["token"]), (&"w1".into(), &1.into()));
    assert_eq!((&h[4]["worker"], &h[4]["token"]), (&"w2".into(), &2.into()));
    assert_eq!(
        (&h[5]["reason"], &h[5]["attempt"]),
        (&"flaky: try again".into(), &1.into())
    );
    assert_eq!((&h[7]["worker"], &h[7]["token"]), (&"w3".into(), &3.into()));
    assert_eq!(h[8]["worker"], "w3");
    for e in &h {
        assert_eq!(
            (&e["queue"], &e["job"]),
            (&Value::from(q.as_str()), &Value::from(id.as_str()))
        );
    }
    let times: Vec<i64> = h.iter().map(|e| e["at"].as_i64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(b
        .history(&q, &"no-such-job".into())
        .await
        .unwrap_err()
        .is_not_found());
}

// ----------------------------------------------------- pause / concurrency

#[tokio::test]
async fn a_paused_queue_hands_out_nothing_until_resumed() {
    let b = board().await;
    let q = unique_queue("pause");
    for _ in 0..2 {
        b.post(&q, NewJob::new("p")).await.unwrap();
    }
    assert!(!b.settings(&q).await.unwrap().paused);
    b.pause(&q).await.unwrap();
    assert!(b.settings(&q).await.unwrap().paused);
    assert!(claim(&b, &q, 10).await.is_empty(), "claimed from a paused queue");
    b.post(&q, NewJob::new("p")).await.unwrap();
    assert!(claim(&b, &q, 10).await.is_empty());
    assert_eq!(b.job_count(&q).await.unwrap(), 3, "pausing keeps the jobs");
    b.resume(&q).await.unwrap();
    assert!(!b.settings(&q).await.unwrap().paused);
    assert_eq!(claim(&b, &q, 10).await.len(), 3);
}

/// An idle worker waiting on a paused queue should sleep until resume (the
/// resume publishes a wake-up for it), not spin on claims that return
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_on_a_paused_queue_sleeps_until_resumed() {
    let b = board().await;
    let q = unique_queue("pause-wait");
    b.post(&q, NewJob::new("p")).await.unwrap();
    b.pause(&q).await.unwrap();
    let start = Instant::now();
    let waiter = {
        let (b, q) = (b.clone(), q.clone());
        tokio::spawn(async move {
            let woke = b.wait(&[&q], Duration::from_secs(5)).await.unwrap();
            (woke, start.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    b.resume(&q).await.unwrap();
    let (woke, after) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("wait did not return")
        .unwrap();
    assert!(woke);
    assert!(
        after >= Duration::from_millis(450),
        "wait returned after {after:?} on a paused queue: an idle worker would spin on empty claims"
    );
    assert!(
        after < Duration::from_secs(3),
        "resume did not wake the wait ({after:?})"
    );
}

/// Waits in a task until `q` may have work; returns whether it woke and
/// how long it took.
fn spawn_wait(b: &RedisBoard, q: &str) -> tokio::task::JoinHandle<(bool, Duration)> {
    let (b, q) = (b.clone(), q.to_owned());
    tokio::spawn(async move {
        let start = Instant::now();
        let woke = b.wait(&[&q], Duration::from_secs(5)).await.unwrap();
        (woke, start.elapsed())
    })
}

/// An idle worker at the queue's concurrency limit should sleep until a
/// lease is given up (consumed or trashed), not spin on empty claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_at_the_concurrency_limit_sleeps_until_a_lease_is_freed() {
    let b = board().await;
    let q = unique_queue("limit-wait");
    b.set_limit(&q, Some(1)).await.unwrap();
    for _ in 0..3 {
        b.post(&q, NewJob::new("l")).await.unwrap();
    }
    let mut held = claim_one(&b, &q).await.lease;
    for free in ["consume", "trash"] {
        assert!(claim(&b, &q, 1).await.is_empty(), "the limit is reached");
        let waiter = spawn_wait(&b, &q);
        tokio::time::sleep(Duration::from_millis(500)).await;
        match free {
            "consume" => b.consume(held).await.unwrap(),
            _ => b.trash(held, "fatal: no").await.unwrap(),
        }
        let (woke, after) = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("wait did not return")
            .unwrap();
        assert!(woke, "{free}: wait timed out instead of waking");
        assert!(
            after >= Duration::from_millis(450),
            "{free}: wait returned after {after:?} with the limit reached: idle workers would spin"
        );
        assert!(
            after < Duration::from_secs(3),
            "{free} did not wake the wait ({after:?})"
        );
        held = claim_one(&b, &q).await.lease;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_concurrency_limit_caps_leases_across_claimers() {
    let b = board().await;
    let q = unique_queue("limit");
    assert!(b.set_limit(&q, Some(0)).await.unwrap_err().is_invalid());
    b.set_limit(&q, Some(2)).await.unwrap();
    assert_eq!(b.settings(&q).await.unwrap().limit, Some(2));
    let total = 20;
    for _ in 0..total {
        b.post(&q, NewJob::new("l")).await.unwrap();
    }
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
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                // Counted only while the server surely holds the leases:
                // from after the claim to before the consume.
                let now = held.fetch_add(got.len(), Ordering::SeqCst) + got.len();
                max_held.fetch_max(now, Ordering::SeqCst);
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
    for _ in 0..5 {
        b.post(&q, NewJob::new("l")).await.unwrap();
    }
    assert_eq!(claim(&b, &q, 10).await.len(), 5, "no limit once removed");
}

// ------------------------------------------------------------------- cancel

#[tokio::test]
async fn cancel_ready_scheduled_and_waiting_jobs() {
    let b = board().await;
    let q = unique_queue("cancel");
    let ready = b.post(&q, NewJob::new("ready")).await.unwrap();
    let later = b
        .post(&q, NewJob::new("later").delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    let parent = b.post(&q, NewJob::new("parent")).await.unwrap();
    let waiting = b
        .post(&q, NewJob::new("waiting").depends_on(parent.clone()))
        .await
        .unwrap();
    let cancelled = b
        .cancel(&q, &[ready.clone(), later.clone(), waiting.clone()], false)
        .await
        .unwrap();
    assert_eq!(cancelled.len(), 3);
    for id in [&ready, &later, &waiting] {
        assert_eq!(b.state(&q, id).await.unwrap(), JobState::Cancelled);
    }
    assert_eq!(
        ids_in(&b, &q, JobState::Cancelled).await,
        set([&ready, &later, &waiting])
    );
    // The parent lost its only dependent, so it can go alone now.
    let got = claim(&b, &q, 10).await;
    assert_eq!(names(&got), ["parent"]);
    b.consume(copy_of(&got[0].lease)).await.unwrap();
    assert_eq!(b.job_count(&q).await.unwrap(), 0);
    let e = b.cancel(&q, &[parent], false).await.unwrap_err();
    assert!(e.is_finished(), "{e}");
    let e = b.cancel(&q, &[ready], false).await.unwrap_err();
    assert!(e.is_finished(), "cancelling twice: {e}");
    let e = b.cancel(&q, &["no-such-job".into()], false).await.unwrap_err();
    assert!(e.is_not_found(), "{e}");
}

#[tokio::test]
async fn cancelling_a_claimed_job_takes_its_lease_away() {
    let b = board().await;
    let q = unique_queue("cancel-claimed");
    let id = b.post(&q, NewJob::new("running")).await.unwrap();
    let c = b.claim(&[&q], "busy", LONG, 1).await.unwrap().remove(0);
    assert_eq!(
        b.cancel(&q, std::slice::from_ref(&id), false).await.unwrap(),
        [(q.clone(), id.clone())]
    );
    assert_eq!(b.state(&q, &id).await.unwrap(), JobState::Cancelled);
    assert_eq!(b.find_owner(&q, &id).await.unwrap(), None);
    // Every lease verb names the cancel (not "not found" or "not owner"),
    // so a worker that learns of it from a refused extend says why.
    let e = b.extend(&c.lease, LONG).await.unwrap_err();
    assert!(
        e.is_cancelled() && e.is_lease_over(),
        "heartbeat after cancel: {e}"
    );
    assert!(e.to_string().contains("was cancelled"), "{e}");
    let e = b.consume(copy_of(&c.lease)).await.unwrap_err();
    assert!(e.is_cancelled(), "consume after cancel: {e}");
    let e = b.abandon(copy_of(&c.lease), Abandon::Release).await.unwrap_err();
    assert!(e.is_cancelled(), "abandon after cancel: {e}");
    let e = b.trash(c.lease, "fatal: no").await.unwrap_err();
    assert!(e.is_cancelled(), "trash after cancel: {e}");
    assert_eq!(
        b.state(&q, &id).await.unwrap(),
        JobState::Cancelled,
        "still cancelled"
    );
    assert!(claim(&b, &q, 10).await.is_empty());
    let kinds: Vec<String> = b
        .history(&q, &id)
        .await
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        ["posted", "claimed", "cancelled"],
        "the history names the cancel only"
    );
}

// ------------------------------------------------------------------- config

#[tokio::test]
async fn config_is_validated_stored_and_picked_up_by_new_boards() {
    let prefix = unique_queue("cfg");
    let b = private_prefix_board(&prefix).await;
    assert!(b.config().await.unwrap().is_empty());
    for (key, value) in [
        ("history-count", "3"),
        ("history-age", "3600"),
        ("expiry", "30"),
        ("grace", "2.5"),
    ] {
        b.set_config(key, Some(value)).await.unwrap();
    }
    for (key, value) in [
        ("bogus", "1"),
        ("history-count", "-1"),
        ("history-count", "lots"),
        ("history-age", "0"),
        ("history-age", "inf"),
        ("expiry", "abc"),
        ("grace", "-2"),
    ] {
        let e = b.set_config(key, Some(value)).await.unwrap_err();
        assert!(e.is_invalid(), "{key}={value}: {e}");
    }
    assert!(b
        .set_config("bogus", None)
        .await
        .unwrap_err()
        .message()
        .contains("history-count"));
    b.set_config("grace", None).await.unwrap();
    let expected: std::collections::HashMap<String, String> =
        [("history-count", "3"), ("history-age", "3600"), ("expiry", "30")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
    assert_eq!(b.config().await.unwrap(), expected);

    // A new board reads the stored history limits...
    let fresh = private_prefix_board(&prefix).await;
    assert_eq!(fresh.options().history_count, 3);
    assert_eq!(fresh.options().history_age, Duration::from_secs(3600));
    // ...unless the caller chose its own.
    let mut opts = RedisOptions::new(shared_redis().url());
    opts.prefix = prefix.clone();
    opts.history_count = 10;
    let own = RedisBoard::with_options(opts).await.unwrap();
    assert_eq!(own.options().history_count, 10);
    assert_eq!(own.options().history_age, Duration::from_secs(3600));
    // Another prefix has its own configuration.
    assert_eq!(board().await.options().history_count, 50_000);

    // And the new board keeps that many completed jobs.
    let q = unique_queue("cfg-history");
    for _ in 0..12 {
        fresh.post(&q, NewJob::new("h")).await.unwrap();
        let c = claim_one(&fresh, &q).await;
        fresh.consume(c.lease).await.unwrap();
    }
    let kept = fresh
        .list(&q, ListFilter::State(JobState::Completed), page(100))
        .await
        .unwrap()
        .len();
    assert!((3..=4).contains(&kept), "history holds {kept} jobs, configured 3");
}

// ------------------------------------------------------------ bounded memory

async fn used_memory(con: &mut redis::aio::ConnectionManager) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query_async(con).await.unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no used_memory in INFO memory: {info}"))
}

async fn dbsize(con: &mut redis::aio::ConnectionManager) -> usize {
    redis::cmd("DBSIZE").query_async(con).await.unwrap()
}

/// 200,000 jobs through a board with `history_count` 1000 leave it about as
/// small as it started: nothing per job outlives the bounded history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stays_bounded_over_200k_jobs() {
    const JOBS: usize = 200_000;
    const ROUND: usize = 20_000;
    const POST_BATCH: usize = 2_000;
    const HISTORY: usize = 1000;
    let server = RedisServer::start(ServerOptions::default()).expect("start a private redis-server");
    let mut opts = RedisOptions::new(server.url());
    opts.history_count = HISTORY;
    let b = RedisBoard::with_options(opts).await.unwrap();
    let q = "bounded";
    let mut con = b.connection();
    // Load the scripts and create the queue's long-lived keys.
    b.post(q, NewJob::new("warm-up")).await.unwrap();
    let c = claim_one(&b, q).await;
    b.consume(c.lease).await.unwrap();
    let empty = used_memory(&mut con).await;
    let empty_keys = dbsize(&mut con).await;

    let start = std::time::Instant::now();
    let (mut posted, mut consumed, mut peak) = (0, 0, 0);
    let mut drained = Vec::new();
    while posted < JOBS {
        // Post a round in batches, then drain it with claims of 1000.
        for _ in 0..ROUND / POST_BATCH {
            let jobs: Vec<NewJob> = (0..POST_BATCH)
                .map(|i| NewJob::new("m").args_value(rmpv::Value::from((posted + i) as u64)))
                .collect();
            let results = b.post_many(q, &jobs).await.unwrap();
            assert!(results.iter().all(|r| r.is_ok()));
            posted += POST_BATCH;
        }
        peak = peak.max(used_memory(&mut con).await);
        loop {
            let got = b.claim(&[q], "mem", LONG, 1000).await.unwrap();
            if got.is_empty() {
                break;
            }
            let leases: Vec<_> = got.into_iter().map(|c| c.lease).collect();
            let n = leases.len();
            let results = b.consume_many(leases).await;
            assert!(results.iter().all(|r| r.is_ok()));
            consumed += n;
        }
        drained.push(used_memory(&mut con).await);
    }
    let elapsed = start.elapsed();
    assert_eq!(consumed, JOBS);
    assert_eq!(b.job_count(q).await.unwrap(), 0);
    let end = used_memory(&mut con).await;
    let end_keys = dbsize(&mut con).await;
    let history = b
        .list(q, ListFilter::State(JobState::Completed), page(1_000_000))
        .await
        .unwrap()
        .len();
    println!(
        "bounded memory: empty board used_memory {empty} B ({empty_keys} keys); after {JOBS} jobs \
         {end} B ({end_keys} keys, {history} completed kept); drained after each {ROUND} jobs: \
         {drained:?} B; peak with {ROUND} queued {peak} B; {elapsed:.1?}"
    );
    assert!(
        history <= HISTORY + 10,
        "completed history holds {history} jobs, limit {HISTORY}"
    );
    assert!(
        end_keys <= empty_keys + 2 * (HISTORY + 10),
        "{end_keys} keys left (empty board: {empty_keys}): per-job keys leak"
    );
    // Measured: about 2.1 MB empty and 3.4-3.9 MB after (1000 completed
    // jobs kept, about 650 B each, plus up to 0.5 MB of client buffers); a
    // leak of even 16 B per job would add 3 MB.
    let bound = empty + 3 * 1024 * 1024;
    assert!(
        end < bound,
        "used_memory {end} B after {JOBS} jobs, empty {empty} B, bound {bound} B"
    );
    // Once the history is full, more jobs cost nothing more (client
    // buffers move used_memory by up to about 0.5 MB between rounds).
    let (first, last) = (drained[0], drained[drained.len() - 1]);
    assert!(
        last < first + 1024 * 1024,
        "used_memory grew from {first} B after {ROUND} jobs to {last} B after {JOBS}"
    );
}
