//! Real ZooKeeper servers (Debian's `zookeeper` package) for the tests.
//!
//! - [`shared_zookeeper`]: one server per test binary, started on first use
//!   and killed by PID when the process exits. Tests keep apart by using
//!   their own paths (e.g. `/` + [`unique_queue`](crate::unique_queue)).
//! - [`ZooKeeperServer::start`]: a private server that a test may
//!   [`kill`](ZooKeeperServer::kill) (SIGKILL) and
//!   [`restart`](ZooKeeperServer::restart) on the same port and data dir, for
//!   session-loss and restart tests.
//!
//! Each server is a plain JVM:
//!
//! ```text
//! java -Xmx256m -XX:+UseSerialGC -XX:-UsePerfData
//!      -cp DIR:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar
//!      org.apache.zookeeper.server.quorum.QuorumPeerMain DIR/zoo.cfg
//! ```
//!
//! Debian's `zookeeper.jar` names all its dependency jars in its manifest
//! `Class-Path`, so that one jar is enough; `slf4j-simple.jar` (from
//! `libslf4j-java`, a dependency) is added when present so the server logs
//! to `DIR/zookeeper.log` instead of printing "SLF4J: ... NOP". The config
//! (see [`ZooKeeperServer::config_text`]) listens on `127.0.0.1` only, keeps
//! data in `DIR/data`, whitelists every four-letter word (taskflow/kazoo need
//! `envi`), turns the admin server off and uses a short `tickTime`.
//!
//! A server counts as ready once `ruok` answers `imok` **and** `srvr` reports
//! a `Mode:` line: `ruok` alone answers while the server still says "This
//! ZooKeeper instance is not currently serving requests". Start-up takes
//! about 0.2–0.3 s on an idle machine (the JVM included), more while cargo
//! builds; [`ZooKeeperServer::startup_time`] tells.
//!
//! Every server process is spawned by one dedicated thread that never exits,
//! with `PDEATHSIG=SIGKILL` (which Linux fires when the *spawning thread*
//! exits): so a server never dies with a short-lived test thread, yet dies
//! with the test process if that is killed. Servers run in a process group
//! of their own and are only ever signalled by PID.
//!
//! Nothing here skips a test when ZooKeeper or Java is missing: it fails
//! with a message naming the Debian package to install.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// The server jar of Debian's `libzookeeper-java` (pulled in by `zookeeper`).
pub const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// The SLF4J binding added to the classpath when present (`libslf4j-java`).
pub const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";
/// The Java launcher, looked up on `PATH`.
pub const JAVA_BIN: &str = "java";
/// The main class; with a standalone config it runs `ZooKeeperServerMain`.
pub const MAIN_CLASS: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
/// JVM options: a small heap, a single-threaded GC, no `/tmp/hsperfdata_*`.
pub const JVM_OPTIONS: &[&str] = &["-Xmx256m", "-XX:+UseSerialGC", "-XX:-UsePerfData"];
/// Default `tickTime`: session expiry is checked once per tick.
pub const DEFAULT_TICK_TIME: Duration = Duration::from_millis(200);
/// Default `minSessionTimeout` (ZooKeeper's own default is 2 × `tickTime`).
pub const DEFAULT_MIN_SESSION_TIMEOUT: Duration = Duration::from_millis(400);
/// Default `maxSessionTimeout`, so kazoo's 10 s and longer sessions are not
/// clamped to 20 × `tickTime`.
pub const DEFAULT_MAX_SESSION_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a start or restart waits for the server to serve.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`ZooKeeperServer::stop`] waits after `SIGTERM` before `SIGKILL`.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// How many free ports a start on a picked port tries.
pub const PORT_ATTEMPTS: usize = 5;
/// The config file inside the server dir (the dir is also on the classpath).
pub const CONFIG_FILE: &str = "zoo.cfg";
/// The server's output (stdout and stderr) inside the server dir.
pub const LOG_FILE: &str = "zookeeper.log";
/// The ZooKeeper `dataDir` (snapshots and transaction log) inside the server dir.
pub const DATA_SUBDIR: &str = "data";

/// Pause between two readiness probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(10);
/// Connect and read/write timeout of one readiness probe: short, because a
/// JVM that listens but does not serve yet leaves the probe hanging.
const PROBE_IO_TIMEOUT: Duration = Duration::from_millis(250);
/// Connect and read/write timeout of [`ZooKeeperServer::four_letter_word`].
const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between two checks whether a signalled server has exited.
const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Lines of the server log quoted in a start error.
const LOG_TAIL_LINES: usize = 30;
/// How to install what is missing.
const INSTALL_HINT: &str =
    "install it with `apt-get install -y zookeeper` (it pulls in a Java runtime) or `bash scripts/install-deps`";

