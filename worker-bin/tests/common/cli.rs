//! The `jobworker` command line as an operator runs it: one command per
//! process against one Redis, its output parsed, and `jobworker events`
//! children read line by line.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker_tests::{shared_redis, wait_for_blocking};
use serde_json::Value;

/// How long an `events` child may take to subscribe, and then to finish.
pub const EVENTS_DEADLINE: Duration = Duration::from_secs(10);

/// The `jobworker` binary with no board chosen by the environment.
pub fn jobworker_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jobworker"));
    cmd.env_remove("JOBWORKER_REDIS_URL")
        .env_remove("JOBWORKER_DATA_DIR")
        .env_remove("JOBWORKER_ZOOKEEPER")
        .env_remove("JOBWORKER_QUEUE")
        .env_remove("JOBWORKER_OWNER");
    cmd
}

/// Runs `cmd`; returns (exit code, stdout, stderr).
pub fn output_of(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("run jobworker");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// The `jobworker` command line pointed at one Redis.
pub struct Cli {
    pub url: String,
}

impl Cli {
    pub fn shared() -> Cli {
        Cli {
            url: shared_redis().url().to_owned(),
        }
    }

    pub fn on(server: &RedisServer) -> Cli {
        Cli { url: server.url() }
    }

    pub fn run(&self, json: bool, args: &[&str]) -> Output {
        let mut cmd = jobworker_command();
        cmd.args(["--redis", &self.url]);
        if json {
            cmd.arg("--json");
        }
        cmd.args(args).output().expect("run jobworker")
    }

    /// Runs without `--json`, expects success, returns stdout.
    pub fn text(&self, args: &[&str]) -> String {
        self.succeeds(false, args)
    }

    /// Runs, expects success, returns stdout.
    fn succeeds(&self, json: bool, args: &[&str]) -> String {
        let out = self.run(json, args);
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
    pub fn lines(&self, args: &[&str]) -> Vec<Value> {
        self.succeeds(true, args)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }

    /// Runs with `--json`, expects success and one JSON line, returns it.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut lines = self.lines(args);
        assert_eq!(
            lines.len(),
            1,
            "jobworker {args:?}: one JSON line expected: {lines:?}"
        );
        lines.remove(0)
    }

    /// Runs, expects exit code `code`, returns stderr.
    pub fn fails(&self, code: i32, args: &[&str]) -> String {
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
    pub fn post(&self, queue: &str, name: &str, extra: &[&str]) -> String {
        let mut args = vec!["post", name, "-q", queue];
        args.extend_from_slice(extra);
        let id = self.text(&args).trim().to_owned();
        assert!(!id.is_empty() && !id.contains(char::is_whitespace), "{id:?}");
        id
    }

    /// Claims up to `count` jobs of `queue` as `owner`.
    pub fn claim(&self, queue: &str, owner: &str, count: usize) -> Vec<Value> {
        let n = count.to_string();
        let claimed = self.json(&["claim", "-q", queue, "--owner", owner, "--count", &n]);
        claimed.as_array().expect("claim --json prints an array").clone()
    }

    /// Claims exactly the next job, checks its id, returns its token.
    pub fn claim_one(&self, queue: &str, owner: &str, id: &str) -> String {
        let claimed = self.claim(queue, owner, 1);
        assert_eq!(claimed.len(), 1, "one job to claim in {queue}: {claimed:?}");
        assert_eq!(claimed[0]["id"], id, "{claimed:?}");
        claimed[0]["token"].to_string()
    }

    pub fn consume(&self, queue: &str, id: &str, owner: &str, token: &str) {
        let done = self.json(&["consume", id, "-q", queue, "--owner", owner, "--token", token]);
        assert_eq!(done["result"], "consumed");
    }

    pub fn state(&self, queue: &str, id: &str) -> String {
        let shown = self.json(&["show", id, "-q", queue]);
        shown["state"].as_str().unwrap_or_default().to_owned()
    }

    pub fn ids(&self, args: &[&str]) -> Vec<String> {
        let list = self.json(args);
        list.as_array()
            .unwrap_or_else(|| panic!("{args:?}: not an array: {list}"))
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The Redis server's clock (`TIME`) in milliseconds: the clock the
    /// board's scripts use.
    pub fn server_ms(&self) -> i64 {
        let mut con = redis::Client::open(self.url.as_str())
            .and_then(|c| c.get_connection())
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.url));
        let (s, us): (i64, i64) = redis::cmd("TIME").query(&mut con).unwrap();
        s * 1000 + us / 1000
    }

    /// Waits until the server's clock is past `ms`: for tests of what the
    /// passage of time does (expiries, missed slots), on the board's clock.
    pub fn wait_server_clock_past(&self, ms: i64) {
        let left = u64::try_from(ms - self.server_ms()).unwrap_or(0);
        let what = format!("the server's clock to pass {ms} ms");
        let timeout = Duration::from_millis(left) + Duration::from_secs(10);
        wait_for_blocking(&what, timeout, || (self.server_ms() > ms).then_some(()));
    }

    /// The `queues --json` row of `queue`.
    pub fn queue_row(&self, queue: &str) -> Value {
        let rows = self.json(&["queues"]);
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["queue"] == queue)
            .unwrap_or_else(|| panic!("{queue} missing from queues: {rows}"))
            .clone()
    }
}

/// A redis-server of the test's own, for board-wide state (events,
/// config) that parallel tests must not disturb.
pub fn private_redis() -> RedisServer {
    RedisServer::start(ServerOptions::default()).expect("start a private redis-server")
}

/// This host's clock in Unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// A running `jobworker events` child, killed if a test leaves it behind.
pub struct EventsChild {
    child: Child,
    stdout: Option<thread::JoinHandle<String>>,
    /// Its stderr lines after the one that says it listens.
    stderr: mpsc::Receiver<String>,
}

impl EventsChild {
    /// Spawns `events` with `args` and waits until it says it listens.
    pub fn start(cli: &Cli, args: &[&str]) -> EventsChild {
        let mut child = jobworker_command()
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
            // Read to the end, heard or not: a closed pipe would fail the
            // child's next notice.
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut events = EventsChild {
            child,
            stdout: Some(stdout),
            stderr: rx,
        };
        let deadline = Instant::now() + EVENTS_DEADLINE;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match events.stderr.recv_timeout(left) {
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

    /// Whether the child has exited (on its count, or failing).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// As [`finish`](Self::finish), with its stderr lines since it said
    /// it listens (read to the end of the pipe, once it has exited).
    pub fn finish_with_notices(mut self) -> (Vec<Value>, Vec<String>) {
        let stderr = std::mem::replace(&mut self.stderr, mpsc::channel().1);
        let out = self.finish();
        (out, stderr.iter().collect())
    }

    /// Waits for the child to exit on its own; returns its stdout lines.
    pub fn finish(mut self) -> Vec<Value> {
        let child = &mut self.child;
        let status = wait_for_blocking("`jobworker events` to exit on its own", EVENTS_DEADLINE, || {
            child.try_wait().expect("wait for events")
        });
        let out = self.stdout.take().unwrap().join().unwrap_or_default();
        assert!(status.success(), "events exited with {status}: {out}");
        out.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }
}

impl Drop for EventsChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
