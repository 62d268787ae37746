//! The operator commands on single jobs, as a user runs them: the real
//! `jobworker` binary against the shared Redis, each test in its own
//! queue: tags, priority, unique keys, tracking and a job's history.

mod common;

use common::cli::Cli;
use jobworker_tests::unique_queue;

#[test]
fn tags_add_find_top_remove() {
    let cli = Cli::shared();
    let q = unique_queue("cli-tags");
    let a = cli.post(&q, "t", &["--tag", "alpha", "--tag", "beta"]);
    let b = cli.post(&q, "t", &["--tag", "alpha"]);
    let c = cli.post(&q, "t", &[]);

    let shown = cli.json(&["show", &a, "-q", &q]);
    assert_eq!(shown["tags"], serde_json::json!(["alpha", "beta"]));
    assert_eq!(
        cli.json(&["tag", "find", "alpha", "-q", &q]),
        serde_json::json!([b, a]),
        "most recently tagged first"
    );
    assert_eq!(cli.text(&["tag", "find", "beta", "-q", &q]), format!("{a}\n"));
    assert_eq!(
        cli.json(&["tag", "find", "gamma", "-q", &q]),
        serde_json::json!([])
    );
    assert_eq!(
        cli.json(&["tag", "top", "-q", &q]),
        serde_json::json!([["alpha", 2], ["beta", 1]])
    );
    let top = cli.text(&["tag", "top", "-q", &q]);
    let top: Vec<Vec<&str>> = top.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(top, [["2", "alpha"], ["1", "beta"]]);

    let added = cli.json(&["tag", "add", &c, "gamma", "alpha", "-q", &q]);
    assert_eq!(added["tags"], serde_json::json!(["gamma", "alpha"]));
    assert_eq!(
        cli.json(&["tag", "top", "-q", &q, "--limit", "1"]),
        serde_json::json!([["alpha", 3]])
    );
    let removed = cli.json(&["tag", "remove", &a, "alpha", "-q", &q]);
    assert_eq!(removed, serde_json::json!({ "id": a, "tags": ["beta"] }));
    assert_eq!(
        cli.json(&["tag", "find", "alpha", "-q", &q]),
        serde_json::json!([c, b])
    );
    assert_eq!(
        cli.json(&["show", &a, "-q", &q])["tags"],
        serde_json::json!(["beta"])
    );
    assert_eq!(
        cli.text(&["tag", "remove", &a, "beta", "-q", &q]),
        format!("{a} tags: \n")
    );
    assert_eq!(
        cli.json(&["tag", "top", "-q", &q]),
        serde_json::json!([["alpha", 2], ["gamma", 1]]),
        "a tag no job carries is gone from the top"
    );

    let err = cli.fails(3, &["tag", "add", "no-such-job", "x", "-q", &q]);
    assert!(err.contains("no-such-job"), "{err}");
    let err = cli.fails(2, &["tag", "add", &a, "two words", "-q", &q]);
    assert!(err.contains("two words"), "{err}");
    let err = cli.fails(2, &["post", "t", "-q", &q, "--tag", "two words"]);
    assert!(err.contains("two words"), "{err}");
}

#[test]
fn priority_reorders_ready_jobs_and_refuses_finished_ones() {
    let cli = Cli::shared();
    let q = unique_queue("cli-prio");
    let first = cli.post(&q, "p", &[]);
    let second = cli.post(&q, "p", &[]);
    let third = cli.post(&q, "p", &[]);
    assert_eq!(
        cli.text(&["priority", &third, "10", "-q", &q]),
        format!("priority 10 ({}) {third}\n", "ready")
    );
    let changed = cli.json(&["priority", &second, "HIGH", "-q", &q]);
    assert_eq!(changed["subject"], second.as_str());
    assert_eq!(cli.json(&["show", &third, "-q", &q])["priority"], 10);
    assert_eq!(
        cli.ids(&["list", "-q", &q]),
        [third.as_str(), second.as_str(), first.as_str()]
    );
    let claimed = cli.claim(&q, "o", 3);
    let order: Vec<&str> = claimed.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(
        order,
        [&third, &second, &first],
        "claims follow the new priorities"
    );
    assert_eq!(claimed[0]["priority"], 10);

    cli.consume(&q, &third, "o", &claimed[0]["token"].to_string());
    let err = cli.fails(3, &["priority", &third, "5", "-q", &q]);
    assert!(err.contains(&third) && err.contains("completed"), "{err}");
    let err = cli.fails(3, &["priority", "no-such-job", "5", "-q", &q]);
    assert!(err.contains("no-such-job"), "{err}");
    let err = cli.fails(2, &["priority", &first, "URGENT", "-q", &q]);
    assert!(err.contains("URGENT"), "{err}");

    // A waiting job takes a new priority too, and a negative one parses.
    let waiting = cli.post(&q, "w", &["--depends", &first]);
    let said = cli.json(&["priority", &waiting, "-3", "-q", &q]);
    assert_eq!(said["result"], "priority -3 (waiting)");
    assert_eq!(cli.json(&["show", &waiting, "-q", &q])["priority"], -3);
}

