//! The operator commands on queues, as a user runs them: the real
//! `jobworker` binary against the shared Redis, each test in its own
//! queue: pause and resume, concurrency limits, stats, failure groups
//! (retry, purge) and recurring templates.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::cli::{now_ms, Cli};
use jobworker_tests::{unique_queue, wait_for_blocking};
use serde_json::Value;

#[test]
fn pause_and_resume_a_queue() {
    let cli = Cli::shared();
    let q = unique_queue("cli-pause");
    let id = cli.post(&q, "p", &[]);
    assert_eq!(cli.text(&["pause", "-q", &q]), format!("paused {q}\n"));
    assert_eq!(
        cli.text(&["claim", "-q", &q, "--owner", "o"]),
        "nothing to claim\n"
    );
    assert!(cli.claim(&q, "o", 5).is_empty());
    let row = cli.queue_row(&q);
    assert_eq!(
        (&row["paused"], &row["listed"]),
        (&true.into(), &1.into()),
        "{row}"
    );
    let table = cli.text(&["queues"]);
    let line = table
        .lines()
        .find(|l| l.starts_with(&q))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(line.contains("yes"), "{line}");

    assert_eq!(cli.json(&["resume", "-q", &q])["result"], "resumed");
    assert_eq!(cli.queue_row(&q)["paused"], false);
    let claimed = cli.text(&["claim", "-q", &q, "--owner", "o"]);
    assert!(
        claimed.starts_with(&format!("claimed {id} (p) in {q} as o")),
        "{claimed}"
    );
}

#[test]
fn concurrency_limit_holds_back_claims() {
    let cli = Cli::shared();
    let q = unique_queue("cli-limit");
    let a = cli.post(&q, "l", &[]);
    let b = cli.post(&q, "l", &[]);
    let c = cli.post(&q, "l", &[]);
    assert_eq!(cli.text(&["limit", "1", "-q", &q]), format!("limit 1 {q}\n"));
    assert_eq!(cli.queue_row(&q)["limit"], 1);

    let claimed = cli.claim(&q, "o", 3);
    assert_eq!(claimed.len(), 1, "the limit caps one claim too: {claimed:?}");
    assert_eq!(claimed[0]["id"], a.as_str());
    assert!(cli.claim(&q, "o2", 1).is_empty(), "one is held already");
    cli.consume(&q, &a, "o", &claimed[0]["token"].to_string());
    cli.claim_one(&q, "o2", &b);

    assert_eq!(cli.json(&["limit", "--none", "-q", &q])["result"], "no limit");
    assert_eq!(cli.queue_row(&q)["limit"], Value::Null);
    cli.claim_one(&q, "o3", &c);

    let err = cli.fails(2, &["limit", "0", "-q", &q]);
    assert!(err.contains("at least 1"), "{err}");
    cli.fails(2, &["limit", "-q", &q]);
    cli.fails(2, &["limit", "2", "--none", "-q", &q]);
}

