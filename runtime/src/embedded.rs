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
//! ```no_run
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

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tempfile::TempDir;

use crate::error::{Error, Result};

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
    /// Starts `redis-server` with `opts` and waits (up to [`READY_TIMEOUT`])
    /// until it answers `PING`.
    ///
    /// Arguments:
    /// - TCP: `--bind 127.0.0.1 --port P`;
    /// - unix: `--port 0 --unixsocket DIR/redis.sock --unixsocketperm 700`;
    /// - `--save ''` unless `appendonly` (then `--appendonly yes
    ///   --appendfsync everysec`);
    /// - `--dir DIR --daemonize no --protected-mode no`, then `extra_args`.
    ///
    /// Output (stdout and stderr) goes to `DIR/redis.log`. When the port is
    /// picked here and the server loses it to another process, the start is
    /// retried on a new port (up to [`PORT_ATTEMPTS`] times).
    ///
    /// The child gets `PDEATHSIG=SIGKILL`: it dies when the calling *thread*
    /// exits (see the module docs).
    ///
    /// Errors: [`Error::unavailable`] when `redis-server` is not on `PATH` or
    /// never answers (the message quotes the end of `redis.log`),
    /// [`Error::invalid`] for a data dir whose socket path would be too long,
    /// [`Error::io`] when the data dir cannot be made.
    pub fn start(opts: ServerOptions) -> Result<RedisServer> {
        let (dir, temp) = match &opts.data_dir {
            Some(dir) => {
                fs::create_dir_all(dir)
                    .map_err(|e| Error::io(&format!("cannot create data dir {}", dir.display()), e))?;
                let dir = dir
                    .canonicalize()
                    .map_err(|e| Error::io(&format!("cannot resolve data dir {}", dir.display()), e))?;
                (dir, None)
            }
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("jobworker-redis-")
                    .tempdir()
                    .map_err(|e| Error::io("cannot create temp dir for redis-server", e))?;
                (temp.path().to_path_buf(), Some(temp))
            }
        };
        let socket = match opts.transport {
            Transport::Unix => {
                let socket = dir.join(SOCKET_FILE);
                if socket.as_os_str().len() > MAX_SOCKET_PATH {
                    return Err(Error::invalid(format!(
                        "unix socket path {} is longer than {MAX_SOCKET_PATH} bytes; \
                         choose a shorter data dir",
                        socket.display()
                    )));
                }
                Some(socket)
            }
            Transport::Tcp { .. } => None,
        };
        let mut server = RedisServer {
            opts,
            dir,
            port: None,
            socket,
            child: None,
            pid: 0,
            _temp: temp,
        };
        match server.opts.transport {
            Transport::Unix => server.launch().map_err(StartFailure::into_error)?,
            Transport::Tcp { port: Some(port) } => {
                server.port = Some(port);
                server.launch().map_err(StartFailure::into_error)?;
            }
            Transport::Tcp { port: None } => {
                let mut last = None;
                for _ in 0..PORT_ATTEMPTS {
                    server.port = Some(free_port()?);
                    match server.launch() {
                        Ok(()) => {
                            last = None;
                            break;
                        }
                        Err(StartFailure::PortLost(e)) => last = Some(e),
                        Err(StartFailure::Fatal(e) | StartFailure::Exited(e)) => return Err(e),
                    }
                }
                if let Some(e) = last {
                    return Err(Error::unavailable(format!(
                        "redis-server did not start after {PORT_ATTEMPTS} attempts on free ports: {}",
                        e.message()
                    )));
                }
            }
        }
        Ok(server)
    }

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

    /// True while the server process has not exited (it may have been
    /// killed from outside, e.g. by its parent-death signal).
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Kills the server with `SIGKILL` (by PID) and waits for it. Nothing is
    /// flushed; data the server had acknowledged is in the AOF (written
    /// before the reply) when `appendonly` is on. A no-op when it is not
    /// running.
    pub fn kill(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if matches!(child.try_wait(), Ok(None)) {
            signal(self.pid, Signal::SIGKILL)?;
        }
        child
            .wait()
            .map_err(|e| Error::io(&format!("waiting for redis-server {}", self.pid), e))?;
        Ok(())
    }

    /// Stops the server with `SIGTERM` (by PID), waits up to
    /// [`STOP_TIMEOUT`] for it to exit, then sends `SIGKILL`. A no-op when it
    /// is not running.
    pub fn stop(&mut self) -> Result<()> {
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if matches!(child.try_wait(), Ok(None)) {
            signal(self.pid, Signal::SIGTERM)?;
            let deadline = Instant::now() + STOP_TIMEOUT;
            while Instant::now() < deadline {
                match child.try_wait() {
                    Ok(None) => thread::sleep(EXIT_POLL_INTERVAL),
                    _ => break,
                }
            }
        }
        self.kill()
    }

    /// Starts the server again with the same port or socket, data dir and
    /// options, and waits until it answers `PING`. Meant for after
    /// [`kill`](Self::kill) or [`stop`](Self::stop); a server still running
    /// is stopped first. With `appendonly` the data survives (same dir).
    ///
    /// The new process dies with the thread that calls `restart`.
    pub fn restart(&mut self) -> Result<()> {
        self.stop()?;
        self.launch().map_err(StartFailure::into_error)
    }

    /// Spawns one server process and waits for it to answer.
    fn launch(&mut self) -> std::result::Result<(), StartFailure> {
        let log_path = self.log_path();
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| {
                StartFailure::Fatal(Error::io(
                    &format!("cannot open redis log {}", log_path.display()),
                    e,
                ))
            })?;
        let log_start = log.seek(SeekFrom::End(0)).unwrap_or(0);
        let log_err = log.try_clone().map_err(|e| {
            StartFailure::Fatal(Error::io(
                &format!("cannot open redis log {}", log_path.display()),
                e,
            ))
        })?;

        let mut cmd = Command::new(REDIS_SERVER_BIN);
        cmd.args(self.server_args())
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .process_group(0);
        crate::fork::die_with_parent(&mut cmd, Signal::SIGKILL);
        let child = cmd.spawn().map_err(|e| {
            StartFailure::Fatal(if e.kind() == io::ErrorKind::NotFound {
                Error::unavailable(MISSING_HINT)
            } else {
                Error::io("cannot spawn redis-server", e)
            })
        })?;
        self.pid = child.id();
        self.child = Some(child);

        match self.wait_ready() {
            Ok(()) => Ok(()),
            Err(failure) => {
                // Leave no half-started server behind.
                let _ = self.kill();
                let tail = log_tail(&log_path, log_start);
                let failure = match failure {
                    StartFailure::Exited(e) if port_taken(&tail) => StartFailure::PortLost(e),
                    StartFailure::Exited(e) => StartFailure::Fatal(e),
                    other => other,
                };
                Err(failure.map(|e| {
                    Error::unavailable(format!(
                        "{} (data dir {}); end of {}:\n{tail}",
                        e.message(),
                        self.dir.display(),
                        log_path.display()
                    ))
                }))
            }
        }
    }

    /// The command line for the current port / socket and options.
    fn server_args(&self) -> Vec<String> {
        let mut args: Vec<String> = Vec::new();
        let mut push = |name: &str, value: &str| {
            args.push(format!("--{name}"));
            args.push(value.to_owned());
        };
        match &self.socket {
            Some(socket) => {
                push("port", "0");
                push("unixsocket", &socket.to_string_lossy());
                push("unixsocketperm", "700");
            }
            None => {
                push("bind", "127.0.0.1");
                push("port", &self.port.unwrap_or(0).to_string());
            }
        }
        if self.opts.appendonly {
            push("appendonly", "yes");
            push("appendfsync", "everysec");
        } else {
            push("save", "");
        }
        push("dir", &self.dir.to_string_lossy());
        push("daemonize", "no");
        push("protected-mode", "no");
        args.extend(self.opts.extra_args.iter().cloned());
        args
    }

    /// Polls until the server we spawned answers `PING` with `PONG` and
    /// reports our PID, the process exits, or [`READY_TIMEOUT`] passes.
    fn wait_ready(&mut self) -> std::result::Result<(), StartFailure> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut() {
                match child.try_wait() {
                    Ok(None) => {}
                    Ok(Some(status)) => {
                        return Err(StartFailure::Exited(Error::unavailable(format!(
                            "redis-server exited before answering PING ({status})"
                        ))));
                    }
                    Err(e) => return Err(StartFailure::Fatal(Error::io("waiting for redis-server", e))),
                }
            }
            let last_error = match self.probe() {
                Ok(Some(pid)) if pid == self.pid => return Ok(()),
                Ok(Some(pid)) => {
                    // Someone else's server answers on the port we picked.
                    return Err(StartFailure::PortLost(Error::unavailable(format!(
                        "another redis-server (pid {pid}) answers on port {}",
                        self.port.unwrap_or(0)
                    ))));
                }
                Ok(None) => String::from("server is still loading"),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(StartFailure::Fatal(Error::unavailable(format!(
                    "redis-server (pid {}) did not answer PING at {} within {:?}: {last_error}",
                    self.pid,
                    self.url(),
                    READY_TIMEOUT
                ))));
            }
            thread::sleep(PROBE_INTERVAL);
        }
    }

    /// One readiness probe: `PING`, then `INFO server` for the PID.
    /// `Ok(None)` while the server answers but is not ready (`-LOADING`).
    fn probe(&self) -> io::Result<Option<u32>> {
        let mut conn = RawConn::connect(self)?;
        match conn.command(&["PING"])? {
            Reply::Simple(s) if s == "PONG" => {}
            Reply::Error(_) => return Ok(None),
            other => return Err(io::Error::other(format!("unexpected PING reply {other:?}"))),
        }
        match conn.command(&["INFO", "server"])? {
            Reply::Bulk(Some(info)) => {
                let info = String::from_utf8_lossy(&info);
                info.lines()
                    .find_map(|l| l.strip_prefix("process_id:"))
                    .and_then(|pid| pid.trim().parse().ok())
                    .map(Some)
                    .ok_or_else(|| io::Error::other("INFO server has no process_id"))
            }
            other => Err(io::Error::other(format!("unexpected INFO reply {other:?}"))),
        }
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

/// Runs `redis-server --version` and returns the version, e.g. `"7.0.15"`.
pub fn redis_server_version() -> Result<String> {
    let out = Command::new(REDIS_SERVER_BIN)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                Error::unavailable(MISSING_HINT)
            } else {
                Error::io("cannot run redis-server --version", e)
            }
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_version(&text).ok_or_else(|| {
        Error::unavailable(format!(
            "cannot read the version in `redis-server --version` output: {:?}",
            text.trim()
        ))
    })
}

