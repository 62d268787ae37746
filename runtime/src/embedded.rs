//! A private `redis-server` that the `jobworker` CLI and the tests start.
//!
//! [`RedisServer::start`] spawns `redis-server` (found on `PATH`) listening
//! on a loopback TCP port or on a unix socket inside its data directory, and
//! returns once the server answers `PING`. The server is stopped by PID when
//! the [`RedisServer`] is dropped, and it also dies with the thread that
//! started it (`PR_SET_PDEATHSIG` = `SIGKILL`), so a crashed or killed owner
//! leaves no server behind.
//!
//! **Start it from a thread that lives as long as the server should.** Linux
//! delivers the parent-death signal when the *thread* that spawned the child
//! exits, not when the process does: a server started from a short-lived
//! thread (a `#[test]` thread, a `spawn_blocking` task) is killed when that
//! thread ends. The CLI starts it from `main`; the test support starts it from
//! a dedicated thread that never exits.
//!
//! The server runs in a process group of its own, so a Ctrl-C in the terminal
//! reaches the owner (which then shuts down in order and stops the server)
//! and not the server directly.
//!
//! ```
//! use jobworker::embedded::{RedisServer, ServerOptions, Transport};
//!
//! # fn main() -> jobworker::Result<()> {
//! let server = RedisServer::start(ServerOptions {
//!     transport: Transport::Unix,
//!     ..ServerOptions::default()
//! })?;
//! println!("using a private redis-server at {}", server.url());
//! # Ok(())
//! # }
//! ```

mod launch;
mod probe;
mod shutdown;
mod start;
mod version;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use tempfile::TempDir;

use crate::error::Error;

pub use version::redis_server_version;

/// Name of the server binary looked up on `PATH`.
pub const REDIS_SERVER_BIN: &str = "redis-server";
/// How long [`RedisServer::start`] and [`RedisServer::restart`] wait for `PING`.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`RedisServer::stop`] waits after `SIGTERM` before `SIGKILL`.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// How many free ports [`RedisServer::start`] tries when it picks the port.
pub const PORT_ATTEMPTS: usize = 5;
/// File name of the server's log (stdout and stderr) inside the data dir.
pub const LOG_FILE: &str = "redis.log";
/// File name of the unix socket inside the data dir ([`Transport::Unix`]).
pub const SOCKET_FILE: &str = "redis.sock";

/// Longest unix socket path accepted (`sun_path` holds 108 bytes with the NUL).
const MAX_SOCKET_PATH: usize = 107;
/// Pause between two readiness probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(20);
/// Read/write timeout of one readiness probe.
const PROBE_IO_TIMEOUT: Duration = Duration::from_secs(1);
/// Pause between two checks whether a signalled server has exited.
const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Lines of `redis.log` quoted in a start error.
const LOG_TAIL_LINES: usize = 20;
/// The hint given when the binary is missing.
const MISSING_HINT: &str =
    "redis-server not found on PATH; install it with `apt-get install -y redis-server`";

/// Where the server listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// TCP on 127.0.0.1.
    Tcp {
        /// The port; `None` picks a free loopback port.
        port: Option<u16>,
    },
    /// A unix socket `redis.sock` in the data dir (mode 700, TCP disabled).
    Unix,
}

impl Default for Transport {
    fn default() -> Self {
        Transport::Tcp { port: None }
    }
}

/// How to start the server.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// Where the server listens (default: a free loopback TCP port).
    pub transport: Transport,
    /// `appendonly yes` with `appendfsync everysec`; otherwise persistence
    /// is off (`save ""`).
    pub appendonly: bool,
    /// The server's `dir` (AOF, RDB, log, socket); created if missing and
    /// kept. `None` uses a temp dir that is removed on drop.
    pub data_dir: Option<PathBuf>,
    /// Extra command-line arguments (`--name value` pairs), appended last so
    /// they override the defaults.
    pub extra_args: Vec<String>,
}

/// A running private `redis-server`, stopped when dropped.
#[derive(Debug)]
pub struct RedisServer {
    opts: ServerOptions,
    dir: PathBuf,
    port: Option<u16>,
    socket: Option<PathBuf>,
    child: Option<Child>,
    pid: u32,
    /// Declared last: removed only after `Drop::drop` has stopped the server.
    _temp: Option<TempDir>,
}

/// Why one start attempt failed.
enum StartFailure {
    /// Another server answered on our port: worth another try on a fresh
    /// port.
    PortLost(Error),
    /// The process exited before answering; a try on a fresh port helps only
    /// when its log says the port was taken.
    Exited(Error),
    /// Anything else.
    Fatal(Error),
}