static SHARED: OnceLock<ZooKeeperServer> = OnceLock::new();

/// How to start a [`ZooKeeperServer`].
#[derive(Debug, Clone)]
pub struct ZooKeeperOptions {
    /// Loopback client port; `None` picks a free one.
    pub port: Option<u16>,
    /// The server dir (config, `data/`, log); created if missing and kept.
    /// `None` uses a temp dir removed when the server is dropped.
    pub dir: Option<PathBuf>,
    /// `tickTime` (whole milliseconds).
    pub tick_time: Duration,
    /// `minSessionTimeout`: shorter requested sessions are raised to it.
    pub min_session_timeout: Duration,
    /// `maxSessionTimeout`: longer requested sessions are lowered to it.
    pub max_session_timeout: Duration,
    /// Extra `key=value` config lines, written last.
    pub extra_config: Vec<(String, String)>,
    /// Extra jars on the classpath (e.g. `netty-codec.jar` for a Netty
    /// server, which `zookeeper.jar`'s manifest does not list).
    pub extra_classpath: Vec<PathBuf>,
}

impl Default for ZooKeeperOptions {
    fn default() -> Self {
        ZooKeeperOptions {
            port: None,
            dir: None,
            tick_time: DEFAULT_TICK_TIME,
            min_session_timeout: DEFAULT_MIN_SESSION_TIMEOUT,
            max_session_timeout: DEFAULT_MAX_SESSION_TIMEOUT,
            extra_config: Vec::new(),
            extra_classpath: Vec::new(),
        }
    }
}

/// A running ZooKeeper server; killed (by PID) when dropped.
#[derive(Debug)]
pub struct ZooKeeperServer {
    opts: ZooKeeperOptions,
    dir: PathBuf,
    port: u16,
    pid: u32,
    startup: Duration,
    /// When the last JVM was spawned, and where its output starts in the log.
    spawned: (Instant, u64),
    child: Mutex<Option<Child>>,
    /// Declared last: removed only after `Drop::drop` has killed the server.
    _temp: Option<TempDir>,
}

/// Why one launch failed.
enum LaunchFailure {
    /// The port was taken by someone else: worth a try on another port.
    PortLost(io::Error),
    /// Anything else.
    Fatal(io::Error),
}

impl LaunchFailure {
    fn into_error(self) -> io::Error {
        match self {
            LaunchFailure::PortLost(e) | LaunchFailure::Fatal(e) => e,
        }
    }
}

