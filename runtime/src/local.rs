//! The user's private board: the Redis the `jobworker` command line uses
//! when no board is given and nothing answers on 127.0.0.1:6379.
//!
//! It is one `redis-server` per data directory (by default
//! `$XDG_DATA_HOME/jobworker`, else `~/.local/share/jobworker`), started on
//! first use and left running for the next command, so `jobworker post` in
//! one terminal and `jobworker run` in another share their jobs. It listens
//! only on a unix socket in that directory (mode 0700: the user's alone) and
//! writes an append-only file fsynced before every reply (`appendfsync
//! always`), so neither a killed server nor a reboot loses an acknowledged
//! job. `jobworker server status` shows it and `jobworker server stop` ends
//! it; a later command starts it again on the same data.
//!
//! Starting is serialised by a lock file in the directory: two commands
//! that start at once share one server. A socket left by a killed server is
//! recognised (nothing answers on it) and replaced.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

use crate::embedded::{LOG_FILE, READY_TIMEOUT, REDIS_SERVER_BIN, SOCKET_FILE};
use crate::error::{Error, Result};

mod owner;
#[cfg(feature = "cli")]
mod stop;

/// The lock file serialising starts, inside the data directory.
const LOCK_FILE: &str = "server.lock";
/// The server's pid file, inside the data directory.
const PID_FILE: &str = "redis.pid";
/// Pause between two probes while a server starts or stops.
const POLL: Duration = Duration::from_millis(20);
/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest unix socket path (`sun_path` holds 108 bytes with the NUL).
const MAX_SOCKET_PATH: usize = 107;

/// The well-known local Redis tried before the private board.
pub(crate) const LOCAL_REDIS: &str = "127.0.0.1:6379";

/// The board the command line uses when given no URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DefaultBoard {
    /// A Redis without a password answers on [`LOCAL_REDIS`].
    Local {
        /// Its URL.
        url: String,
    },
    /// The private board (started now if it was not running).
    Private {
        /// Its directory.
        board: LocalBoard,
        /// Its server.
        running: Running,
    },
}

impl DefaultBoard {
    /// The URL to connect to.
    pub(crate) fn url(&self) -> &str {
        match self {
            DefaultBoard::Local { url } => url,
            DefaultBoard::Private { running, .. } => &running.url,
        }
    }

    /// Finds the board a command given no URL uses: with `data_dir`, the
    /// private board there; else a Redis answering on [`LOCAL_REDIS`], else
    /// the user's private board.
    pub(crate) fn find(data_dir: Option<&Path>) -> Result<DefaultBoard> {
        if let Some(dir) = data_dir {
            let board = LocalBoard::at(dir);
            let running = board.ensure()?;
            return Ok(DefaultBoard::Private { board, running });
        }
        if answers_ping(LOCAL_REDIS) {
            return Ok(DefaultBoard::Local {
                url: format!("redis://{LOCAL_REDIS}/"),
            });
        }
        let board = LocalBoard::for_user()?;
        let running = board.ensure()?;
        Ok(DefaultBoard::Private { board, running })
    }
}

/// Connects an application to the board `jobworker` uses: the URL in
/// `JOBWORKER_REDIS_URL` when set, else the default board (a Redis on
/// 127.0.0.1:6379, else the user's private board, started if need be).
///
/// (Not run here: it would start the private board in your home
/// directory, which outlives the test.)
///
/// ```no_run
/// # async fn app() -> jobworker::Result<()> {
/// use jobworker::{Board, NewJob};
/// let board = jobworker::local::connect().await?;
/// board.post("default", NewJob::new("hello")).await?;
/// # Ok(())
/// # }
/// ```
pub async fn connect() -> Result<crate::redis::RedisBoard> {
    let url = match std::env::var("JOBWORKER_REDIS_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => tokio::task::spawn_blocking(|| DefaultBoard::find(None).map(|b| b.url().to_owned()))
            .await
            .map_err(|e| Error::io("cannot find the default board", std::io::Error::other(e)))??,
    };
    crate::redis::RedisBoard::connect(&url).await
}

/// True when a Redis without a password answers PING at `addr`.
fn answers_ping(addr: &str) -> bool {
    let Ok(addr) = addr.parse::<SocketAddr>() else {
        return false;
    };
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 16];
    s.write_all(b"PING\r\n").is_ok() && matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

/// A private board's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LocalBoard {
    dir: PathBuf,
}

/// A private board's server that answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Running {
    /// The server's process id.
    pub pid: u32,
    /// Its URL (`unix://…/redis.sock`).
    pub url: String,
    /// It was started by this call (not found running).
    pub started_now: bool,
}

impl LocalBoard {
    /// The private board in `dir`.
    /// A relative `dir` is taken from the current directory, once:
    /// redis-server runs inside it, and its paths must not be relative to
    /// themselves.
    pub(crate) fn at(dir: impl Into<PathBuf>) -> LocalBoard {
        let dir = dir.into();
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        LocalBoard { dir }
    }

    /// The private board in the user's data directory:
    /// `$XDG_DATA_HOME/jobworker`, else `$HOME/.local/share/jobworker`.
    pub(crate) fn for_user() -> Result<LocalBoard> {
        let base = match (std::env::var_os("XDG_DATA_HOME"), std::env::var_os("HOME")) {
            (Some(xdg), _) if !xdg.is_empty() => PathBuf::from(xdg),
            (_, Some(home)) if !home.is_empty() => PathBuf::from(home).join(".local/share"),
            _ => {
                return Err(Error::invalid(
                    "neither XDG_DATA_HOME nor HOME is set: give --data-dir, or --redis URL",
                ))
            }
        };
        Ok(LocalBoard::at(base.join("jobworker")))
    }