impl RedisServer {
    /// The URL clients use: `redis://127.0.0.1:P/` or
    /// `unix:///path/to/redis.sock`.
    pub fn url(&self) -> String {
        match (&self.socket, self.port) {
            (Some(socket), _) => format!("unix://{}", socket.display()),
            (None, Some(port)) => format!("redis://127.0.0.1:{port}/"),
            (None, None) => unreachable!("a tcp server always has a port"),
        }
    }

    /// PID of the server process (of the last one started, after
    /// [`kill`](Self::kill) or [`stop`](Self::stop)).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The TCP port, or `None` for [`Transport::Unix`].
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The unix socket path, or `None` for [`Transport::Tcp`].
    pub fn socket_path(&self) -> Option<&Path> {
        self.socket.as_deref()
    }

    /// The server's data dir (AOF, RDB, `redis.log`, socket).
    pub fn data_dir(&self) -> &Path {
        &self.dir
    }

    /// Path of the server's log file, `<data_dir>/redis.log`.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
    }
}

impl Drop for RedisServer {
    /// Stops the server (errors ignored); a temp data dir is removed after
    /// the process is gone.
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

impl StartFailure {
    fn into_error(self) -> Error {
        match self {
            StartFailure::PortLost(e) | StartFailure::Exited(e) | StartFailure::Fatal(e) => e,
        }
    }