#[test]
fn stats_count_wait_and_run_times() {
    let cli = Cli::shared();
    let q = unique_queue("cli-stats");
    let empty = cli.json(&["stats", "-q", &q]);
    assert_eq!(
        (&empty["wait"]["count"], &empty["run"]["count"]),
        (&0.into(), &0.into())
    );

    let id = cli.post(&q, "s", &[]);
    let token = cli.claim_one(&q, "o", &id);
    cli.consume(&q, &id, "o", &token);
    let failing = cli.post(&q, "s", &[]);
    let token = cli.claim_one(&q, "o", &failing);
    cli.json(&["trash", &failing, "-q", &q, "--owner", "o", "--token", &token]);

    let s = cli.json(&["stats", "-q", &q]);
    assert_eq!(s["queue"], q.as_str());
    assert_eq!(s["wait"]["count"], 2, "{s}");
    assert_eq!(s["run"]["count"], 1, "{s}");
    assert_eq!(s["failed"], 1, "{s}");
    let buckets: u64 = s["wait"]["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[1].as_u64().unwrap())
        .sum();
    assert_eq!(buckets, 2, "the histogram holds every sample: {s}");
    assert!(s["run"]["mean_ms"].as_f64().unwrap() >= 0.0, "{s}");
    let day = s["day"].as_str().unwrap().to_owned();
    assert!(day.len() == 10 && day.as_bytes()[4] == b'-', "{day}");

    let same = cli.json(&["stats", "-q", &q, "--day", &day]);
    assert_eq!(same["run"]["count"], 1, "--day of today: {same}");
    let old = cli.json(&["stats", "-q", &q, "--day", "2020-01-01"]);
    assert_eq!(
        (&old["day"], &old["wait"]["count"]),
        (&"2020-01-01".into(), &0.into())
    );
    let text = cli.text(&["stats", "-q", &q]);
    assert!(
        text.starts_with(&format!("queue {q}  day {day}  failed 1")) && text.contains("run   count 1"),
        "{text}"
    );
    let err = cli.fails(2, &["stats", "-q", &q, "--day", "2026-13-01"]);
    assert!(err.contains("2026-13-01") && err.contains("YYYY-MM-DD"), "{err}");
    cli.fails(2, &["stats", "-q", &q, "--day", "2026-02-30"]);
    cli.fails(2, &["stats", "-q", &q, "--day", "yesterday"]);
}

#[test]
fn failed_groups_retry_and_purge() {
    let cli = Cli::shared();
    let q = unique_queue("cli-failed");
    assert_eq!(cli.text(&["failed", "-q", &q]), "no failed jobs\n");
    let id = cli.post(&q, "doomed", &[]);
    let other = cli.post(&q, "plain", &[]);
    let trash = |id: &str, token: &str, reason: &str| {
        let args = [
            "trash", id, "-q", &q, "--owner", "o", "--token", token, "--reason", reason,
        ];
        assert_eq!(cli.json(&args)["result"], "trashed");
    };
    let token = cli.claim_one(&q, "o", &id);
    trash(&id, &token, "fatal: bad");
    let token = cli.claim_one(&q, "o", &other);
    trash(&other, &token, "no kind given");

    let groups = cli.json(&["failed", "-q", &q]);
    let mut groups: Vec<(String, String, u64)> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["queue"].as_str().unwrap().to_owned(),
                g["group"].as_str().unwrap().to_owned(),
                g["count"].as_u64().unwrap(),
            )
        })
        .collect();
    groups.sort();
    assert_eq!(
        groups,
        [
            (q.clone(), "error".to_owned(), 1),
            (q.clone(), "fatal".to_owned(), 1)
        ]
    );
    let listed = cli.text(&["failed", "fatal", "-q", &q]);
    assert_eq!(listed, format!("{q}/{id}  doomed  fatal: bad\n"));
    let none = cli.text(&["failed", "no-such-group", "-q", &q]);
    assert!(
        none.starts_with("no failed jobs in group no-such-group"),
        "{none}"
    );
    let shown = cli.json(&["failed", "fatal", "-q", &q]);
    assert_eq!(
        (&shown["id"], &shown["group"], &shown["state"]),
        (&id.as_str().into(), &"fatal".into(), &"trashed".into())
    );
    let table = cli.text(&["failed", "-q", &q]);
    assert!(table.starts_with("QUEUE") && table.contains("fatal"), "{table}");

    assert_eq!(cli.json(&["retry", &id, "-q", &q])["result"], "retried");
    let shown = cli.json(&["show", &id, "-q", &q]);
    assert_eq!(
        (&shown["state"], &shown["attempts"], &shown["group"]),
        (&"ready".into(), &0.into(), &Value::Null)
    );
    let groups = cli.json(&["failed", "-q", &q]);
    assert_eq!(
        groups.as_array().unwrap().len(),
        1,
        "fatal is empty now: {groups}"
    );
    let err = cli.fails(3, &["retry", "no-such-job", "-q", &q]);
    assert!(err.contains("no-such-job"), "{err}");
    let err = cli.fails(3, &["retry", &id, "-q", &q]);
    assert!(
        err.contains("not in the trash"),
        "a ready job is not retried: {err}"
    );
    cli.fails(2, &["retry", "-q", &q]);

    // Group retry, then purge of everything.
    let token = cli.claim_one(&q, "o", &id);
    trash(&id, &token, "fatal: bad again");
    let said = cli.json(&["retry", "--group", "fatal", "-q", &q]);
    assert_eq!(said["result"], "retried 1 jobs of");
    assert_eq!(cli.state(&q, &id), "ready");
    let token = cli.claim_one(&q, "o", &id);
    trash(&id, &token, "fatal: bad for good");
    let said = cli.json(&["purge", "--all", "-q", &q]);
    assert_eq!(said["result"], "purged 2 jobs of");
    assert_eq!(cli.json(&["failed", "-q", &q]), serde_json::json!([]));
    cli.fails(3, &["show", &id, "-q", &q]);
    cli.fails(3, &["show", &other, "-q", &q]);
    cli.fails(3, &["purge", &id, "-q", &q]);
}