impl ZooKeeperServer {
    /// Starts a server with `opts` and waits (up to [`READY_TIMEOUT`]) until
    /// it serves. On a picked port that another process takes meanwhile, it
    /// retries on a new port (up to [`PORT_ATTEMPTS`] times).
    ///
    /// Errors: [`io::ErrorKind::NotFound`] when ZooKeeper or `java` is not
    /// installed (the message names the package); otherwise an error that
    /// quotes the end of the server log.
    pub fn start(opts: ZooKeeperOptions) -> io::Result<ZooKeeperServer> {
        let mut server = Self::prepare(opts)?;
        if let Some(port) = server.opts.port {
            server.port = port;
            server.launch().map_err(LaunchFailure::into_error)?;
            return Ok(server);
        }
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            server.port = free_port()?;
            match server.launch() {
                Ok(()) => return Ok(server),
                Err(LaunchFailure::PortLost(e)) => last = Some(e),
                Err(LaunchFailure::Fatal(e)) => return Err(e),
            }
        }
        let last = last.map(|e| e.to_string()).unwrap_or_default();
        Err(io::Error::other(format!(
            "ZooKeeper did not start after {PORT_ATTEMPTS} attempts on free ports: {last}"
        )))
    }

    /// Spawns a server on `opts.port` (which must be set) without waiting
    /// for it to serve: a member of an ensemble serves only once a quorum
    /// is up. [`wait_serving`](Self::wait_serving) waits.
    pub(crate) fn spawn_unready(opts: ZooKeeperOptions) -> io::Result<ZooKeeperServer> {
        let port = opts
            .port
            .ok_or_else(|| io::Error::other("spawn_unready needs a port"))?;
        let mut server = Self::prepare(opts)?;
        server.port = port;
        server.spawn_jvm()?;
        Ok(server)
    }

    /// Stops the server if it runs and spawns it again on the same port,
    /// dir and options, without waiting for it to serve.
    pub(crate) fn respawn(&mut self) -> io::Result<()> {
        self.stop()?;
        self.spawn_jvm()
    }

    /// Waits until the last spawned JVM serves (at most `timeout` from its
    /// spawn); on failure kills it and quotes the end of its log.
    pub(crate) fn wait_serving(&mut self, timeout: Duration) -> io::Result<()> {
        self.await_ready(timeout).map_err(LaunchFailure::into_error)
    }

    /// The server's dir made ready, nothing spawned yet.
    fn prepare(opts: ZooKeeperOptions) -> io::Result<ZooKeeperServer> {
        check_installed()?;
        let (dir, temp) = match &opts.dir {
            Some(dir) => {
                fs::create_dir_all(dir)
                    .map_err(|e| context(e, &format!("cannot create {}", dir.display())))?;
                (dir.canonicalize()?, None)
            }
            None => {
                let temp = tempfile::Builder::new().prefix("jobworker-zk-").tempdir()?;
                (temp.path().canonicalize()?, Some(temp))
            }
        };
        fs::create_dir_all(dir.join(DATA_SUBDIR))?;
        Ok(ZooKeeperServer {
            opts,
            dir,
            port: 0,
            pid: 0,
            startup: Duration::ZERO,
            spawned: (Instant::now(), 0),
            child: Mutex::new(None),
            _temp: temp,
        })
    }

    /// `127.0.0.1:PORT`, the connect string for clients (zookeeper-client,
    /// kazoo's `hosts`).
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT/chroot`: every path a client uses is then relative to
    /// `chroot`, which must be absolute and must exist before the client
    /// writes under it.
    pub fn connect_string_with_chroot(&self, chroot: &str) -> String {
        assert!(chroot.starts_with('/'), "chroot {chroot:?} must be absolute");
        format!("127.0.0.1:{}{chroot}", self.port)
    }

    /// The loopback client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// PID of the server process (of the last one started).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The server dir: `zoo.cfg`, `zookeeper.log` and `data/`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The ZooKeeper `dataDir`, `<dir>/data`.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join(DATA_SUBDIR)
    }

    /// The server's log, `<dir>/zookeeper.log`.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
    }

    /// How long the last start or restart took, from spawning the JVM until
    /// the server served.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// The options the server was started with.
    pub fn options(&self) -> &ZooKeeperOptions {
        &self.opts
    }

    /// True while the server process has not exited.
    pub fn is_running(&self) -> bool {
        match self.child.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Sends the four-letter word `word` (`ruok`, `srvr`, `stat`, `envi`,
    /// `cons`, `dump`, `mntr`, `conf`, ...) and returns the whole answer.
    pub fn four_letter_word(&self, word: &str) -> io::Result<String> {
        four_letter_word(self.port, word, FOUR_LETTER_TIMEOUT)
    }

    /// A [`zookeeper_client::Client`] for [`connect_string`](Self::connect_string)
    /// with the crate's default 6 s session.
    ///
    /// Panics when it cannot connect.
    pub async fn client(&self) -> zookeeper_client::Client {
        zookeeper_client::Client::connect(&self.connect_string())
            .await
            .unwrap_or_else(|e| panic!("cannot connect to ZooKeeper at {}: {e}", self.connect_string()))
    }

    /// Kills the server with `SIGKILL` (by PID) and reaps it. Sessions and
    /// znodes survive in the data dir (the transaction log is written before
    /// the server answers). A no-op when it is not running.
    pub fn kill(&mut self) -> io::Result<()> {
        let Some(mut child) = self.child.get_mut().unwrap_or_else(|e| e.into_inner()).take() else {
            return Ok(());
        };
        if matches!(child.try_wait(), Ok(None)) {
            signal(self.pid, libc::SIGKILL)?;
        }
        child.wait()?;
        Ok(())
    }

    /// Stops the server with `SIGTERM` (by PID), waits up to [`STOP_TIMEOUT`],
    /// then kills it. A no-op when it is not running.
    pub fn stop(&mut self) -> io::Result<()> {
        if let Some(child) = self.child.get_mut().unwrap_or_else(|e| e.into_inner()).as_mut() {
            if matches!(child.try_wait(), Ok(None)) {
                signal(self.pid, libc::SIGTERM)?;
                let deadline = Instant::now() + STOP_TIMEOUT;
                while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                    thread::sleep(EXIT_POLL_INTERVAL);
                }
            }
        }
        self.kill()
    }

    /// Starts the server again on the same port, dir and options and waits
    /// until it serves (a running server is stopped first). Znodes and
    /// sessions come back from the data dir; a session's timer starts afresh.
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop()?;
        self.launch().map_err(LaunchFailure::into_error)
    }

    /// The `zoo.cfg` written before every launch.
    pub fn config_text(&self) -> String {
        let o = &self.opts;
        let mut cfg = format!(
            "tickTime={}\n\
             minSessionTimeout={}\n\
             maxSessionTimeout={}\n\
             dataDir={}\n\
             clientPort={}\n\
             clientPortAddress=127.0.0.1\n\
             maxClientCnxns=0\n\
             admin.enableServer=false\n\
             4lw.commands.whitelist=*\n\
             forceSync=no\n\
             preAllocSize=1024\n",
            o.tick_time.as_millis(),
            o.min_session_timeout.as_millis(),
            o.max_session_timeout.as_millis(),
            self.data_dir().display(),
            self.port,
        );
        for (key, value) in &o.extra_config {
            cfg.push_str(&format!("{key}={value}\n"));
        }
        cfg
    }

    /// Writes the config, spawns one JVM and waits until it serves.
    fn launch(&mut self) -> Result<(), LaunchFailure> {
        self.spawn_jvm().map_err(LaunchFailure::Fatal)?;
        self.await_ready(READY_TIMEOUT)
    }

    /// Writes the config and spawns one JVM.
    fn spawn_jvm(&mut self) -> io::Result<()> {
        let config = self.dir.join(CONFIG_FILE);
        fs::write(&config, self.config_text())
            .map_err(|e| context(e, &format!("cannot write {}", config.display())))?;
        let log_path = self.log_path();
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| context(e, &format!("cannot open {}", log_path.display())))?;
        let log_start = log.seek(SeekFrom::End(0)).unwrap_or(0);
        let log_err = log.try_clone()?;

        let mut classpath = format!("{}:{ZOOKEEPER_JAR}", self.dir.display());
        if Path::new(SLF4J_SIMPLE_JAR).is_file() {
            classpath.push(':');
            classpath.push_str(SLF4J_SIMPLE_JAR);
        }
        for jar in &self.opts.extra_classpath {
            classpath.push(':');
            classpath.push_str(&jar.display().to_string());
        }
        let mut cmd = Command::new(JAVA_BIN);
        cmd.args(JVM_OPTIONS)
            .arg("-Dorg.slf4j.simpleLogger.showDateTime=true")
            .arg("-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS")
            .arg("-cp")
            .arg(&classpath)
            .arg(MAIN_CLASS)
            .arg(&config)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .process_group(0);
        let started = Instant::now();
        let child = spawn_on_launcher(cmd).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                io::Error::new(e.kind(), format!("{JAVA_BIN} not found on PATH; {INSTALL_HINT}"))
            } else {
                context(e, "cannot spawn the ZooKeeper JVM")
            }
        })?;
        self.pid = child.id();
        self.spawned = (started, log_start);
        *self.child.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(child);
        Ok(())
    }

    /// Waits until the last spawned JVM serves, at most `timeout` from its
    /// spawn; kills it if it does not.
    fn await_ready(&mut self, timeout: Duration) -> Result<(), LaunchFailure> {
        let (started, log_start) = self.spawned;
        let log_path = self.log_path();
        match self.wait_ready(started + timeout) {
            Ok(()) => {
                self.startup = started.elapsed();
                Ok(())
            }
            Err(why) => {
                // Leave no half-started server behind.
                let _ = self.kill();
                let tail = log_tail(&log_path, log_start);
                let msg = format!(
                    "ZooKeeper (pid {}) on 127.0.0.1:{} did not start: {why}\n--- {} ---\n{tail}",
                    self.pid,
                    self.port,
                    log_path.display()
                );
                let port_lost = tail.contains("Address already in use") || why.contains("another server");
                let e = io::Error::other(msg);
                Err(if port_lost && self.opts.port.is_none() {
                    LaunchFailure::PortLost(e)
                } else {
                    LaunchFailure::Fatal(e)
                })
            }
        }
    }

    /// Polls until `ruok` answers `imok`, `srvr` has a `Mode:` line and
    /// `conf` names our data dir (so another server on the port does not
    /// count).
    fn wait_ready(&mut self, deadline: Instant) -> Result<(), String> {
        let data_dir = format!("dataDir={}", self.data_dir().display());
        let port = self.port;
        let probe = |word: &str| four_letter_word(port, word, PROBE_IO_TIMEOUT);
        loop {
            if let Some(child) = self.child.get_mut().unwrap_or_else(|e| e.into_inner()).as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("the JVM exited early ({status})"));
                }
            }
            if probe("ruok").is_ok_and(|r| r == "imok") && probe("srvr").is_ok_and(|r| r.contains("\nMode: "))
            {
                let conf = self.four_letter_word("conf").unwrap_or_default();
                if conf.contains(&data_dir) {
                    return Ok(());
                }
                return Err(format!("another server answers on the port:\n{conf}"));
            }
            if Instant::now() >= deadline {
                return Err(format!("not serving after {:?}", deadline - self.spawned.0));
            }
            thread::sleep(PROBE_INTERVAL);
        }
    }
}

impl Drop for ZooKeeperServer {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// The ZooKeeper server shared by all tests of this test binary, started on
/// a free loopback port on first use (with [`ZooKeeperOptions::default`]).
///
/// Tests keep apart by using their own paths. Tests that kill or restart a
/// server start their own [`ZooKeeperServer`].
///
/// Panics when the server cannot be started, e.g. with "ZooKeeper is not
/// installed (/usr/share/java/zookeeper.jar is missing); install it with
/// `apt-get install -y zookeeper` ...".
pub fn shared_zookeeper() -> &'static ZooKeeperServer {
    SHARED.get_or_init(|| {
        let server = ZooKeeperServer::start(ZooKeeperOptions::default())
            .unwrap_or_else(|e| panic!("cannot start the shared ZooKeeper for this test binary: {e}"));
        super::exit::stop_at_exit(server.pid, server.dir.clone());
        server
    })
}

/// Sends `word` to `127.0.0.1:port` and reads until the server closes.
fn four_letter_word(port: u16, word: &str, timeout: Duration) -> io::Result<String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(word.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

fn check_installed() -> io::Result<()> {
    if Path::new(ZOOKEEPER_JAR).is_file() {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing); {INSTALL_HINT}"),
        ))
    }
}

/// A request to the launcher thread: a command to spawn, and where to
/// answer.
type LaunchRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` on the process-wide launcher thread (which never exits), with
/// `PDEATHSIG=SIGKILL`, so the child lives exactly as long as this process.
fn spawn_on_launcher(mut cmd: Command) -> io::Result<Child> {
    static LAUNCHER: OnceLock<mpsc::Sender<LaunchRequest>> = OnceLock::new();
    let launcher = LAUNCHER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<LaunchRequest>();
        thread::Builder::new()
            .name("zookeeper-launcher".into())
            .spawn(move || {
                // The sender lives in a static, so `recv` never fails and this
                // thread, whose exit would fire the servers' parent-death
                // signal, never ends.
                while let Ok((mut cmd, reply)) = rx.recv() {
                    let _ = reply.send(cmd.spawn());
                }
                loop {
                    thread::park();
                }
            })
            .expect("cannot spawn the zookeeper-launcher thread");
        tx
    });
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe system calls (prctl, getppid) without allocating. The
    // launcher thread that forks never exits, so the signal fires only when
    // this process dies.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            if std::os::unix::process::parent_id() != parent {
                // The parent is already gone; do not outlive it.
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let (reply_tx, reply_rx) = mpsc::channel();
    launcher
        .send((cmd, reply_tx))
        .map_err(|_| io::Error::other("the zookeeper-launcher thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("the zookeeper-launcher thread dropped a request"))?
}

/// A free loopback TCP port (bound once and released).
pub(crate) fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    // SAFETY: plain kill(2) on a PID we spawned and have not reaped yet (the
    // caller holds its `Child`), so it is not a reused PID.
    if unsafe { libc::kill(pid, sig) } == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    // Already gone (a zombie still accepts signals, so this is rare).
    if err.raw_os_error() == Some(libc::ESRCH) {
        Ok(())
    } else {
        Err(err)
    }
}

/// The last [`LOG_TAIL_LINES`] lines written to `path` from `start` on.
fn log_tail(path: &Path, start: u64) -> String {
    let mut text = String::new();
    if let Ok(mut file) = File::open(path) {
        let _ = file.seek(SeekFrom::Start(start));
        let _ = file.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

fn context(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}