/// Finds `v=X.Y.Z` in `redis-server --version` output.
fn parse_version(text: &str) -> Option<String> {
    text.split_whitespace()
        .find_map(|word| word.strip_prefix("v="))
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// A free loopback port: bind port 0, read it, release it.
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .map_err(|e| Error::io("cannot bind a free loopback port", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io("cannot read the free loopback port", e))?
        .port();
    Ok(port)
}

/// Sends `sig` to `pid`; an already gone process is not an error.
fn signal(pid: u32, sig: Signal) -> Result<()> {
    let raw = i32::try_from(pid).map_err(|_| Error::invalid(format!("bad pid {pid}")))?;
    match kill(Pid::from_raw(raw), sig) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(Error::io(
            &format!("cannot send {sig} to redis-server {pid}"),
            io::Error::from(e),
        )),
    }
}

/// True when a server log says the TCP port could not be bound.
fn port_taken(log: &str) -> bool {
    log.contains("Address already in use") || log.contains("Failed listening on port")
}

/// The last [`LOG_TAIL_LINES`] lines of the log written since `from`.
fn log_tail(path: &Path, from: u64) -> String {
    let mut text = String::new();
    let read = File::open(path).and_then(|mut f| {
        f.seek(SeekFrom::Start(from))?;
        f.read_to_string(&mut text)
    });
    if let Err(e) = read {
        return format!("(cannot read log: {e})");
    }
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return String::from("(log is empty)");
    }
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

