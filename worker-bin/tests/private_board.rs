//! The private board: with no --redis, every command of a user shares one
//! redis-server started on first use and left running (data in its
//! directory, AOF fsynced on every write), so jobs posted by one command are
//! there for the next. Every test uses a directory of its own (`--data-dir`)
//! and stops its server at the end.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::cli::jobworker_command;
use serde_json::Value;

/// A private board directory whose server is stopped when the test ends.
struct Board {
    dir: tempfile::TempDir,
}

impl Board {
    fn new() -> Board {
        Board {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn dir(&self) -> &str {
        self.dir.path().to_str().unwrap()
    }

    /// Runs `jobworker --data-dir DIR ARGS` (no URL anywhere).
    fn run(&self, args: &[&str]) -> Output {
        jobworker(&[&["--data-dir", self.dir()], args].concat())
    }

    /// Runs a command that must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "jobworker {args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    }

    /// The pid of the running server, if one runs.
    fn pid(&self) -> Option<i32> {
        let status: Value = serde_json::from_str(&self.ok(&["--json", "server", "status"])).unwrap();
        status["pid"].as_i64().map(|p| p as i32)
    }

    fn count(&self, queue: &str) -> i64 {
        let v: Value = serde_json::from_str(&self.ok(&["--json", "count", "-q", queue])).unwrap();
        v["count"].as_i64().unwrap()
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        let _ = self.run(&["server", "stop"]);
    }
}

fn jobworker(args: &[&str]) -> Output {
    jobworker_command()
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// True while process `pid` runs: it exists and is not a zombie (ended,
/// not yet reaped by init).
fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists.
    let exists = unsafe { libc::kill(pid, 0) == 0 };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    exists && !zombie
}

/// Seen: `jobworker post` without --redis printed an id, exited 0, and the
/// job was gone (a private server started for that one command). Must-show:
/// `post`, then `run --until-drained` in a second process runs the job; the
/// data survives `server stop`, and a new `post`/`count` sees it.
#[test]
fn a_posted_job_waits_for_a_worker_in_another_process_and_survives_stop() {
    let board = Board::new();
    let post = board.run(&["post", "scripted", "--args", r#"{"action": "ok"}"#]);
    let stderr = text(&post.stderr);
    assert!(post.status.success(), "{stderr}");
    let first = stderr.lines().next().unwrap_or("");
    assert!(
        first.contains("using the private board in") && first.contains("started now"),
        "the first line says which board: {first}"
    );
    let id = text(&post.stdout).trim().to_owned();
    let pid = board.pid().expect("the server keeps running after the command");
    assert!(alive(pid));
    assert_eq!(board.count("default"), 1, "the next command sees the job");

    let work = tempfile::tempdir().unwrap();
    let ran = board.run(&[
        "run",
        "--queues",
        "default",
        "--workers",
        "1",
        "--until-drained",
        "--workdir",
        work.path().to_str().unwrap(),
    ]);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    let shown: Value = serde_json::from_str(&board.ok(&["--json", "show", &id])).unwrap();
    assert_eq!(shown["state"], "completed", "{shown}");

    assert!(board
        .ok(&["server", "stop"])
        .contains("stopped the private board"));
    assert_eq!(board.pid(), None);
    board.ok(&["post", "scripted", "--args", r#"{"action": "ok"}"#]);
    assert_eq!(board.count("default"), 1, "a new post after the stop");
    let shown: Value = serde_json::from_str(&board.ok(&["--json", "show", &id])).unwrap();
    assert_eq!(
        shown["state"], "completed",
        "the history survived the stop: {shown}"
    );
}

/// Two commands started at once share one server (the start is locked).
#[test]
fn commands_started_at_once_share_one_server() {
    let board = Board::new();
    let children: Vec<_> = (0..4)
        .map(|_| {
            jobworker_command()
                .args(["--data-dir", board.dir(), "post", "x", "-q", "together"])
                .env("RUST_LOG", "warn")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut pids = std::collections::HashSet::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let first = stderr.lines().next().unwrap_or("");
        let pid = first
            .split("redis-server pid ")
            .nth(1)
            .and_then(|s| s.split(',').next());
        pids.insert(pid.unwrap_or_else(|| panic!("{first}")).to_owned());
    }
    assert_eq!(pids.len(), 1, "one server for all: {pids:?}");
    assert_eq!(board.count("together"), 4);
}

/// A server killed with SIGKILL leaves its socket behind; the next command
/// sees nobody answers on it, starts a new server on the same data, and
/// nothing acknowledged is lost.
#[test]
fn a_killed_server_and_its_stale_socket_are_replaced_without_losing_jobs() {
    let board = Board::new();
    for _ in 0..3 {
        board.ok(&["post", "x", "-q", "kept"]);
    }
    let pid = board.pid().unwrap();
    // SAFETY: kill -9 of the private board's redis-server, by its pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alive(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        Path::new(board.dir()).join("redis.sock").exists(),
        "a stale socket is left"
    );
    assert_eq!(board.count("kept"), 3, "every acknowledged post survived");
    let again = board.pid().unwrap();
    assert_ne!(again, pid, "a new server answers");
}

/// Seen: `--data-dir dd2` (relative) failed with "redis-server did not
/// start; see dd2/redis.log", a log that was never written (the server ran
/// inside the directory, its paths relative to it). A relative directory
/// works as an absolute one does, and names the same board from there.
#[test]
fn a_relative_data_dir_is_taken_from_the_current_directory() {
    let cwd = tempfile::tempdir().unwrap();
    /// Stops the server of a data directory when the test ends.
    struct Stop(String);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = jobworker(&["--data-dir", &self.0, "server", "stop"]);
        }
    }
    let absolute = cwd.path().join("dd2").to_str().unwrap().to_owned();
    let _stop = Stop(absolute.clone());
    let posted = jobworker_command()
        .args(["--data-dir", "dd2", "post", "x", "-q", "relative"])
        .current_dir(cwd.path())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(posted.status.success(), "{}", text(&posted.stderr));
    // The same board, named by its absolute path.
    let out = jobworker(&["--data-dir", &absolute, "--json", "count", "-q", "relative"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["count"], 1, "{v}");
}

/// Without --data-dir the private board lives in the user's data
/// directory: `$XDG_DATA_HOME/jobworker`.
#[test]
fn the_default_private_board_is_in_the_users_data_directory() {
    let xdg = tempfile::tempdir().unwrap();
    let out = jobworker_command()
        .args(["server", "status"])
        .env("XDG_DATA_HOME", xdg.path())
        .output()
        .unwrap();
    let want = xdg.path().join("jobworker");
    assert!(
        text(&out.stdout).contains(&format!("the private board in {} is not running", want.display())),
        "{}",
        text(&out.stdout)
    );
}

/// Seen: a data directory holding an append-only file redis-server cannot
/// read: the command waited 10 s for a server that had already exited,
/// then said only that it "did not answer". It now fails with the server's
/// own reason, and the file is left for the user to repair.
#[test]
fn a_server_that_cannot_read_its_data_fails_the_command_with_its_reason() {
    let board = Board::new();
    std::fs::write(Path::new(board.dir()).join("appendonly.aof"), "not an aof\n").unwrap();
    let out = board.run(&["count", "-q", "any"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("exited while starting"), "{err}");
    assert!(err.contains("Bad file format"), "the server's own reason: {err}");
    // Redis moved the file into its AOF directory; its bytes are kept.
    let kept = std::fs::read_to_string(Path::new(board.dir()).join("appendonlydir/appendonly.aof")).unwrap();
    assert_eq!(kept, "not an aof\n");
}

/// Seen: with the private server stopped (SIGSTOP; likewise one busy or
/// loading a large append-only file), the next command started a second
/// redis-server on the same data directory, both appending to one file,
/// and jobs went to one or the other. The command now waits for the
/// running server, fails naming it, and `server stop` ends it; no job is
/// lost.
#[test]
fn a_server_that_does_not_answer_is_never_doubled() {
    let board = Board::new();
    board.ok(&["post", "x", "-q", "kept"]);
    let pid = board.pid().unwrap();
    // SAFETY: SIGSTOP of the private board's redis-server, by its pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let out = board.run(&["count", "-q", "kept"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains(&format!("(pid {pid}) is running but did not answer")),
        "{err}"
    );
    let servers: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|p| p.parse::<u32>().is_ok())
        .filter(|p| {
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            let cwd = std::fs::read_link(format!("/proc/{p}/cwd")).ok();
            comm.trim() == "redis-server" && cwd == std::fs::canonicalize(board.dir()).ok()
        })
        .collect();
    assert_eq!(servers, vec![pid.to_string()], "one server on the data directory");
    let status: Value = serde_json::from_str(&board.ok(&["--json", "server", "status"])).unwrap();
    assert_eq!(status["pid"], pid, "{status}");
    assert_eq!(status["running"], true, "{status}");
    assert_eq!(status["answering"], false, "{status}");
    board.ok(&["server", "stop"]);
    assert!(!alive(pid), "server stop ended the stopped server");
    assert_eq!(board.count("kept"), 1, "the job survived");
}

/// A command waiting for a server that does not answer starts one of its
/// own once that server is gone (killed, or shut down): it waited out its
/// 10 s and failed "is running but did not answer" about a process that no
/// longer existed. The job, fsynced to the append-only file, is there.
#[test]
fn a_command_waiting_for_a_silent_server_starts_one_when_it_is_gone() {
    let board = Board::new();
    board.ok(&["post", "x", "-q", "kept"]);
    let pid = board.pid().unwrap();
    // SAFETY: SIGSTOP of the private board's redis-server, by its pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let waiting = jobworker_command()
        .args(["--data-dir", board.dir(), "--json", "count", "-q", "kept"])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The command is most likely waiting by now (its probes of the silent
    // server time out after 1 s each, its wait after 10 s); if it is not,
    // it finds no server and starts one, which passes too.
    std::thread::sleep(Duration::from_secs(5));
    // SAFETY: kill -9 of the private board's stopped redis-server, by its pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let out = waiting.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let count: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(count["count"], 1, "the job survived");
    let now = board.pid().expect("a server runs again");
    assert_ne!(now, pid);
}
