//! The `jobworker` binary as a user runs it: real process, real Redis.

mod common;

use std::process::Output;

use common::cli::{jobworker_command, Cli};
use jobworker_tests::{shared_redis, unique_queue};
use serde_json::Value;

fn jobworker(args: &[&str]) -> Output {
    jobworker_command().args(args).output().expect("run jobworker")
}

/// Runs with `--redis <shared> --json`, expects success, returns the last
/// JSON line.
fn json(args: &[&str]) -> Value {
    let mut lines = Cli::shared().lines(args);
    lines
        .pop()
        .unwrap_or_else(|| panic!("jobworker {args:?} printed nothing"))
}

/// Runs with `--redis <shared>`, expects exit code `code`, returns stderr.
fn fails(code: i32, args: &[&str]) -> String {
    Cli::shared().fails(code, args)
}

#[test]
fn post_list_show_claim_consume() {
    let q = unique_queue("cli");
    let posted = json(&[
        "post",
        "resize",
        "-q",
        &q,
        "--args",
        r#"{"path": "a.png"}"#,
        "--priority",
        "HIGH",
    ]);
    let id = posted["id"].as_str().unwrap().to_owned();
    json(&["post", "other", "-q", &q]);

    let listed = json(&["list", "-q", &q]);
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert_eq!(listed[0]["id"], id.as_str(), "HIGH comes first");
    let shown = json(&["show", &id, "-q", &q]);
    assert_eq!(
        (&shown["state"], &shown["name"], &shown["priority"]),
        (&"ready".into(), &"resize".into(), &1.into())
    );
    assert_eq!(shown["args"]["path"], "a.png");
    assert_eq!(json(&["count", "-q", &q])["count"], 2);

    let claimed = json(&["claim", "-q", &q, "--owner", "cli-1", "--expiry", "60"]);
    assert_eq!(claimed[0]["id"], id.as_str());
    let token = claimed[0]["token"].to_string();
    json(&[
        "extend", &id, "-q", &q, "--owner", "cli-1", "--token", &token, "--expiry", "90",
    ]);
    let err = fails(3, &["consume", &id, "-q", &q, "--owner", "cli-2", "--any-token"]);
    assert!(err.contains("not held by cli-2") && err.contains(&id), "{err}");
    // Seen: without --token the fencing check was skipped silently. Now a
    // lease verb needs the token, or an explicit --any-token.
    for verb in ["consume", "extend", "abandon", "trash"] {
        let err = fails(2, &[verb, &id, "-q", &q, "--owner", "cli-1"]);
        assert!(err.contains("--token"), "{verb}: {err}");
    }
    let err = fails(
        2,
        &[
            "consume",
            &id,
            "-q",
            &q,
            "--owner",
            "cli-1",
            "--token",
            "1",
            "--any-token",
        ],
    );
    assert!(err.contains("cannot be used with"), "{err}");
    let err = fails(
        3,
        &["consume", &id, "-q", &q, "--owner", "cli-1", "--token", "999"],
    );
    // Seen: "is not held by cli-1 (it is owned by cli-1)", which never
    // named the token.
    assert!(
        err.contains("stale") && err.contains("fencing token"),
        "a wrong token is refused, and says so: {err}"
    );
    json(&["consume", &id, "-q", &q, "--owner", "cli-1", "--token", &token]);
    assert_eq!(json(&["show", &id, "-q", &q])["state"], "completed");
}

