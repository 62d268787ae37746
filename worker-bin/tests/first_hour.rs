//! What a newcomer meets in the first hour, on the real binary: the linked
//! handlers give `post` its defaults, jobs without a deployed handler wait
//! in their own failure group, inputs come from files, and human output is
//! readable (times, tables, long values cut).

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::*;
use jobworker::{Board, JobState};
use jobworker_tests::{shared_redis, unique_queue};
use serde_json::Value;

/// Runs `jobworker --redis <shared> ARGS` with `stdin` as its input.
fn run_with(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_jobworker"))
        .args(["--redis", shared_redis().url()])
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn run(args: &[&str]) -> Output {
    run_with(args, b"")
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "jobworker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(ok(&[&["--json"], args].concat()).trim()).unwrap()
}

/// Seen: a handler's `queue` and `max_attempts` did not apply to `jobworker
/// post` of its job name, and `handlers` did not show `max_attempts`. Now
/// `post` takes them from the linked handler unless flags say otherwise,
/// and warns about a name no linked handler has.
#[test]
fn post_takes_the_linked_handlers_queue_and_attempts() {
    let id = json(&["post", "flaky", "--args", r#"{"fail_times": 0}"#])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = json(&["show", &id, "-q", "demo"]);
    assert_eq!(
        (&shown["queue"], &shown["max_attempts"]),
        (&"demo".into(), &4.into())
    );
    let q = unique_queue("flags-win");
    let id = json(&["post", "flaky", "-q", &q, "--max-attempts", "2"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = json(&["show", &id, "-q", &q]);
    assert_eq!(
        (&shown["queue"], &shown["max_attempts"]),
        (&q.as_str().into(), &2.into())
    );
    let table = ok(&["handlers"]);
    let header = table.lines().next().unwrap();
    assert!(header.contains("MAX ATTEMPTS"), "{table}");
    let flaky = table.lines().find(|l| l.starts_with("flaky")).unwrap();
    assert!(flaky.split_whitespace().any(|w| w == "4"), "{table}");
    let out = run(&["post", "nobody-handles-this", "-q", &q]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no handler named \"nobody-handles-this\""),
        "{stderr}"
    );
    // Seen: the warning came before a refusal ("posting anyway"), for a
    // post that was then refused. A refused post says only why.
    let out = run(&["post", "nobody-handles-this", "-q", &q, "--args", "{bad"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--args") && !stderr.contains("no handler named"),
        "{stderr}"
    );
}

/// `--timeout 0` (or `JOBWORKER_TIMEOUT=0`), which many tools read as "no
/// limit", timed out every handler without a timeout of its own at once:
/// its jobs were retried until trashed. It is refused, as the handler
/// attribute refuses `timeout = "0s"`. (`--until-drained`: a worker that
/// took the flag would stop on the empty queue, failing here, not hang.)
#[test]
fn a_zero_timeout_is_refused() {
    let q = unique_queue("first-hour-timeout");
    let out = run(&[
        "--queues",
        &q,
        "--workers",
        "1",
        "--until-drained",
        "--timeout",
        "0",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--timeout must be above zero"), "{stderr}");
}

/// A job whose handler is not linked into the worker ends, after its
/// attempts, in the failure group `no-handler`, so `retry --group
/// no-handler` brings them back once the handler is deployed.
#[tokio::test(flavor = "multi_thread")]
async fn jobs_without_a_deployed_handler_wait_in_their_own_group() {
    let (_serial, board, q, _key) = setup("e2e-nohandler").await;
    let id = board
        .post(&q, jobworker::NewJob::new("not-deployed-yet").max_attempts(1))
        .await
        .unwrap();
    let sup = Supervisor::start(&q, &["--workers", "1"]);
    wait_state(&board, &q, &id, JobState::Trashed, 30).await;
    let info = board.show(&q, &id).await.unwrap();
    assert_eq!(info.group.as_deref(), Some("no-handler"), "{info:?}");
    assert!(info.reason.unwrap_or_default().contains("not-deployed-yet"));
    drop(sup);
    let retried = ok(&["retry", "--group", "no-handler", "-q", &q]);
    assert!(retried.contains("retried 1 jobs"), "{retried}");
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Ready);
}

/// Seen: `--args` took only inline JSON; a 5 MB payload failed ("Argument
/// list too long") and `@file` and `-` were refused. Now both work, and
/// `--from FILE.jsonl` posts one job per line.
#[test]
fn arguments_come_from_files_and_stdin_and_jobs_from_jsonl() {
    let q = unique_queue("files");
    let dir = tempfile::tempdir().unwrap();
    let big = format!(r#"{{"blob": "{}"}}"#, "x".repeat(5 * 1024 * 1024));
    let path = dir.path().join("args.json");
    std::fs::write(&path, &big).unwrap();
    let at_file = format!("@{}", path.display());
    let id = json(&["post", "big", "-q", &q, "--args", &at_file])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = json(&["show", &id, "-q", &q]);
    assert_eq!(
        shown["args"]["blob"].as_str().map(str::len),
        Some(5 * 1024 * 1024)
    );
    // Human output cuts the 5 MB value (--json above has it whole).
    let text = ok(&["show", &id, "-q", &q]);
    assert!(
        text.len() < 4096 && text.contains("--json shows all"),
        "{} bytes",
        text.len()
    );

    let out = run_with(
        &["--json", "post", "piped", "-q", &q, "--args", "-"],
        br#"{"from": "stdin"}"#,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id: Value = serde_json::from_slice(&out.stdout).unwrap();
    let shown = json(&["show", id["id"].as_str().unwrap(), "-q", &q]);
    assert_eq!(shown["args"]["from"], "stdin");

    let lines: String = (0..2500).map(|i| format!("{{\"n\": {i}}}\n")).collect();
    let jsonl = dir.path().join("jobs.jsonl");
    std::fs::write(&jsonl, lines).unwrap();
    let posted = ok(&["post", "line", "-q", &q, "--from", jsonl.to_str().unwrap()]);
    assert!(posted.contains("posted 2500 line jobs"), "{posted}");
    assert_eq!(json(&["count", "-q", &q])["count"], 2 + 2500);
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"n\": 1}\nnot json\n").unwrap();
    let out = run(&["post", "line", "-q", &q, "--from", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 2"),
        "nothing posted from a bad file"
    );
    assert_eq!(json(&["count", "-q", &q])["count"], 2 + 2500);
}

/// Seen: `history` printed epoch milliseconds and the `queues` and
/// `handlers` tables were misaligned. Human output has RFC 3339 times and
/// aligned columns; `--json` keeps epoch ms.
#[test]
fn human_output_has_rfc3339_times_and_aligned_tables() {
    let q = unique_queue("human");
    let id = json(&["post", "report", "-q", &q])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let history = ok(&["history", &id, "-q", &q]);
    let posted = history.lines().find(|l| l.contains("posted")).unwrap();
    let time = posted.split_whitespace().next().unwrap();
    assert!(chrono::DateTime::parse_from_rfc3339(time).is_ok(), "{history}");
    let events: Value =
        serde_json::from_str(ok(&["--json", "history", &id, "-q", &q]).lines().next().unwrap()).unwrap();
    assert!(events["at"].is_i64(), "--json keeps epoch ms: {events}");
    for table in [ok(&["queues"]), ok(&["handlers"]), ok(&["list", "-q", &q])] {
        let lines: Vec<&str> = table.lines().collect();
        let header = lines[0];
        // Every column of every row starts where its header does.
        let starts: Vec<usize> = header
            .char_indices()
            .filter(|&(i, c)| c != ' ' && (i == 0 || header.as_bytes()[i - 1] == b' '))
            .map(|(i, _)| i)
            .collect();
        for row in &lines[1..] {
            for &s in &starts[1..] {
                assert!(
                    row.len() <= s || row.as_bytes()[s - 1] == b' ',
                    "misaligned row {row:?} under {header:?}"
                );
            }
        }
    }
    let _ = Duration::ZERO;
}

/// Seen: two supervisors with the default --workdir collided on
/// `jobworker-workers/sandbox-0` (the second could not lock it). Each now
/// gets a directory of its own, removed when it exits.
#[tokio::test(flavor = "multi_thread")]
async fn two_supervisors_with_the_default_workdir_both_run() {
    let (_serial, board, q, key) = setup("e2e-workdirs").await;
    let runtime = tempfile::tempdir().unwrap();
    let start = || {
        Command::new(env!("CARGO_BIN_EXE_jobworker"))
            .args(["--redis", shared_redis().url(), "--queues", &q, "--workers", "1"])
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env_remove("JOBWORKER_WORKDIR")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (start(), start());
    // Both run a worker (the second could not before: the sandbox lock).
    let any = jobworker::AnyBoard::Redis(board.clone());
    jobworker_tests::wait_until("two live workers", Duration::from_secs(30), || async {
        let live = jobworker::board::Presence::live_workers(&any).await.unwrap();
        live.iter().filter(|w| w.queues == [q.clone()]).count() == 2
    })
    .await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(
            post(
                &board,
                &q,
                &script(jobworker_examples::scripted::Action::Ok, 0, &key),
                3,
            )
            .await,
        );
    }
    for id in &ids {
        wait_state(&board, &q, id, JobState::Completed, 60).await;
    }
    for child in [first, second] {
        // SAFETY: SIGTERM to our own child process.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let left: Vec<_> = std::fs::read_dir(runtime.path().join("jobworker"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "each run removed its directory: {left:?}");
}

/// Seen: a successful and a trashed job logged nothing at INFO, and a
/// failure logged `error=error: …`. Now each outcome is one line.
#[tokio::test(flavor = "multi_thread")]
async fn every_outcome_is_one_log_line() {
    use jobworker_examples::scripted::{Action, Script};
    let (_serial, board, q, key) = setup("e2e-logs").await;
    let ok = post(&board, &q, &script(Action::Ok, 0, &key), 3).await;
    let flaky = Script {
        until_attempt: 1,
        ..script(Action::Retry, 0, &key)
    };
    let flaky = post(&board, &q, &flaky, 3).await;
    let fatal = post(&board, &q, &script(Action::Fatal, 0, &key), 3).await;
    let sup = Supervisor::start(&q, &["--workers", "1"]);
    for (id, state) in [
        (&ok, JobState::Completed),
        (&flaky, JobState::Completed),
        (&fatal, JobState::Trashed),
    ] {
        wait_state(&board, &q, id, state, 60).await;
    }
    let log = sup.log();
    let line_of = |id: &jobworker::JobId, what: &str| {
        log.lines()
            .find(|l| l.contains(id.as_str()) && l.contains(what))
            .unwrap_or_else(|| panic!("no {what:?} line for {id}:\n{log}"))
            .to_owned()
    };
    assert!(line_of(&ok, "job completed").contains("took="));
    let retried = line_of(&flaky, "job failed; will retry");
    assert!(
        retried.contains("reason=error: scripted failure") && retried.contains("retry_in="),
        "{retried}"
    );
    assert!(line_of(&flaky, "job completed").contains("attempt=2"));
    let trashed = line_of(&fatal, "job trashed");
    assert!(
        trashed.contains("group=fatal") && trashed.contains("reason=fatal: scripted fatal error"),
        "{trashed}"
    );
    assert!(!log.contains("error=error:"), "no doubled words:\n{log}");
    drop(sup);
}

/// Seen: `--progress` and log lines printed on one line. On a terminal
/// (a pty, through `script`), every log line now stands on a line of its
/// own: the bar is cleared before a line is written and drawn again below.
#[tokio::test(flavor = "multi_thread")]
async fn progress_and_log_lines_never_share_a_line() {
    use jobworker_examples::scripted::Action;
    let (_serial, board, q, key) = setup("e2e-progress").await;
    for _ in 0..30 {
        post(&board, &q, &script(Action::Sleep, 50, &key), 3).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let typescript = dir.path().join("typescript");
    let command = format!(
        "{} --redis {} --queues {q} --workers 2 --concurrency 2 --until-drained --progress --workdir {}",
        env!("CARGO_BIN_EXE_jobworker"),
        shared_redis().url(),
        dir.path().display()
    );
    let status = Command::new("script")
        .args(["-qec", &command])
        .arg(&typescript)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("run `script` (util-linux) to give jobworker a terminal");
    assert!(status.success());
    let raw = String::from_utf8_lossy(&std::fs::read(&typescript).unwrap()).into_owned();
    assert!(raw.contains("jobs/s"), "the bar was drawn:\n{raw}");
    let mut logged = 0;
    for line in raw.split('\n') {
        // What stays visible of a line (a terminal ends lines with \r\n):
        // what follows its last carriage return.
        let visible = line.trim_end_matches('\r').rsplit('\r').next().unwrap_or("");
        let visible = visible.replace("\u{1b}[2K", "");
        if visible.contains("INFO") {
            logged += 1;
            assert!(
                !visible.contains("jobs/s"),
                "a log line shares a line with the bar: {visible:?}"
            );
        }
    }
    assert!(logged > 30, "the workers' log lines came through: {logged}");
    assert_eq!(board.job_count(&q).await.unwrap(), 0);
}