    /// The data directory.
    #[cfg(feature = "cli")]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The server's unix socket.
    pub(crate) fn socket(&self) -> PathBuf {
        self.dir.join(SOCKET_FILE)
    }

    /// The URL clients use.
    pub(crate) fn url(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// The server, when one answers on the socket.
    pub(crate) fn status(&self) -> Result<Option<Running>> {
        Ok(self.probe().map(|pid| Running {
            pid,
            url: self.url(),
            started_now: false,
        }))
    }

    /// The server, started now if none answers (then waits until it does).
    /// A server of this directory that is alive but does not answer (frozen,
    /// or still loading its data) is waited for, never doubled: two servers
    /// appending to one append-only file would split and garble the jobs.
    pub(crate) fn ensure(&self) -> Result<Running> {
        let _lock = self.lock()?;
        if let Some(running) = self.status()? {
            return Ok(running);
        }
        let mut silent = self.owner();
        let mut log_from = self.log_len();
        if silent.is_none() {
            self.start()?;
        }
        let mut deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(pid) = self.probe() {
                return Ok(Running {
                    pid,
                    url: self.url(),
                    started_now: silent.is_none(),
                });
            }
            match silent {
                // The silent server ended (shut down, or killed): once it
                // is gone, nothing of it writes the data any more.
                Some(pid) if !owner::alive(pid as i32) => {
                    silent = None;
                    log_from = self.log_len();
                    self.start()?;
                    deadline = Instant::now() + READY_TIMEOUT;
                    continue;
                }
                Some(_) => {}
                None => {
                    if let Some(why) = self.exited(log_from) {
                        return Err(Error::unavailable(format!(
                            "the private redis-server in {} exited while starting: {why}; see {}",
                            self.dir.display(),
                            self.log().display()
                        )));
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::unavailable(match silent {
                    Some(pid) => format!(
                        "the private redis-server in {} (pid {pid}) is running but did not answer within \
                         {READY_TIMEOUT:?}: it is stopped, busy or still loading its data, and a second \
                         server on the same data is not started; see {}, or end it with `jobworker server \
                         stop` (same --data-dir)",
                        self.dir.display(),
                        self.log().display()
                    ),
                    None => format!(
                        "the private redis-server in {} did not answer within {READY_TIMEOUT:?}; see {}",
                        self.dir.display(),
                        self.log().display()
                    ),
                }));
            }
            thread::sleep(POLL);
        }
    }

    /// Takes the directory's start lock (made with the directory, 0700).
    fn lock(&self) -> Result<Flock<File>> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| {
                Error::io(
                    &format!("cannot create the board directory {}", self.dir.display()),
                    e,
                )
            })?;
        let path = self.dir.join(LOCK_FILE);
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&format!("cannot open {}", path.display()), e))?;
        Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, e)| Error::io(&format!("cannot lock {}", path.display()), e.into()))
    }

    /// Starts a detached server (it forks into the background itself and
    /// outlives this process).
    fn start(&self) -> Result<()> {
        let socket = self.socket();
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(Error::invalid(format!(
                "unix socket path {} is longer than {MAX_SOCKET_PATH} bytes; choose a shorter --data-dir",
                socket.display()
            )));
        }
        // A socket nobody answers on, or a pid file, was left by a killed
        // server (a pid file read while starting is this start's).
        let _ = fs::remove_file(&socket);
        let _ = fs::remove_file(self.dir.join(PID_FILE));
        let _ = fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700));
        let dir = self.dir.to_string_lossy().into_owned();
        let arg = |p: &str| self.dir.join(p).to_string_lossy().into_owned();
        let status = Command::new(REDIS_SERVER_BIN)
            .args(["--daemonize", "yes", "--dir", &dir])
            .args(["--pidfile", &arg(PID_FILE), "--logfile", &arg(LOG_FILE)])
            .args([
                "--port",
                "0",
                "--unixsocket",
                &arg(SOCKET_FILE),
                "--unixsocketperm",
                "700",
            ])
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--protected-mode",
                "no",
            ])
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Error::unavailable(
                    "redis-server not found on PATH; install it with `apt-get install -y redis-server`",
                ),
                _ => Error::io("cannot start redis-server", e),
            })?;
        if !status.success() {
            return Err(Error::unavailable(format!(
                "redis-server did not start ({status}); see {}",
                self.dir.join(LOG_FILE).display()
            )));
        }
        Ok(())
    }

    /// The pid of the server answering PING on the socket, if one does.
    fn probe(&self) -> Option<u32> {
        let client = redis::Client::open(self.url()).ok()?;
        let mut con = client.get_connection_with_timeout(PROBE_TIMEOUT).ok()?;
        con.set_read_timeout(Some(PROBE_TIMEOUT)).ok()?;
        let pong: String = redis::cmd("PING").query(&mut con).ok()?;
        if pong != "PONG" {
            return None;
        }
        let info: String = redis::cmd("INFO").arg("server").query(&mut con).ok()?;
        info.lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse().ok())
    }
}