/// Seen: the lease verbs as "A job's life" writes them (no `-q`) said
/// "job … not found in queue default" for a job of another queue. Like
/// `show`, they find the job's queue when it is not given.
#[test]
fn lease_verbs_find_the_jobs_queue() {
    let q = unique_queue("cli-lease");
    let post = || {
        json(&["post", "resize", "-q", &q, "--max-attempts", "3"])["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let claim = || json(&["claim", "-q", &q, "--owner", "w1", "--expiry", "60"])[0]["token"].to_string();
    let (a, b) = (post(), post());
    let token = claim();
    json(&["extend", &a, "--owner", "w1", "--token", &token, "--expiry", "90"]);
    let abandoned = json(&[
        "abandon",
        &a,
        "--owner",
        "w1",
        "--token",
        &token,
        "--retry-after",
        "0",
    ]);
    assert_eq!(abandoned["state"], "ready");
    let token = claim();
    json(&[
        "trash",
        &a,
        "--owner",
        "w1",
        "--token",
        &token,
        "--reason",
        "bad input",
    ]);
    let token = claim();
    json(&["consume", &b, "--owner", "w1", "--token", &token]);
    assert_eq!(json(&["show", &a])["state"], "trashed");
    assert_eq!(json(&["show", &b])["state"], "completed");
    // Seen: "attempts 0 of 5" for a job that ran once and succeeded
    // (`claim` had printed "attempt 1/5"): the count is of failed tries.
    let shown = Cli::shared().text(&["show", &a]);
    assert!(shown.contains("1 failed of 3"), "{shown}");
    let err = fails(
        3,
        &[
            "extend",
            &unique_queue("no-such-job"),
            "--owner",
            "w1",
            "--any-token",
        ],
    );
    assert!(err.contains("not in any queue"), "{err}");
}

/// taskflow's contract on the command line: a job posted with a book shows
/// it (with its details and last_modified), and a claim without an expiry
/// (taskflow's default) is held with no time left.
#[test]
fn book_and_claim_without_expiry() {
    let q = unique_queue("cli-book");
    let posted = json(&[
        "post",
        "flow",
        "-q",
        &q,
        "--book-name",
        "nightly",
        "--book-uuid",
        "b-1",
        "--args",
        "[1]",
    ]);
    let id = posted["id"].as_str().unwrap().to_owned();
    let shown = json(&["show", &id, "-q", &q]);
    assert_eq!(
        shown["book"],
        serde_json::json!({"name": "nightly", "uuid": "b-1"})
    );
    assert_eq!(shown["details"], serde_json::json!({"args": [1]}));
    assert!(shown["last_modified"].is_string(), "{shown}");
    let err = fails(2, &["post", "flow", "-q", &q, "--book-name", "nightly"]);
    assert!(err.contains("--book-uuid"), "{err}");
    let claimed = json(&["claim", "-q", &q, "--id", &id, "--owner", "tf", "--no-expiry"]);
    assert_eq!(claimed[0]["book"]["name"], "nightly");
    let shown = json(&["show", &id, "-q", &q]);
    assert_eq!(
        (&shown["state"], &shown["expires_in_ms"]),
        (&"claimed".into(), &Value::Null)
    );
    let token = claimed[0]["token"].to_string();
    json(&["consume", &id, "-q", &q, "--owner", "tf", "--token", &token]);
}

#[test]
fn abandon_with_retry_then_trash_with_reason() {
    let q = unique_queue("cli-fail");
    let id = json(&["post", "flaky", "-q", &q, "--max-attempts", "3"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let claimed = json(&["claim", "-q", &q, "--owner", "o"]);
    let token = claimed[0]["token"].to_string();
    let abandoned = json(&[
        "abandon",
        &id,
        "-q",
        &q,
        "--owner",
        "o",
        "--token",
        &token,
        "--retry-after",
        "0",
        "--error",
        "timeout",
    ]);
    assert_eq!(abandoned["state"], "ready");
    let shown = json(&["show", &id, "-q", &q]);
    assert_eq!(
        (&shown["attempts"], &shown["reason"]),
        (&1.into(), &"timeout".into())
    );
    json(&["claim", "-q", &q, "--owner", "o", "--id", &id]);
    // A claim by the same owner, whatever its token (as for taskflow's).
    json(&[
        "trash",
        &id,
        "-q",
        &q,
        "--owner",
        "o",
        "--any-token",
        "--reason",
        "bad input file",
    ]);
    let trashed = json(&["list", "-q", &q, "--state", "trashed"]);
    assert_eq!(trashed[0]["reason"], "bad input file");
    assert_eq!(json(&["count", "-q", &q])["count"], 0);
}

#[test]
fn bad_input_gets_clear_errors() {
    let err = fails(2, &["post", "x", "--priority", "URGENT"]);
    assert!(err.contains("URGENT"), "{err}");
    let err = fails(2, &["list", "--state", "sleeping"]);
    assert!(err.contains("sleeping"), "{err}");
    let err = fails(2, &["post", "x", "--args", "{not json"]);
    assert!(err.contains("--args"), "{err}");
    // Seen: a missing input file exited 1 (a failure of jobworker's), and
    // `events --count 0` never ended.
    let err = fails(2, &["post", "x", "--from", "/no/such/file.jsonl"]);
    assert!(err.contains("/no/such/file.jsonl"), "{err}");
    let err = fails(2, &["post", "x", "--args", "@/no/such/args.json"]);
    assert!(err.contains("/no/such/args.json"), "{err}");
    let err = fails(2, &["events", "--count", "0"]);
    assert!(err.contains("--count"), "{err}");
    // Seen: `--namespace 'x2=jw:{demo}'` made x2's jobs queue demo's.
    let q = unique_queue("cli-ns");
    for (mapping, says) in [
        (vec![format!("{q}=jw:{{demo}}")], "queue \"demo\"'s own namespace"),
        (vec![format!("=legacy-{q}")], "queue name"),
        (
            vec![format!("{q}=legacy-{q}"), format!("{q}-b=legacy-{q}")],
            "cannot share namespace",
        ),
    ] {
        let mut args: Vec<&str> = mapping.iter().flat_map(|m| ["--namespace", m.as_str()]).collect();
        args.extend(["post", "y", "-q", &q]);
        let err = fails(2, &args);
        assert!(err.contains(says), "{mapping:?}: {err}");
    }
    assert_eq!(json(&["count", "-q", &q])["count"], 0, "a refused mapping posted");
    // A claim on a name no queue can have is refused before the name is
    // registered (the event streams skip it anyway).
    let bad = format!("{q} b");
    let err = fails(2, &["claim", "-q", &bad, "--owner", "o"]);
    assert!(err.contains("queue name"), "{err}");
    let queues = Cli::shared().text(&["queues"]);
    assert!(!queues.contains(&bad), "{queues}");
    let own = format!("{q}=jw:{{{q}}}");
    json(&["--namespace", &own, "post", "y", "-q", &q]);
    let err = fails(3, &["show", "no-such-job"]);
    assert!(
        err.contains("no-such-job") && err.contains("not in any queue"),
        "{err}"
    );
    let err = fails(3, &["show", "no-such-job", "-q", "default"]);
    assert!(err.contains("no-such-job") && err.contains("not found"), "{err}");
    let out = jobworker(&["--redis", "redis://127.0.0.1:1/", "count"]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("127.0.0.1:1"));
}

/// The handlers of the `jobworker-examples` library crate are registered in
/// the binary that links it (one `use … as _;` line in main.rs).
/// The bench's handler is not in the binary's registry (above), yet the
/// workers the bench starts run its jobs: every drained job and pickup
/// probe ran there.
#[test]
fn the_bench_runs_its_jobs_with_a_handler_only_its_workers_register() {
    let out = jobworker(&[
        "--redis",
        shared_redis().url(),
        "bench",
        "--jobs",
        "300",
        "--workers",
        "1",
        "--no-claim-cost",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let figures: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(figures["jobs"], 300);
    assert!(figures["drain_per_s"].as_f64().unwrap() > 0.0, "{figures}");
    assert!(figures["pickup_ms"]["p50"].as_f64().is_some(), "{figures}");
    // The one-by-one posts, and a trivial call and a floor post timed
    // between them; the floor's hand-offs beside the pickup probes.
    for rate in [
        "enqueue_one_per_s",
        "enqueue_one_round_trip_per_s",
        "enqueue_one_floor_post_per_s",
    ] {
        assert!(figures[rate].as_f64().unwrap() > 0.0, "{rate}: {figures}");
    }
    assert!(
        figures["pickup_floor_ms"]["p50"].as_f64().unwrap() > 0.0,
        "{figures}"
    );
    // Nothing of the floor is left on the user's server.
    use redis::Commands;
    let mut con = redis::Client::open(shared_redis().url())
        .and_then(|c| c.get_connection())
        .unwrap();
    let left: Vec<String> = con
        .scan_match::<_, String>("*jobworker-bench-floor*")
        .unwrap()
        .collect::<redis::RedisResult<_>>()
        .unwrap();
    assert_eq!(left, Vec::<String>::new(), "the floor's keys are left");
}

#[test]
fn handlers_of_a_linked_library_crate_are_registered() {
    let out = jobworker(&["handlers", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["crunch", "flaky", "scripted", "scripted-on-loop", "write_report"],
        "only the linked crates' handlers: the bench's is registered only in the workers the bench starts"
    );
    let kind = |name: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|h| h["name"] == name)
            .unwrap()["kind"]
            .clone()
    };
    assert_eq!(
        [kind("scripted"), kind("scripted-on-loop")],
        ["async", "async on loop"],
        "{list}"
    );
    let report = list
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "write_report")
        .unwrap();
    assert_eq!(
        (&report["queue"], &report["timeout_ms"]),
        (&"demo".into(), &30000.into())
    );
    assert!(
        report["location"]
            .as_str()
            .unwrap()
            .starts_with("examples/src/quickstart.rs:"),
        "{report}"
    );
    assert_eq!(
        list.as_array()
            .unwrap()
            .iter()
            .find(|h| h["name"] == "crunch")
            .unwrap()["kind"],
        "blocking"
    );
}

/// Seen: `jobworker list … | head` panicked ("failed printing to stdout:
/// Broken pipe", exit 101). A reader that goes away ends the command
/// quietly with exit 0, as `ls | head` does.
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    use std::io::{BufRead, BufReader};
    let q = unique_queue("cli-pipe");
    json(&["post", "many", "-q", &q, "--count", "1000"]);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_jobworker"))
        .args([
            "--redis",
            shared_redis().url(),
            "list",
            "-q",
            &q,
            "--limit",
            "1000",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is gone now (as `head -1` exits): 1,000 rows do not fit
    // in the pipe, so jobworker writes into a closed pipe.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(first.starts_with("ID"), "{first}");
}

/// Seen: `show`, `history`, `cancel` of an id needed `-q` ("job … not
/// found in queue default", exit 3). Commands given a job id find its
/// queue; an id in two queues asks for `-q`.
#[test]
fn job_ids_find_their_queue() {
    let q = unique_queue("cli-noq");
    let id = json(&["post", "report", "-q", &q])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(json(&["show", &id])["queue"], q.as_str());
    let history = jobworker(&["--redis", shared_redis().url(), "history", &id]);
    assert!(String::from_utf8_lossy(&history.stdout).contains("posted"));
    json(&["priority", &id, "5"]);
    json(&["tag", "add", &id, "vip"]);
    json(&["track", &id]);
    assert_eq!(json(&["show", &id])["priority"], 5);
    json(&["cancel", &id]);
    assert_eq!(json(&["show", &id])["state"], "cancelled");
    let err = fails(3, &["show", "no-such-job-anywhere"]);
    assert!(err.contains("not in any queue"), "{err}");
    // The same id in a second queue: which one is meant must be said.
    let other = unique_queue("cli-noq2");
    json(&["post", "report", "-q", &other, "--id", &id]);
    let err = fails(2, &["show", &id]);
    assert!(err.contains("several queues") && err.contains(&other), "{err}");
    assert_eq!(json(&["show", &id, "-q", &other])["state"], "ready");
}

/// Connection mistakes exit 2 (config) with one clear line; an unreachable
/// server exits 4.
#[test]
fn connection_mistakes_are_config_errors() {
    let url = format!(
        "{}99",
        shared_redis()
            .url()
            .trim_end_matches(|c: char| c.is_ascii_digit())
    );
    let out = jobworker(&["--redis", &url, "count"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no such database") && stderr.trim().lines().count() == 1,
        "{stderr}"
    );
}

/// Shell completions and the manual page come from the clap definition.
#[test]
fn completions_and_man_page() {
    for shell in ["bash", "zsh", "fish"] {
        let out = jobworker(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            script.contains("jobworker") && script.contains("consume"),
            "{shell}: {script}"
        );
    }
    let out = jobworker(&["man"]);
    assert!(out.status.success());
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.contains(".TH jobworker 1") && page.contains("completions"),
        "{page}"
    );
}
