//! The board-wide commands, as a user runs them: `events` (a stream of
//! every queue's events) and `config` (the board's stored settings). Each
//! test gets a redis-server of its own, so parallel tests cannot disturb
//! what it reads.

mod common;

use std::time::Duration;

use common::cli::{private_redis, Cli, EventsChild};
use jobworker_tests::unique_queue;
use jobworker_tests::wait_for_blocking;
use serde_json::Value;

#[test]
fn events_prints_a_jobs_events_as_json_lines() {
    let server = private_redis();
    let cli = Cli::on(&server);
    let q = unique_queue("cli-events");
    let events = EventsChild::start(&cli, &["--count", "3"]);
    let id = cli.post(&q, "e", &[]);
    let token = cli.claim_one(&q, "o", &id);
    cli.consume(&q, &id, "o", &token);
    let got = events.finish();
    let names: Vec<&str> = got.iter().map(|e| e["event"].as_str().unwrap_or("?")).collect();
    assert_eq!(names, ["posted", "claimed", "consumed"], "{got:?}");
    assert!(
        got.iter()
            .all(|e| e["job"] == id.as_str() && e["queue"] == q.as_str()),
        "{got:?}"
    );
    assert_eq!(got[1]["worker"], "o");
}

/// `events` follows the board through a restart of its server: when the
/// subscription ends with its connection, `events` says so on stderr and
/// subscribes again once the server answers (the events of the gap are
/// missed, as with any pub/sub), rather than exit.
#[test]
fn events_subscribe_again_after_the_server_restarts() {
    let mut server = private_redis();
    let cli = Cli::on(&server);
    let q = unique_queue("cli-events-restart");
    let mut events = EventsChild::start(&cli, &["--count", "2"]);
    let before = cli.post(&q, "before", &[]);
    server.restart().expect("restart the private redis-server");
    // Posts until `events` has heard one more (it subscribes again after
    // its pause) and exits on its count.
    let mut after = Vec::new();
    wait_for_blocking(
        "`events` to hear a post after the restart",
        Duration::from_secs(60),
        || {
            after.push(cli.post(&q, "after", &[]));
            events.exited().then_some(())
        },
    );
    let (got, notices) = events.finish_with_notices();
    assert!(
        notices.iter().any(|l| l.contains("listening again")),
        "{notices:?}"
    );
    let seen: Vec<(&str, &str)> = got
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap_or("?"),
                e["job"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    assert_eq!(seen.len(), 2, "{got:?}");
    assert_eq!(seen[0], ("posted", before.as_str()), "{got:?}");
    assert!(
        seen[1].0 == "posted" && after.iter().any(|id| id == seen[1].1),
        "{got:?}"
    );
}

/// Only later subscriptions are tried again: `events` on a server that is
/// down fails as unavailable (exit 4) rather than wait for it.
#[test]
fn events_on_a_server_that_is_down_fails_at_once() {
    let mut server = private_redis();
    let cli = Cli::on(&server);
    server.stop().expect("stop the private redis-server");
    let err = cli.fails(4, &["events"]);
    assert!(err.contains("cannot reach redis"), "{err}");
}

#[test]
fn events_tracked_only_sees_tracked_jobs() {
    let server = private_redis();
    let cli = Cli::on(&server);
    let q = unique_queue("cli-events-tracked");
    let events = EventsChild::start(&cli, &["--tracked", "--count", "1"]);
    let untracked = cli.post(&q, "quiet", &[]);
    let tracked = cli.post(&q, "loud", &["--track"]);
    let got = events.finish();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (&got[0]["event"], &got[0]["job"]),
        (&"posted".into(), &tracked.as_str().into()),
        "not {untracked}: {got:?}"
    );

    // `track` on a posted job: the tracking itself, then its later events.
    let events = EventsChild::start(&cli, &["--tracked", "--count", "2"]);
    cli.text(&["track", &untracked, "-q", &q]);
    let token = cli.claim_one(&q, "o", &untracked);
    let got = events.finish();
    let seen: Vec<(&Value, &Value)> = got.iter().map(|e| (&e["event"], &e["job"])).collect();
    let job: Value = untracked.as_str().into();
    assert_eq!(
        seen,
        [(&"track".into(), &job), (&"claimed".into(), &job)],
        "{got:?}"
    );
    assert_eq!(got[1]["token"], token.parse::<u64>().unwrap(), "{got:?}");
}

#[test]
fn config_set_get_unset_on_a_private_board() {
    let server = private_redis();
    let cli = Cli::on(&server);
    assert_eq!(cli.json(&["config", "get"]), serde_json::json!({}));
    // Nothing stored says so, rather than print nothing.
    assert_eq!(
        cli.text(&["config", "get"]),
        "nothing stored: every key has its built-in default\n"
    );
    assert_eq!(
        cli.text(&["config", "get", "grace"]),
        "grace is not stored: its built-in default applies\n"
    );
    assert_eq!(
        cli.text(&["config", "set", "history-count", "10"]),
        "set history-count = 10\n"
    );
    cli.json(&["config", "set", "expiry", "45.5"]);
    assert_eq!(
        cli.json(&["config", "get"]),
        serde_json::json!({ "expiry": "45.5", "history-count": "10" })
    );
    assert_eq!(
        cli.json(&["config", "get", "history-count"]),
        serde_json::json!({ "history-count": "10" })
    );
    assert_eq!(
        cli.text(&["config", "get"]),
        "expiry = 45.5\nhistory-count = 10\n"
    );

    let err = cli.fails(2, &["config", "set", "nope", "1"]);
    assert!(err.contains("nope") && err.contains("history-count"), "{err}");
    let err = cli.fails(2, &["config", "set", "expiry", "abc"]);
    assert!(err.contains("abc"), "{err}");
    cli.fails(2, &["config", "set", "grace", "0"]);
    cli.fails(2, &["config", "set", "history-count", "1.5"]);
    cli.fails(2, &["config", "unset", "nope"]);
    let err = cli.fails(2, &["config", "get", "nope"]);
    assert!(err.contains("unknown config key"), "{err}");
    assert_eq!(
        cli.json(&["config", "get", "expiry"]),
        serde_json::json!({ "expiry": "45.5" }),
        "refused values change nothing"
    );

    assert_eq!(cli.json(&["config", "unset", "history-count"])["result"], "unset");
    assert_eq!(cli.text(&["config", "unset", "expiry"]), "unset expiry\n");
    assert_eq!(cli.json(&["config", "get"]), serde_json::json!({}));

    // A stored history-count bounds the completed jobs kept.
    let q = unique_queue("cli-config");
    cli.text(&["config", "set", "history-count", "1"]);
    for _ in 0..3 {
        let id = cli.post(&q, "c", &[]);
        let token = cli.claim_one(&q, "o", &id);
        cli.consume(&q, &id, "o", &token);
    }
    assert!(cli.claim(&q, "o", 1).is_empty());
    let kept = cli.ids(&["list", "-q", &q, "--state", "completed"]);
    assert_eq!(kept.len(), 1, "history-count 1 keeps one completed job: {kept:?}");
}
