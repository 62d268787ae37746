//! The board server of a chaos run: a private `redis-server` with AOF, or a
//! private ZooKeeper, in the run's directory on a free loopback port,
//! killed with SIGKILL and restarted on the same port and data once.
//!
//! Both are stopped by PID when dropped, and die with the thread that
//! started them (Redis) or with the process (ZooKeeper): start and restart
//! them from a thread that lives as long as the run.

use std::io;
use std::path::Path;

use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::RedisOptions;
use jobworker::zookeeper::ZooKeeperOptions as BoardZooKeeperOptions;
use jobworker::BoardSpec;

use crate::chaos::config::{Appendfsync, Backend};
use crate::{ZooKeeperOptions, ZooKeeperServer};

/// A running board server.
#[derive(Debug)]
pub enum Server {
    /// `redis-server` with `appendonly yes`.
    Redis {
        /// The server.
        server: RedisServer,
        /// Its `appendfsync`.
        fsync: Appendfsync,
    },
    /// A ZooKeeper server; queues live under `root`.
    ZooKeeper {
        /// The server.
        server: Box<ZooKeeperServer>,
        /// The chroot of the run (`/chaos-<seed>`).
        root: String,
    },
}

impl Server {
    /// Starts the server for `backend` with its data under `dir`.
    pub fn start(backend: Backend, dir: &Path, fsync: Appendfsync, seed: u64) -> io::Result<Server> {
        match backend {
            Backend::Redis => {
                let server = RedisServer::start(ServerOptions {
                    appendonly: true,
                    data_dir: Some(dir.join("redis")),
                    extra_args: vec!["--appendfsync".into(), fsync.as_str().into()],
                    ..ServerOptions::default()
                })
                .map_err(|e| io::Error::other(e.to_string()))?;
                Ok(Server::Redis { server, fsync })
            }
            Backend::ZooKeeper => {
                let server = ZooKeeperServer::start(ZooKeeperOptions {
                    dir: Some(dir.join("zookeeper")),
                    ..ZooKeeperOptions::default()
                })?;
                Ok(Server::ZooKeeper {
                    server: Box::new(server),
                    root: format!("/chaos-{seed:x}"),
                })
            }
        }
    }

    /// The `jobworker` flags that name the board.
    pub fn board_args(&self) -> Vec<String> {
        match self {
            Server::Redis { server, .. } => vec!["--redis".into(), server.url()],
            Server::ZooKeeper { .. } => vec!["--zookeeper".into(), self.zookeeper_connect()],
        }
    }

    /// Where a client connects to the board.
    pub fn spec(&self) -> BoardSpec {
        match self {
            Server::Redis { server, .. } => BoardSpec::Redis(RedisOptions::new(server.url())),
            Server::ZooKeeper { .. } => {
                BoardSpec::ZooKeeper(BoardZooKeeperOptions::new(self.zookeeper_connect()))
            }
        }
    }

    fn zookeeper_connect(&self) -> String {
        match self {
            Server::ZooKeeper { server, root } => format!("{}{root}", server.connect_string()),
            Server::Redis { .. } => unreachable!("only a ZooKeeper server has a connect string"),
        }
    }

    /// What the server is, for the report.
    pub fn describe(&self) -> String {
        match self {
            Server::Redis { fsync, .. } => {
                format!("redis-server, appendonly yes, appendfsync {}", fsync.as_str())
            }
            Server::ZooKeeper { server, .. } => format!(
                "ZooKeeper (tickTime {} ms, forceSync=no), jobworker sessions {} s",
                server.options().tick_time.as_millis(),
                super::config::zookeeper_session().as_secs()
            ),
        }
    }

    /// Kills the server with SIGKILL and waits for it.
    pub fn kill(&mut self) -> io::Result<()> {
        match self {
            Server::Redis { server, .. } => server.kill().map_err(|e| io::Error::other(e.to_string())),
            Server::ZooKeeper { server, .. } => server.kill(),
        }
    }

    /// Starts the server again on the same port and data dir; returns once
    /// it answers.
    pub fn restart(&mut self) -> io::Result<()> {
        match self {
            Server::Redis { server, .. } => server.restart().map_err(|e| io::Error::other(e.to_string())),
            Server::ZooKeeper { server, .. } => server.restart(),
        }
    }
}