/// A RESP reply, as far as the probe and the unit tests need it.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

/// A blocking RESP connection over TCP or a unix socket.
struct RawConn {
    reader: BufReader<Box<dyn ReadWrite>>,
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

impl RawConn {
    /// Connects to `server`'s port or socket with short timeouts.
    fn connect(server: &RedisServer) -> io::Result<RawConn> {
        let stream: Box<dyn ReadWrite> = match (&server.socket, server.port) {
            (Some(socket), _) => {
                let s = UnixStream::connect(socket)?;
                s.set_read_timeout(Some(PROBE_IO_TIMEOUT))?;
                s.set_write_timeout(Some(PROBE_IO_TIMEOUT))?;
                Box::new(s)
            }
            (None, Some(port)) => {
                let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
                let s = TcpStream::connect_timeout(&addr, PROBE_IO_TIMEOUT)?;
                s.set_read_timeout(Some(PROBE_IO_TIMEOUT))?;
                s.set_write_timeout(Some(PROBE_IO_TIMEOUT))?;
                s.set_nodelay(true)?;
                Box::new(s)
            }
            (None, None) => return Err(io::Error::other("server has no address")),
        };
        Ok(RawConn {
            reader: BufReader::new(stream),
        })
    }

    /// Sends one command as a RESP array of bulk strings and reads the reply.
    fn command(&mut self, args: &[&str]) -> io::Result<Reply> {
        let mut buf = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            buf.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            buf.extend_from_slice(arg.as_bytes());
            buf.extend_from_slice(b"\r\n");
        }
        let stream = self.reader.get_mut();
        stream.write_all(&buf)?;
        stream.flush()?;
        self.read_reply()
    }

    fn read_line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed by redis-server",
            ));
        }
        Ok(line.trim_end_matches(['\r', '\n']).to_owned())
    }

    fn read_reply(&mut self) -> io::Result<Reply> {
        let line = self.read_line()?;
        let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("bad reply {line:?}"));
        let (kind, rest) = line.split_at_checked(1).ok_or_else(bad)?;
        match kind {
            "+" => Ok(Reply::Simple(rest.to_owned())),
            "-" => Ok(Reply::Error(rest.to_owned())),
            ":" => rest.parse().map(Reply::Integer).map_err(|_| bad()),
            "$" => {
                let len: i64 = rest.parse().map_err(|_| bad())?;
                if len < 0 {
                    return Ok(Reply::Bulk(None));
                }
                let len = usize::try_from(len).map_err(|_| bad())?;
                let mut data = vec![0; len + 2];
                self.reader.read_exact(&mut data)?;
                data.truncate(len);
                Ok(Reply::Bulk(Some(data)))
            }
            "*" => {
                let len: i64 = rest.parse().map_err(|_| bad())?;
                if len < 0 {
                    return Ok(Reply::Array(None));
                }
                let items = (0..len)
                    .map(|_| self.read_reply())
                    .collect::<io::Result<Vec<_>>>()?;
                Ok(Reply::Array(Some(items)))
            }
            _ => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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