#[test]
fn unique_key_returns_the_existing_job() {
    let cli = Cli::shared();
    let q = unique_queue("cli-unique");
    let a = cli.post(&q, "u", &["--unique", "report-1"]);
    let again = cli.json(&["post", "u", "-q", &q, "--unique", "report-1"]);
    assert_eq!(again["id"], a.as_str());
    let other = cli.post(&q, "u", &["--unique", "report-2"]);
    assert_ne!(other, a);
    assert_eq!(
        cli.ids(&["list", "-q", &q]).len(),
        2,
        "the second post added no job"
    );

    let short = cli.post(&q, "u", &["--unique", "brief", "--unique-ttl", "1"]);
    let posted = cli.server_ms();
    assert_eq!(cli.post(&q, "u", &["--unique", "brief"]), short);
    // The key's TTL (1 s) passes on the server's clock: its expiry is tested.
    cli.wait_server_clock_past(posted + 1000);
    assert_ne!(
        cli.post(&q, "u", &["--unique", "brief"]),
        short,
        "the key expired after --unique-ttl"
    );
    let err = cli.fails(2, &["post", "u", "-q", &q, "--unique-ttl", "5"]);
    assert!(err.contains("--unique"), "{err}");
}

#[test]
fn track_and_untrack() {
    let cli = Cli::shared();
    let q = unique_queue("cli-track");
    let err = cli.fails(3, &["track", "no-such-job", "-q", &q]);
    assert!(err.contains("no-such-job") && err.contains("not found"), "{err}");
    let err = cli.fails(3, &["untrack", "no-such-job", "-q", &q]);
    assert!(err.contains("no-such-job"), "{err}");
    let id = cli.post(&q, "t", &[]);
    assert_eq!(cli.text(&["track", &id, "-q", &q]), format!("tracking {id}\n"));
    let said = cli.json(&["untrack", &id, "-q", &q]);
    assert_eq!(
        (&said["result"], &said["subject"]),
        (&"untracked".into(), &id.as_str().into())
    );
}

#[test]
fn history_lists_a_jobs_events_in_order() {
    let cli = Cli::shared();
    let q = unique_queue("cli-history");
    let id = cli.post(&q, "h", &[]);
    let token = cli.claim_one(&q, "worker-7", &id);
    cli.consume(&q, &id, "worker-7", &token);
    let events = cli.lines(&["history", &id, "-q", &q]);
    let names: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(names, ["posted", "claimed", "consumed"], "{events:?}");
    assert!(events
        .iter()
        .all(|e| e["job"] == id.as_str() && e["queue"] == q.as_str()));
    assert_eq!(events[1]["worker"], "worker-7");
    let at: Vec<i64> = events.iter().map(|e| e["at"].as_i64().unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "{at:?}");
    // Without --json: a table with a header and RFC 3339 times.
    let text = cli.text(&["history", &id, "-q", &q]);
    assert_eq!(text.lines().count(), 1 + 3, "{text}");
    assert!(text.starts_with("TIME") && text.contains("consumed"), "{text}");
    let err = cli.fails(3, &["history", "no-such-job", "-q", &q]);
    assert!(err.contains("no-such-job"), "{err}");
}
