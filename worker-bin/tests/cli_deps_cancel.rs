//! Dependencies and cancel on the command line, as a user runs them: the
//! real `jobworker` binary against the shared Redis, within and across
//! queues.

mod common;

use std::collections::BTreeSet;

use common::cli::Cli;
use jobworker_tests::unique_queue;
use serde_json::Value;

#[test]
fn dependencies_wait_until_consumed_within_and_across_queues() {
    let cli = Cli::shared();
    let q1 = unique_queue("cli-deps");
    let q2 = unique_queue("cli-deps2");
    let a = cli.post(&q1, "first", &[]);
    let b = cli.post(&q1, "second", &["--depends", &a]);
    let c = cli.post(&q2, "elsewhere", &["--depends", &format!("{q1}/{a}")]);

    assert_eq!(cli.ids(&["list", "-q", &q1, "--state", "waiting"]), [b.as_str()]);
    assert_eq!(cli.ids(&["list", "-q", &q2, "--state", "waiting"]), [c.as_str()]);
    assert_eq!(
        cli.ids(&["list", "-q", &q1]),
        [a.as_str()],
        "waiting jobs are not listed"
    );
    assert_eq!(cli.state(&q1, &b), "waiting");
    assert_eq!(cli.state(&q2, &c), "waiting");
    assert!(
        cli.claim(&q2, "o", 10).is_empty(),
        "a waiting job is not claimable"
    );

    let claimed = cli.claim(&q1, "o", 10);
    assert_eq!(claimed.len(), 1, "only the dependency is claimable: {claimed:?}");
    assert_eq!(claimed[0]["id"], a.as_str());
    assert_eq!(cli.state(&q1, &b), "waiting", "a claimed dependency still holds");
    cli.consume(&q1, &a, "o", &claimed[0]["token"].to_string());

    assert_eq!(cli.state(&q1, &b), "ready");
    assert_eq!(cli.state(&q2, &c), "ready");
    assert!(cli.ids(&["list", "-q", &q1, "--state", "waiting"]).is_empty());
    assert!(cli.ids(&["list", "-q", &q2, "--state", "waiting"]).is_empty());
    cli.claim_one(&q1, "o", &b);
    cli.claim_one(&q2, "o", &c);

    // A dependency that is already consumed does not hold a new job back.
    let d = cli.post(&q2, "late", &["--depends", &format!("{q1}/{a}")]);
    assert_eq!(cli.state(&q2, &d), "ready");

    let err = cli.fails(3, &["post", "x", "-q", &q1, "--depends", "no-such-dep"]);
    assert!(err.contains("no-such-dep"), "{err}");
    let err = cli.fails(
        3,
        &["post", "x", "-q", &q2, "--depends", &format!("{q1}/no-such-dep")],
    );
    assert!(err.contains("no-such-dep") && err.contains(&q1), "{err}");
    assert!(
        cli.ids(&["list", "-q", &q2, "--state", "waiting"]).is_empty(),
        "a refused post leaves no waiting job"
    );
}

#[test]
fn cancel_refuses_live_dependents_unless_asked() {
    let cli = Cli::shared();
    let q1 = unique_queue("cli-cancel");
    let q2 = unique_queue("cli-cancel2");
    let a = cli.post(&q1, "root", &[]);
    let b = cli.post(&q1, "child", &["--depends", &a]);
    let c = cli.post(&q2, "cousin", &["--depends", &format!("{q1}/{a}")]);

    let err = cli.fails(2, &["cancel", &a, "-q", &q1]);
    assert!(
        err.contains(&a) && err.contains(&format!("{q1}/{b}")) && err.contains(&format!("{q2}/{c}")),
        "names the job and its dependents: {err}"
    );
    assert!(err.contains("--with-dependents"), "{err}");
    assert_eq!(cli.state(&q1, &a), "ready", "a refused cancel changes nothing");
    assert_eq!(cli.state(&q1, &b), "waiting");

    let lines = cli.lines(&["cancel", &a, "-q", &q1, "--with-dependents"]);
    let cancelled: BTreeSet<&str> = lines.iter().map(|l| l["subject"].as_str().unwrap()).collect();
    let want: BTreeSet<String> = [format!("{q1}/{a}"), format!("{q1}/{b}"), format!("{q2}/{c}")].into();
    assert_eq!(
        cancelled,
        want.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        "{lines:?}"
    );
    assert!(lines.iter().all(|l| l["result"] == "cancelled"), "{lines:?}");
    for (q, id) in [(&q1, &a), (&q1, &b), (&q2, &c)] {
        assert_eq!(cli.state(q, id), "cancelled", "{q}/{id}");
    }
    let listed: BTreeSet<String> = cli
        .ids(&["list", "-q", &q1, "--state", "cancelled"])
        .into_iter()
        .collect();
    assert_eq!(listed, [a.clone(), b.clone()].into());
    assert!(
        cli.claim(&q1, "o", 10).is_empty(),
        "cancelled jobs are not claimable"
    );
    assert!(cli.claim(&q2, "o", 10).is_empty());
    let err = cli.fails(3, &["cancel", &a, "-q", &q1]);
    assert!(err.contains("cancelled"), "{err}");

    // A plain cancel of a job without dependents, in text.
    let d = cli.post(&q1, "alone", &[]);
    assert_eq!(
        cli.text(&["cancel", &d, "-q", &q1]),
        format!("cancelled {q1}/{d}\n")
    );
    assert_eq!(cli.state(&q1, &d), "cancelled");

    // Finished and unknown jobs are refused.
    let e = cli.post(&q1, "done", &[]);
    let token = cli.claim_one(&q1, "o", &e);
    cli.consume(&q1, &e, "o", &token);
    let err = cli.fails(3, &["cancel", &e, "-q", &q1]);
    assert!(err.contains(&e) && err.contains("completed"), "{err}");
    let err = cli.fails(3, &["cancel", "no-such-job", "-q", &q1]);
    assert!(err.contains("no-such-job"), "{err}");
}

#[test]
fn cancel_of_a_claimed_job_revokes_its_lease() {
    let cli = Cli::shared();
    let q = unique_queue("cli-cancel-run");
    let id = cli.post(&q, "running", &[]);
    let token = cli.claim_one(&q, "o", &id);
    cli.text(&["cancel", &id, "-q", &q]);
    assert_eq!(cli.state(&q, &id), "cancelled");
    cli.fails(3, &["consume", &id, "-q", &q, "--owner", "o", "--token", &token]);
    let events: Vec<Value> = cli.lines(&["history", &id, "-q", &q]);
    assert_eq!(events.last().unwrap()["event"], "cancelled", "{events:?}");
}
