//! One private `redis-server` per test binary.
//!
//! `cargo test` runs the tests of one binary as threads of one process, and
//! each test thread exits when its test ends. The server gets
//! `PDEATHSIG=SIGKILL` (see `jobworker::embedded`), which fires when the
//! *thread* that spawned it exits, so it is started from a dedicated thread
//! that parks forever. At process exit an `atexit` hook kills it by PID and
//! removes its temp dir; if the process is killed instead, the parent-death
//! signal ends the server.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, OnceLock};
use std::thread;

use jobworker::embedded::{RedisServer, ServerOptions};

static SHARED: OnceLock<SharedRedis> = OnceLock::new();

/// The test binary's shared `redis-server` (see [`shared_redis`]).
#[derive(Debug, Clone)]
pub struct SharedRedis {
    url: String,
    pid: u32,
    port: u16,
    data_dir: PathBuf,
}

impl SharedRedis {
    /// `redis://127.0.0.1:P/` of the server.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// PID of the server process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The loopback TCP port of the server.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's temp data dir (holds `redis.log`).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// A `redis` client for [`url`](Self::url).
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url.as_str())
            .unwrap_or_else(|e| panic!("bad shared redis url {}: {e}", self.url))
    }
}

/// The `redis-server` shared by all tests of this test binary, started on a
/// free loopback port on first use (via `jobworker::embedded::RedisServer`).
///
/// Tests keep apart by using their own queue ([`unique_queue`](crate::unique_queue)).
/// Tests that kill or restart a server start their own `RedisServer` instead.
///
/// Panics when the server cannot be started, e.g. with "redis-server not
/// found on PATH; install it with `apt-get install -y redis-server`".
pub fn shared_redis() -> &'static SharedRedis {
    SHARED.get_or_init(start_shared)
}

fn start_shared() -> SharedRedis {
    let (tx, rx) = mpsc::channel();
    thread::Builder::new()
        .name("shared-redis".into())
        .spawn(move || {
            let server = match RedisServer::start(ServerOptions::default()) {
                Ok(server) => server,
                Err(e) => {
                    let _ = tx.send(Err(e.to_string()));
                    return;
                }
            };
            let shared = SharedRedis {
                url: server.url(),
                pid: server.pid(),
                port: server.port().expect("a tcp server has a port"),
                data_dir: server.data_dir().to_path_buf(),
            };
            super::exit::stop_at_exit(shared.pid, shared.data_dir.clone());
            let _ = tx.send(Ok(shared));
            // This thread owns the server and must never exit: its exit
            // would fire the server's parent-death signal.
            loop {
                thread::park();
            }
        })
        .expect("cannot spawn the shared-redis thread");
    match rx.recv() {
        Ok(Ok(shared)) => shared,
        Ok(Err(msg)) => panic!("cannot start the shared redis-server for this test binary: {msg}"),
        Err(_) => panic!("the shared-redis thread died before reporting"),
    }
}
