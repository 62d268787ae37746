//! The supervisor's agent on ZooKeeper: a forked helper process through
//! which the single-threaded supervisor reaches a ZooKeeper board.
//!
//! The ZooKeeper client is async and runs an I/O thread, which the
//! supervisor must not have (it forks; see `blocking.rs`). So the
//! supervisor forks one more child, the agent, which builds its own
//! runtime and board and answers the supervisor's questions over a socket
//! pair: one JSON line per request, one per reply, in order. It answers the
//! job counts (for `--progress` and `--until-drained`) and gives back a
//! dead worker's claims at once (so the crash is blamed on its job even
//! when no worker is forked in the dead one's place).
//!
//! The agent holds no claims: killing it loses nothing (each recovery is
//! one transaction). It exits when the supervisor closes its end (or dies:
//! its parent-death signal is SIGKILL). A reply that does not come within
//! [`REPLY_TIMEOUT`] fails the request, and the agent is killed and forked
//! again at the next request.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::{getpid, getppid, setpgid, ForkResult, Pid};
use serde::{Deserialize, Serialize};

use crate::board::{QueueCounts, Recovered, Recovery};
use crate::error::{Error, ErrorKind, Result};
use crate::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};

/// How long the supervisor waits for one reply (it is blocked meanwhile).
pub(crate) const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// The agent's process name (`/proc/<pid>/comm`).
const PROCESS_NAME: &std::ffi::CStr = c"jobworker-agent";

/// A question of the supervisor.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Request {
    /// The board's stored configuration.
    Config,
    /// How many jobs these queues hold together.
    Counts(Vec<String>),
    /// Give back every claim of a dead worker in a queue.
    Recover {
        /// The queue.
        queue: String,
        /// The dead worker's owner string.
        owner: String,
        /// How it died.
        reason: String,
    },
}

/// The agent's answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply {
    /// The stored configuration.
    Config(HashMap<String, String>),
    /// The counts: listed, claimed, completed, trashed.
    Counts([usize; 4]),
    /// Claims given back: back to ready, trashed.
    Recovered([usize; 2]),
    /// The board refused or failed (the message).
    Failed(String),
}

/// The supervisor's end of a running agent.
#[derive(Debug)]
pub(crate) struct Agent {
    /// `None` once the agent was waited (its pid may be reused) or
    /// disowned by a forked worker.
    pid: Option<Pid>,
    lines: BufReader<UnixStream>,
}

impl Agent {
    /// Forks the agent of the board `opts`. The caller must be
    /// single-threaded (see `fork.rs`); `let_go` runs first in the child,
    /// to drop what is the caller's (the supervisor's signal handlers,
    /// listeners). The child never returns.
    pub(crate) fn fork(opts: ZooKeeperOptions, let_go: impl FnOnce()) -> Result<Agent> {
        let (ours, theirs) =
            UnixStream::pair().map_err(|e| Error::io("cannot make the zookeeper agent's socket", e))?;
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        let parent = getpid();
        match crate::fork::fork_single_threaded() {
            Ok(ForkResult::Parent { child }) => {
                drop(theirs);
                tracing::debug!(pid = child.as_raw(), "zookeeper agent started");
                Agent::new(child, ours)
            }
            Ok(ForkResult::Child) => {
                drop(ours);
                let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let_go();
                    if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err() || getppid() != parent {
                        return 1;
                    }
                    // Out of the terminal's process group: Ctrl-C is the
                    // supervisor's.
                    let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
                    // Told apart from the workers in `ps` (and by tests that
                    // signal workers).
                    let _ = nix::sys::prctl::set_name(PROCESS_NAME);
                    serve(opts, theirs)
                }))
                .unwrap_or(101);
                std::process::exit(code);
            }
            Err(e) => Err(Error::io("cannot fork the zookeeper agent", e.into())),
        }
    }

    /// The supervisor's end of the agent `pid`, forked with the other end
    /// of `stream`.
    fn new(pid: Pid, stream: UnixStream) -> Result<Agent> {
        stream
            .set_read_timeout(Some(REPLY_TIMEOUT))
            .map_err(|e| Error::io("cannot set up the zookeeper agent's socket", e))?;
        Ok(Agent {
            pid: Some(pid),
            lines: BufReader::new(stream),
        })
    }

    /// True when the agent is process `pid`.
    pub(crate) fn is(&self, pid: Pid) -> bool {
        self.pid == Some(pid)
    }

    /// Forgets the process without killing it: it exited and was waited,
    /// or this is a forked worker's copy of the supervisor's end.
    pub(crate) fn disown(&mut self) {
        self.pid = None;
    }

    /// The board's stored configuration.
    pub(crate) fn config(&mut self) -> Result<HashMap<String, String>> {
        match self.ask(&Request::Config)? {
            Reply::Config(stored) => Ok(stored),
            other => Err(unexpected(&other)),
        }
    }

    /// How many jobs `queues` hold together.
    pub(crate) fn counts(&mut self, queues: &[String]) -> Result<QueueCounts> {
        match self.ask(&Request::Counts(queues.to_vec()))? {
            Reply::Counts([listed, claimed, completed, trashed]) => Ok(QueueCounts {
                listed,
                claimed,
                completed,
                trashed,
            }),
            other => Err(unexpected(&other)),
        }
    }

    /// Gives back every claim `owner` held in `queue`.
    pub(crate) fn recover_owner(&mut self, queue: &str, owner: &str, reason: &str) -> Result<Recovered> {
        let request = Request::Recover {
            queue: queue.to_owned(),
            owner: owner.to_owned(),
            reason: reason.to_owned(),
        };
        match self.ask(&request)? {
            Reply::Recovered([back, trashed]) => Ok(Recovered { back, trashed }),
            other => Err(unexpected(&other)),
        }
    }

    /// Sends one request and reads its reply. The board's own failures are
    /// `is_unavailable`; any other error (a failure to talk) leaves the
    /// agent unusable, and the caller drops it (which kills it).
    fn ask(&mut self, request: &Request) -> Result<Reply> {
        let talk = |e: std::io::Error| Error::io("cannot talk to the zookeeper agent", e);
        let mut line = serde_json::to_string(request).map_err(|e| Error::codec(e.to_string()))?;
        line.push('\n');
        self.lines.get_mut().write_all(line.as_bytes()).map_err(talk)?;
        let mut reply = String::new();
        if self.lines.read_line(&mut reply).map_err(talk)? == 0 {
            return Err(Error::new(ErrorKind::Io, "the zookeeper agent exited"));
        }
        match serde_json::from_str(&reply).map_err(|e| Error::codec(e.to_string()))? {
            Reply::Failed(message) => Err(Error::unavailable(message)),
            ok => Ok(ok),
        }
    }
}