    fn map(self, f: impl FnOnce(Error) -> Error) -> Self {
        match self {
            StartFailure::PortLost(e) => StartFailure::PortLost(f(e)),
            StartFailure::Exited(e) => StartFailure::Exited(f(e)),
            StartFailure::Fatal(e) => StartFailure::Fatal(f(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::launch::port_taken;
    use super::probe::{RawConn, Reply};
    use super::start::free_port;
    use super::version::parse_version;
    use super::*;
    use nix::errno::Errno;
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::thread;
    use std::time::Instant;

    fn is_gone(pid: u32) -> bool {
        matches!(kill(Pid::from_raw(pid as i32), None), Err(Errno::ESRCH))
            && !Path::new(&format!("/proc/{pid}")).exists()
    }

    fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + timeout;
        while !f() {
            assert!(Instant::now() < deadline, "timed out after {timeout:?}: {what}");
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn config_pair(name: &str, value: &str) -> Reply {
        Reply::Array(Some(vec![
            Reply::Bulk(Some(name.as_bytes().to_vec())),
            Reply::Bulk(Some(value.as_bytes().to_vec())),
        ]))
    }

    fn command(server: &RedisServer, args: &[&str]) -> Reply {
        RawConn::connect(server)
            .and_then(|mut c| c.command(args))
            .unwrap_or_else(|e| panic!("{args:?} against {}: {e}", server.url()))
    }

    #[test]
    fn starts_on_a_free_port_and_answers_ping() {
        let server = RedisServer::start(ServerOptions::default()).unwrap();
        let port = server.port().expect("tcp server has a port");
        assert_ne!(port, 0);
        assert_eq!(server.url(), format!("redis://127.0.0.1:{port}/"));
        assert!(server.socket_path().is_none());
        assert_eq!(command(&server, &["PING"]), Reply::Simple("PONG".into()));
        assert_eq!(
            command(&server, &["CONFIG", "GET", "save"]),
            config_pair("save", "")
        );
        assert!(server.data_dir().is_dir());
        assert!(server.log_path().is_file());
    }

    #[test]
    fn two_servers_get_different_ports() {
        let a = RedisServer::start(ServerOptions::default()).unwrap();
        let b = RedisServer::start(ServerOptions::default()).unwrap();
        assert_ne!(a.port(), b.port());
        assert_ne!(a.pid(), b.pid());
    }

    #[test]
    fn kill_and_restart_keeps_aof_data() {
        let mut server = RedisServer::start(ServerOptions {
            appendonly: true,
            ..ServerOptions::default()
        })
        .unwrap();
        let port = server.port();
        let first_pid = server.pid();
        assert_eq!(
            command(&server, &["SET", "jw:selftest", "kept"]),
            Reply::Simple("OK".into())
        );
        server.kill().unwrap();
        assert!(!server.is_running());
        assert!(is_gone(first_pid), "killed server {first_pid} still exists");

        server.restart().unwrap();
        assert_ne!(server.pid(), first_pid);
        assert_eq!(server.port(), port, "restart keeps the port");
        assert_eq!(
            command(&server, &["GET", "jw:selftest"]),
            Reply::Bulk(Some(b"kept".to_vec()))
        );
    }

    #[test]
    fn stop_and_restart_on_a_unix_socket() {
        let mut server = RedisServer::start(ServerOptions {
            transport: Transport::Unix,
            ..ServerOptions::default()
        })
        .unwrap();
        let socket = server.data_dir().join(SOCKET_FILE);
        assert_eq!(server.url(), format!("unix://{}", socket.display()));
        assert_eq!(server.port(), None);
        assert_eq!(server.socket_path(), Some(socket.as_path()));
        assert_eq!(command(&server, &["PING"]), Reply::Simple("PONG".into()));
        assert_eq!(
            command(&server, &["CONFIG", "GET", "port"]),
            config_pair("port", "0")
        );
        assert_eq!(
            command(&server, &["CONFIG", "GET", "unixsocketperm"]),
            config_pair("unixsocketperm", "700")
        );
        let mode = fs::metadata(&socket).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "socket mode {mode:o}");

        let pid = server.pid();
        server.stop().unwrap();
        assert!(is_gone(pid));
        server.restart().unwrap();
        assert_eq!(command(&server, &["PING"]), Reply::Simple("PONG".into()));
    }

    #[test]
    fn user_data_dir_is_kept_and_used() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("data");
        {
            let server = RedisServer::start(ServerOptions {
                appendonly: true,
                data_dir: Some(dir.clone()),
                ..ServerOptions::default()
            })
            .unwrap();
            assert_eq!(server.data_dir(), dir.canonicalize().unwrap());
            assert_eq!(command(&server, &["SET", "k", "v"]), Reply::Simple("OK".into()));
        }
        assert!(dir.join(LOG_FILE).is_file());
        assert!(dir.join("appendonlydir").is_dir());
    }

    #[test]
    fn drop_ends_the_process_and_removes_the_temp_dir() {
        let server = RedisServer::start(ServerOptions::default()).unwrap();
        let pid = server.pid();
        let dir = server.data_dir().to_path_buf();
        assert!(!is_gone(pid));
        drop(server);
        wait_for("dropped server to be gone", Duration::from_secs(10), || {
            is_gone(pid)
        });
        assert!(!dir.exists(), "temp dir {} was not removed", dir.display());
    }

    #[test]
    fn dies_with_the_thread_that_started_it() {
        let mut server = thread::spawn(|| RedisServer::start(ServerOptions::default()))
            .join()
            .unwrap()
            .unwrap();
        wait_for(
            "server to die with its spawning thread",
            Duration::from_secs(10),
            || !server.is_running(),
        );
        let pid = server.pid();
        drop(server);
        assert!(is_gone(pid));
    }

    #[test]
    fn bad_arguments_fail_with_the_log_tail() {
        let err = RedisServer::start(ServerOptions {
            extra_args: vec!["--no-such-option".into(), "x".into()],
            ..ServerOptions::default()
        })
        .unwrap_err();
        assert!(err.is_unavailable(), "{err:?}");
        assert!(err.message().contains("no-such-option"), "{}", err.message());
    }

    #[test]
    fn fixed_port_is_used_and_a_taken_one_is_reported() {
        let port = free_port().unwrap();
        let server = RedisServer::start(ServerOptions {
            transport: Transport::Tcp { port: Some(port) },
            ..ServerOptions::default()
        })
        .unwrap();
        assert_eq!(server.port(), Some(port));
        assert_eq!(command(&server, &["PING"]), Reply::Simple("PONG".into()));

        let err = RedisServer::start(ServerOptions {
            transport: Transport::Tcp { port: Some(port) },
            ..ServerOptions::default()
        })
        .unwrap_err();
        assert!(err.is_unavailable(), "{err:?}");
        let msg = err.message();
        assert!(
            port_taken(msg) || msg.contains(&format!("another redis-server (pid {}) answers", server.pid())),
            "{msg}"
        );
    }

    #[test]
    fn too_long_socket_path_is_invalid() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("d".repeat(120));
        let err = RedisServer::start(ServerOptions {
            transport: Transport::Unix,
            data_dir: Some(dir),
            ..ServerOptions::default()
        })
        .unwrap_err();
        assert_eq!(err.kind(), &crate::error::ErrorKind::Invalid);
    }

    #[test]
    fn reads_the_server_version() {
        let version = redis_server_version().unwrap();
        assert!(
            version.split('.').count() >= 2 && version.chars().next().unwrap().is_ascii_digit(),
            "{version}"
        );
        assert_eq!(
            parse_version("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0"),
            Some("7.0.15".into())
        );
        assert_eq!(parse_version("something else"), None);
    }
}