#[test]
fn recurring_every_posts_runs_that_claims_pick_up() {
    let cli = Cli::shared();
    let q = unique_queue("cli-recur");
    let added = cli.json(&[
        "recur",
        "add",
        "tick",
        "--every",
        "200ms",
        "--backlog",
        "10",
        "-q",
        &q,
    ]);
    assert_eq!(added["result"], "recurring");
    let tid = added["subject"].as_str().unwrap().to_owned();

    let mut runs = Vec::new();
    wait_for_blocking(
        "three runs of a template every 200 ms",
        Duration::from_secs(20),
        || {
            runs.extend(cli.claim(&q, "o", 20));
            (runs.len() >= 3).then_some(())
        },
    );
    assert!(runs.len() >= 3, "a run every 200 ms: {runs:?}");
    assert!(runs.iter().all(|r| r["name"] == "tick"), "{runs:?}");
    let ids: BTreeSet<&str> = runs.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), runs.len(), "each run is a new job");

    let list = cli.json(&["recur", "list", "-q", &q]);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(
        (&list[0]["id"], &list[0]["name"], &list[0]["backlog"]),
        (&tid.as_str().into(), &"tick".into(), &10.into())
    );
    assert_eq!(list[0]["rule"], "every 200ms");
    let posted = list[0]["runs"].as_u64().unwrap();
    assert!(
        posted >= runs.len() as u64,
        "runs {posted} vs claimed {}",
        runs.len()
    );
    let text = cli.text(&["recur", "list", "-q", &q]);
    let row = text.lines().nth(1).unwrap_or_default();
    assert!(row.starts_with(&tid) && row.contains("tick"), "{text}");

    assert_eq!(
        cli.json(&["recur", "remove", &tid, "-q", &q])["result"],
        "removed"
    );
    assert_eq!(cli.json(&["recur", "list", "-q", &q]), serde_json::json!([]));
    assert_eq!(
        cli.text(&["recur", "list", "-q", &q]),
        format!("no recurring jobs in queue {q}\n")
    );
    let err = cli.fails(3, &["recur", "remove", &tid, "-q", &q]);
    assert!(
        err.contains(&format!("no recurring job {tid} in queue {q}")),
        "{err}"
    );
    cli.claim(&q, "o", 50);
    // What is tested is that time passes without runs: two of its
    // intervals go by on the server's clock.
    let removed = cli.server_ms();
    cli.wait_server_clock_past(removed + 450);
    assert!(cli.claim(&q, "o", 50).is_empty(), "no runs after removal");
    assert!(cli.claim(&q, "o", 50).is_empty(), "no runs after removal");
}

#[test]
fn recurring_cron_offset_and_bad_rules() {
    let cli = Cli::shared();
    let q = unique_queue("cli-cron");
    let err = cli.fails(2, &["recur", "add", "t", "--cron", "x", "-q", &q]);
    assert!(err.contains("cron") && err.contains("'x'"), "{err}");
    let err = cli.fails(
        2,
        &[
            "recur",
            "add",
            "t",
            "--cron",
            "0 9 * * *",
            "--tz",
            "Mars/Olympus",
            "-q",
            &q,
        ],
    );
    assert!(err.contains("Mars/Olympus"), "{err}");
    let err = cli.fails(2, &["recur", "add", "t", "--every", "5x", "-q", &q]);
    assert!(err.contains("5x"), "{err}");
    cli.fails(2, &["recur", "add", "t", "-q", &q]);
    cli.fails(
        2,
        &[
            "recur",
            "add",
            "t",
            "--every",
            "1s",
            "--cron",
            "* * * * *",
            "-q",
            &q,
        ],
    );
    let err = cli.fails(
        2,
        &["recur", "add", "t", "--every", "1s", "--backlog", "0", "-q", &q],
    );
    assert!(err.contains("backlog"), "{err}");
    assert_eq!(cli.json(&["recur", "list", "-q", &q]), serde_json::json!([]));

    let before = now_ms();
    let said = cli.json(&[
        "recur",
        "add",
        "morning",
        "--cron",
        "0 9 * * *",
        "--tz",
        "Europe/Paris",
        "--id",
        "paris-9",
        "-q",
        &q,
        "--tag",
        "daily",
        "--priority",
        "HIGH",
    ]);
    assert_eq!(said["subject"], "paris-9");
    let cron = cli.json(&["recur", "list", "-q", &q])[0].clone();
    assert_eq!(cron["id"], "paris-9");
    assert!(cron["rule"].as_str().unwrap().contains("Europe/Paris"), "{cron}");
    assert_eq!(cron["tags"], serde_json::json!(["daily"]));
    assert_eq!(cron["priority"], 1);
    let next = cron["next_ms"].as_i64().unwrap();
    assert!(
        next > before && next <= before + 86_400_000 + 3_600_000,
        "the next 09:00 in Paris is within a day: {cron}"
    );
    // Paris is UTC+1 or UTC+2: 09:00 there is 08:00 or 07:00 UTC.
    let hour_utc = next.rem_euclid(86_400_000) / 3_600_000;
    assert!([7, 8].contains(&hour_utc), "{cron}");

    // Same --id updates the template instead of adding one.
    cli.json(&[
        "recur",
        "add",
        "evening",
        "--cron",
        "0 21 * * *",
        "--id",
        "paris-9",
        "-q",
        &q,
    ]);
    let list = cli.json(&["recur", "list", "-q", &q]);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["name"], "evening");

    // An offset delays the first run of an interval.
    let later = cli.json(&[
        "recur", "add", "later", "--every", "1s", "--offset", "1h", "-q", &q,
    ]);
    let later = later["subject"].as_str().unwrap().to_owned();
    let list = cli.json(&["recur", "list", "-q", &q]);
    let row = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == later.as_str())
        .unwrap();
    assert!(row["next_ms"].as_i64().unwrap() >= before + 3_500_000, "{row}");
    assert!(cli.claim(&q, "o", 10).is_empty());
    assert!(cli.claim(&q, "o", 10).is_empty(), "nothing is due yet");
}