impl Drop for Agent {
    /// Kills the agent (it holds nothing to lose) and waits for it. (An
    /// agent the supervisor already waited was disowned: its pid may be
    /// another process' now.)
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            let _ = kill(pid, Signal::SIGKILL);
            let _ = waitpid(pid, None);
        }
    }
}

fn unexpected(reply: &Reply) -> Error {
    Error::codec(format!("the zookeeper agent answered out of turn: {reply:?}"))
}

/// The agent's life in the forked child: answers the supervisor on
/// `stream` until it closes its end. Returns the exit code.
fn serve(opts: ZooKeeperOptions, stream: UnixStream) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "the zookeeper agent cannot start its runtime");
            return 1;
        }
    };
    let mut board: Option<ZooKeeperBoard> = None;
    let mut out = &stream;
    for line in BufReader::new(&stream).lines() {
        let Ok(line) = line else { return 0 };
        let reply = match serde_json::from_str::<Request>(&line) {
            Ok(request) => runtime.block_on(answer(&opts, &mut board, request)),
            Err(e) => Reply::Failed(format!("the zookeeper agent cannot read a request: {e}")),
        };
        let Ok(mut text) = serde_json::to_string(&reply) else {
            return 1;
        };
        text.push('\n');
        if out.write_all(text.as_bytes()).is_err() {
            return 0;
        }
    }
    0
}

/// Answers one request, connecting first when the agent has no board yet
/// (or lost it: a failed connect is tried again at the next request).
async fn answer(opts: &ZooKeeperOptions, board: &mut Option<ZooKeeperBoard>, request: Request) -> Reply {
    if board.is_none() {
        match ZooKeeperBoard::connect(opts.clone()).await {
            Ok(b) => *board = Some(b),
            Err(e) => return Reply::Failed(e.to_string()),
        }
    }
    let Some(b) = board.as_ref() else {
        return Reply::Failed("the zookeeper agent has no board".into());
    };
    let done = match request {
        Request::Config => b.config().await.map(Reply::Config),
        Request::Counts(queues) => b
            .counts_of(&queues)
            .await
            .map(|c| Reply::Counts([c.listed, c.claimed, c.completed, c.trashed])),
        Request::Recover { queue, owner, reason } => Recovery::recover_owner(b, &queue, &owner, &reason)
            .await
            .map(|r| Reply::Recovered([r.back, r.trashed])),
    };
    done.unwrap_or_else(|e| Reply::Failed(e.to_string()))
}
