//! A Redis Sentinel setup on loopback ports for one test: a master, one
//! replica and three sentinels (quorum 2), each a `redis-server` process of
//! this test (the sentinels run `redis-server <conf> --sentinel`). The
//! servers die with the test's thread (`PDEATHSIG`) and are killed by PID
//! when the setup is dropped.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jobworker::embedded::{RedisServer, ServerOptions};

/// The master's name in the sentinels' configuration.
pub const MASTER_NAME: &str = "jwmaster";
/// How long a sentinel waits before it calls an unanswering master down.
/// Not shorter: at 1 s, a master that a busy 2-core machine kept from
/// answering while it fed a full sync to the old master (restarted empty)
/// was called down, and the sentinels failed over again to that empty
/// replica, losing every job (seen in CI).
const DOWN_AFTER_MS: u64 = 5000;

/// A master, a replica and three sentinels.
pub struct Sentinels {
    /// The first master (the replica's master until a failover).
    pub master: RedisServer,
    /// The replica (master after a failover).
    pub replica: RedisServer,
    sentinels: Vec<Child>,
    ports: Vec<u16>,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot find a free loopback port")
}

/// `host:port` of a redis-server started by this setup.
fn port_of(server: &RedisServer) -> u16 {
    server.port().expect("a tcp server has a port")
}

impl Sentinels {
    /// Starts the master, the replica (synced) and three sentinels that
    /// see both. Panics naming the package when `redis-server` is missing.
    pub fn start() -> Sentinels {
        let master = RedisServer::start(ServerOptions::default())
            .unwrap_or_else(|e| panic!("cannot start the master redis-server: {e}"));
        let replica = RedisServer::start(ServerOptions {
            extra_args: vec![
                "--replicaof".into(),
                "127.0.0.1".into(),
                port_of(&master).to_string(),
            ],
            ..ServerOptions::default()
        })
        .unwrap_or_else(|e| panic!("cannot start the replica redis-server: {e}"));
        let dir = tempfile::tempdir().expect("temp dir");
        let mut setup = Sentinels {
            master,
            replica,
            sentinels: Vec::new(),
            ports: Vec::new(),
            _dir: dir,
        };
        wait_synced(port_of(&setup.replica), "the replica");
        for n in 0..3 {
            let (child, port) = setup.spawn_sentinel(n);
            setup.sentinels.push(child);
            setup.ports.push(port);
        }
        setup.wait_sentinels_ready();
        setup
    }

    /// `redis+sentinel://127.0.0.1:P1,…/jwmaster` (with `extra`, e.g. `/0`).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> &[u16] {
        &self.ports
    }

    /// The port the sentinels name as master now.
    pub fn master_port(&self) -> Option<u16> {
        for port in &self.ports {
            let reply: redis::RedisResult<Option<(String, String)>> = redis_at(*port).and_then(|mut c| {
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(MASTER_NAME)
                    .query(&mut c)
            });
            if let Ok(Some((_, p))) = reply {
                return p.parse().ok();
            }
        }
        None
    }

    /// Waits until the sentinels name another master than the first one
    /// (after [`kill_master`](Self::kill_master)); panics after `timeout`.
    pub fn wait_failover(&self, timeout: Duration) {
        let first = port_of(&self.master);
        let deadline = Instant::now() + timeout;
        loop {
            if self.master_port().is_some_and(|p| p != first) && self.replica_is_master() {
                return;
            }
            assert!(Instant::now() < deadline, "no failover after {timeout:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the first master (SIGKILL).
    pub fn kill_master(&mut self) {
        self.master.kill().expect("cannot kill the master");
    }

    /// Starts the killed first master again (empty, on its port) and makes
    /// it a replica of the new master, as the sentinels would at their
    /// next look at it (which took 15 s here: a test's time, not the
    /// board's behaviour).
    pub fn restart_old_master(&mut self) {
        self.master.restart().expect("cannot restart the old master");
        let master = self.master_port().expect("the sentinels name no master");
        redis_at(port_of(&self.master))
            .and_then(|mut c| {
                redis::cmd("REPLICAOF")
                    .arg("127.0.0.1")
                    .arg(master)
                    .query::<()>(&mut c)
            })
            .expect("cannot make the old master a replica of the new one");
    }

    /// Waits until the restarted old master is a replica of the new master
    /// and has synced (panics after a minute).
    pub fn wait_old_master_synced(&self) {
        wait_synced(port_of(&self.master), "the restarted old master");
    }

    fn replica_is_master(&self) -> bool {
        let role: redis::RedisResult<String> = redis_at(port_of(&self.replica)).and_then(|mut c| {
            let info: String = redis::cmd("INFO").arg("replication").query(&mut c)?;
            Ok(info)
        });
        role.is_ok_and(|info| info.contains("role:master"))
    }

    fn spawn_sentinel(&self, n: usize) -> (Child, u16) {
        let port = free_port();
        let conf: PathBuf = self._dir.path().join(format!("sentinel-{n}.conf"));
        let text = format!(
            "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n\
             sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n\
             sentinel failover-timeout {MASTER_NAME} 10000\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n",
            dir = self._dir.path().display(),
            master = port_of(&self.master),
        );
        std::fs::write(&conf, text).expect("cannot write the sentinel config");
        let log = std::fs::File::create(self._dir.path().join(format!("sentinel-{n}.log"))).expect("log");
        let mut cmd = Command::new("redis-server");
        cmd.arg(&conf)
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        // SAFETY: prctl is async-signal-safe; the sentinel dies with the
        // thread that started it (the test's).
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap_or_else(|e| {
            panic!("cannot start redis-server --sentinel ({e}); install it with `apt-get install -y redis-server`")
        });
        (child, port)
    }

    fn wait_sentinels_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for port in &self.ports {
            loop {
                // Each sentinel knows the replica and the other two
                // sentinels (so that they can elect a leader).
                let count = |what: &str| -> usize {
                    redis_at(*port)
                        .and_then(|mut c| {
                            redis::cmd("SENTINEL")
                                .arg(what)
                                .arg(MASTER_NAME)
                                .query::<Vec<redis::Value>>(&mut c)
                        })
                        .map_or(0, |r| r.len())
                };
                if count("replicas") >= 1 && count("sentinels") >= 2 {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "sentinel on port {port} never saw the replica and the other sentinels"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Waits until the server on `port` is a replica whose link to its master
/// is up (synced).
fn wait_synced(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info: redis::RedisResult<String> =
            redis_at(port).and_then(|mut c| redis::cmd("INFO").arg("replication").query(&mut c));
        if info.is_ok_and(|i| i.contains("role:slave") && i.contains("master_link_status:up")) {
            return;
        }
        assert!(Instant::now() < deadline, "{what} never synced with its master");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn redis_at(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let con = client.get_connection_with_timeout(Duration::from_secs(1))?;
    con.set_read_timeout(Some(Duration::from_secs(2)))?;
    Ok(con)
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for child in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