/// Seen: `post x -q 'a,b'` posted a job no worker could ever take
/// (`--queues 'a,b'` serves queues `a` and `b`). Such a name is refused
/// before anything is written.
#[test]
fn a_queue_name_no_worker_could_serve_is_refused() {
    let cli = Cli::shared();
    let base = unique_queue("cli-sep");
    let lines = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(lines.path(), "{\"n\": 1}\n").unwrap();
    let from = lines.path().to_str().unwrap();
    let bad = format!("{base},b");
    for args in [
        vec!["post", "x", "-q", &bad],
        vec!["post", "x", "--from", from, "-q", &bad],
        vec!["recur", "add", "x", "--every", "1m", "-q", &bad],
    ] {
        let err = cli.fails(2, &args);
        assert!(err.contains("must not contain ','"), "{args:?}: {err}");
    }
    let table = cli.text(&["queues"]);
    assert!(!table.contains(&base), "a refused queue was registered:\n{table}");
}

/// Seen: after `recur add nightly-report -q reports …` (the README's
/// example), `recur list` said "no recurring jobs in queue default",
/// `recur remove ID` "job ID not found in queue default", and `tag find`
/// printed nothing: they looked in queue `default` alone (so did `tag
/// top`). Without `-q` they cover every queue.
#[test]
fn recur_and_tags_without_a_queue_cover_every_queue() {
    let cli = Cli::shared();
    let q = unique_queue("cli-anyq");
    let added = cli.json(&["recur", "add", "report", "--every", "1h", "-q", &q]);
    let tid = added["subject"].as_str().unwrap().to_owned();
    let listed = cli.json(&["recur", "list"]);
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == tid.as_str())
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(row["queue"], q.as_str(), "{row}");
    let table = cli.text(&["recur", "list"]);
    assert!(table.contains(&tid) && table.contains(&q), "{table}");
    assert_eq!(cli.json(&["recur", "remove", &tid])["result"], "removed");
    assert_eq!(cli.json(&["recur", "list", "-q", &q]), serde_json::json!([]));
    let err = cli.fails(3, &["recur", "remove", &tid]);
    assert!(err.contains("not in any queue"), "{err}");
    // The same template id in two queues: which one is meant must be said.
    let other = unique_queue("cli-anyq");
    for queue in [&q, &other] {
        cli.json(&[
            "recur", "add", "report", "--every", "1h", "--id", &tid, "-q", queue,
        ]);
    }
    let err = cli.fails(2, &["recur", "remove", &tid]);
    assert!(err.contains("several queues") && err.contains(&other), "{err}");
    cli.json(&["recur", "remove", &tid, "-q", &q]);
    assert_eq!(cli.json(&["recur", "remove", &tid])["result"], "removed");

    let tag = unique_queue("tag");
    let id = cli.post(&q, "tagged", &["--tag", &tag]);
    assert_eq!(cli.text(&["tag", "find", &tag]), format!("{id}\n"));
    // `tag top` without -q sums the queues' counts.
    cli.post(&other, "tagged", &["--tag", &tag]);
    let count = |args: &[&str]| {
        let top = cli.json(args);
        let pair = top
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p[0] == tag.as_str())
            .cloned();
        pair.unwrap_or_else(|| panic!("{tag} not in {top}"))[1].clone()
    };
    assert_eq!(count(&["tag", "top", "--limit", "100000"]), 2);
    assert_eq!(count(&["tag", "top", "-q", &q]), 1);
}
