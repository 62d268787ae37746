//! The operator commands of the qless-style features, as a user runs them:
//! the real `jobworker` binary against a real Redis.
//!
//! Most tests share the test binary's redis-server and keep apart by queue.
//! `events` (a board-wide stream) and `config` (the board-wide `jw:config`
//! key) get a private redis-server each, so parallel tests cannot disturb
//! them.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker_tests::{shared_redis, unique_queue};
use serde_json::Value;

/// How long an `events` child may take to subscribe, and then to finish.
const EVENTS_DEADLINE: Duration = Duration::from_secs(10);

fn jobworker() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jobworker"));
    cmd.env_remove("JOBWORKER_REDIS_URL")
        .env_remove("JOBWORKER_DATA_DIR")
        .env_remove("JOBWORKER_QUEUE")
        .env_remove("JOBWORKER_OWNER");
    cmd
}

/// The `jobworker` command line pointed at one Redis.
struct Cli {
    url: String,
}

impl Cli {
    fn shared() -> Cli {
        Cli {
            url: shared_redis().url().to_owned(),
        }
    }

    fn on(server: &RedisServer) -> Cli {
        Cli { url: server.url() }
    }

    fn run(&self, json: bool, args: &[&str]) -> Output {
        let mut cmd = jobworker();
        cmd.args(["--redis", &self.url]);
        if json {
            cmd.arg("--json");
        }
        cmd.args(args).output().expect("run jobworker")
    }

    /// Runs without `--json`, expects success, returns stdout.
    fn text(&self, args: &[&str]) -> String {
        let out = self.run(false, args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "jobworker {args:?} failed ({:?}): {}\n{stdout}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    /// Runs with `--json`, expects success, parses every stdout line.
    fn lines(&self, args: &[&str]) -> Vec<Value> {
        let out = self.run(true, args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "jobworker {args:?} failed ({:?}): {}\n{stdout}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }

    /// Runs with `--json`, expects success and one JSON line, returns it.
    fn json(&self, args: &[&str]) -> Value {
        let mut lines = self.lines(args);
        assert_eq!(
            lines.len(),
            1,
            "jobworker {args:?}: one JSON line expected: {lines:?}"
        );
        lines.remove(0)
    }

    /// Runs, expects exit code `code`, returns stderr.
    fn fails(&self, code: i32, args: &[&str]) -> String {
        let out = self.run(false, args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            out.status.code(),
            Some(code),
            "jobworker {args:?}: {stderr}\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        stderr
    }

    /// Posts a job, returns its id (the text output is the bare id).
    fn post(&self, queue: &str, name: &str, extra: &[&str]) -> String {
        let mut args = vec!["post", name, "-q", queue];
        args.extend_from_slice(extra);
        let id = self.text(&args).trim().to_owned();
        assert!(!id.is_empty() && !id.contains(char::is_whitespace), "{id:?}");
        id
    }

    /// Claims up to `count` jobs of `queue` as `owner`.
    fn claim(&self, queue: &str, owner: &str, count: usize) -> Vec<Value> {
        let n = count.to_string();
        let claimed = self.json(&["claim", "-q", queue, "--owner", owner, "--count", &n]);
        claimed.as_array().expect("claim --json prints an array").clone()
    }

    /// Claims exactly the next job, checks its id, returns its token.
    fn claim_one(&self, queue: &str, owner: &str, id: &str) -> String {
        let claimed = self.claim(queue, owner, 1);
        assert_eq!(claimed.len(), 1, "one job to claim in {queue}: {claimed:?}");
        assert_eq!(claimed[0]["id"], id, "{claimed:?}");
        claimed[0]["token"].to_string()
    }

    fn consume(&self, queue: &str, id: &str, owner: &str, token: &str) {
        let done = self.json(&["consume", id, "-q", queue, "--owner", owner, "--token", token]);
        assert_eq!(done["result"], "consumed");
    }

    fn state(&self, queue: &str, id: &str) -> String {
        let shown = self.json(&["show", id, "-q", queue]);
        shown["state"].as_str().unwrap_or_default().to_owned()
    }

    fn ids(&self, args: &[&str]) -> Vec<String> {
        let list = self.json(args);
        list.as_array()
            .unwrap_or_else(|| panic!("{args:?}: not an array: {list}"))
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The `queues --json` row of `queue`.
    fn queue_row(&self, queue: &str) -> Value {
        let rows = self.json(&["queues"]);
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["queue"] == queue)
            .unwrap_or_else(|| panic!("{queue} missing from queues: {rows}"))
            .clone()
    }
}

fn private_redis() -> RedisServer {
    RedisServer::start(ServerOptions::default()).expect("start a private redis-server")
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

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
    assert_eq!(cli.post(&q, "u", &["--unique", "brief"]), short);
    thread::sleep(Duration::from_millis(1200));
    assert_ne!(
        cli.post(&q, "u", &["--unique", "brief"]),
        short,
        "the key expired after --unique-ttl"
    );
    let err = cli.fails(2, &["post", "u", "-q", &q, "--unique-ttl", "5"]);
    assert!(err.contains("--unique"), "{err}");
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
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        runs.extend(cli.claim(&q, "o", 20));
        thread::sleep(Duration::from_millis(100));
    }
    assert!(runs.len() >= 3, "a run every 200 ms for 1.5 s: {runs:?}");
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
    assert!(err.contains(&tid), "{err}");
    cli.claim(&q, "o", 50);
    thread::sleep(Duration::from_millis(450));
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

/// A running `jobworker events` child, killed if a test leaves it behind.
struct Events {
    child: Child,
    stdout: Option<thread::JoinHandle<String>>,
}

impl Events {
    /// Spawns `events` with `args` and waits until it says it listens.
    fn start(cli: &Cli, args: &[&str]) -> Events {
        let mut child = jobworker()
            .args(["--redis", &cli.url, "events"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn jobworker events");
        let mut out = child.stdout.take().unwrap();
        let stdout = thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let (tx, rx) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut events = Events {
            child,
            stdout: Some(stdout),
        };
        let deadline = Instant::now() + EVENTS_DEADLINE;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.contains("listening") => break,
                Ok(line) => seen.push(line),
                Err(e) => {
                    let status = events.child.try_wait();
                    panic!("events never said it listens ({e}; {status:?}): {seen:?}");
                }
            }
        }
        events
    }

    /// Waits for the child to exit on its own; returns its stdout lines.
    fn finish(mut self) -> Vec<Value> {
        let deadline = Instant::now() + EVENTS_DEADLINE;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for events") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let out = self.stdout.take().unwrap().join().unwrap_or_default();
                panic!("events did not exit within {EVENTS_DEADLINE:?}; printed: {out}");
            }
            thread::sleep(Duration::from_millis(10));
        };
        let out = self.stdout.take().unwrap().join().unwrap_or_default();
        assert!(status.success(), "events exited with {status}: {out}");
        out.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn events_prints_a_jobs_events_as_json_lines() {
    let server = private_redis();
    let cli = Cli::on(&server);
    let q = unique_queue("cli-events");
    let events = Events::start(&cli, &["--count", "3"]);
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

#[test]
fn events_tracked_only_sees_tracked_jobs() {
    let server = private_redis();
    let cli = Cli::on(&server);
    let q = unique_queue("cli-events-tracked");
    let events = Events::start(&cli, &["--tracked", "--count", "1"]);
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
    let events = Events::start(&cli, &["--tracked", "--count", "2"]);
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
