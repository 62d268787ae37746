//! A blocking Redis client for the supervisor, which must stay
//! single-threaded and never runs an async runtime (it forks).

use redis::{Connection, ConnectionLike};

use crate::board::{QueueCounts, Recovered};
use crate::error::{Error, Result};
use crate::redis::cluster::{self, ClusterUrl};
use crate::redis::connect::{check_version, client, redact};
use crate::redis::durability::Durability;
use crate::redis::recover::{add_counts, add_recovered, counts_pipe, GiveBack, OwnerLeases};
use crate::redis::sentinel::{self, SentinelUrl};
use crate::redis::RedisOptions;

/// Timeout of the supervisor's calls: short, so that it never blocks its
/// signal handling for long.
const SYNC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// A blocking connection with the board's options (no threads, no runtime).
pub struct SyncBoard {
    server: Server,
    con: Option<Con>,
    opts: RedisOptions,
}

/// Where the connection goes: one server, the master the sentinels name
/// (asked again at each reconnect), or a cluster.
enum Server {
    Direct(Box<redis::Client>),
    Sentinel(Box<SentinelUrl>),
    Cluster(Box<ClusterUrl>),
}

/// An open connection: to one server, or to a cluster (which routes each
/// call to its slot's master).
enum Con {
    One(Connection),
    Cluster(Box<redis::cluster::ClusterConnection>),
}

impl Con {
    fn link(&mut self) -> &mut dyn ConnectionLike {
        match self {
            Con::One(con) => con,
            Con::Cluster(con) => &mut **con,
        }
    }
}

/// Runs a plain pipeline: as such on one server; a command at a time on
/// a cluster, whose blocking connection takes no pipelines (the
/// supervisor's are small reads).
fn query_pipe<T: redis::FromRedisValue>(
    con: &mut dyn ConnectionLike,
    pipe: &redis::Pipeline,
) -> redis::RedisResult<T> {
    if con.supports_pipelining() {
        return pipe.query(con);
    }
    let values = pipe
        .cmd_iter()
        .map(|cmd| cmd.query::<redis::Value>(con))
        .collect::<redis::RedisResult<Vec<_>>>()?;
    Ok(redis::from_redis_value(redis::Value::Array(values))?)
}

impl SyncBoard {
    /// Connects and checks the server version.
    pub fn connect(opts: RedisOptions) -> Result<SyncBoard> {
        let server = match (cluster::parse(&opts.url), sentinel::parse(&opts.url)) {
            (Some(url), _) => Server::Cluster(Box::new(url?)),
            (None, Some(url)) => Server::Sentinel(Box::new(url?)),
            (None, None) => Server::Direct(Box::new(client(&opts.url)?)),
        };
        let mut board = SyncBoard {
            server,
            con: None,
            opts,
        };
        // On a cluster, the version of one seed node (INFO replies per node).
        let info: String = match &board.server {
            Server::Cluster(url) => {
                let mut seed = SyncBoard::one(client(&url.nodes[0])?, &url.nodes[0])?;
                redis::cmd("INFO").arg("server").query(&mut seed)?
            }
            _ => board.retrying(|con| redis::cmd("INFO").arg("server").query(con))?,
        };
        check_version(&info, &board.opts.url)?;
        Ok(board)
    }

    /// The board configuration stored in Redis (`<prefix>:config`).
    pub fn config(&mut self) -> Result<std::collections::HashMap<String, String>> {
        let key = format!("{}:config", self.opts.prefix);
        self.retrying(|con| redis::cmd("HGETALL").arg(&key).query(con))
    }

    fn open(&self) -> Result<Con> {
        let client = match &self.server {
            Server::Direct(client) => (**client).clone(),
            Server::Sentinel(sentinel) => sentinel::master_blocking(sentinel, SYNC_TIMEOUT)?,
            Server::Cluster(url) => return Ok(Con::Cluster(Box::new(url.blocking(SYNC_TIMEOUT)?))),
        };
        Ok(Con::One(SyncBoard::one(client, &self.opts.url)?))
    }

    /// A connection to one server, with the supervisor's timeouts.
    fn one(client: redis::Client, url: &str) -> Result<Connection> {
        let unreachable = |e: redis::RedisError| crate::redis::connect::refused(&e, url);
        let con = client
            .get_connection_with_timeout(SYNC_TIMEOUT)
            .map_err(unreachable)?;
        con.set_read_timeout(Some(SYNC_TIMEOUT)).map_err(unreachable)?;
        con.set_write_timeout(Some(SYNC_TIMEOUT)).map_err(unreachable)?;
        Ok(con)
    }

    /// Runs `call` on the connection, reconnecting (once) when the
    /// connection is gone or breaks (a server restart).
    fn retrying<T>(
        &mut self,
        mut call: impl FnMut(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        for attempt in 0..2 {
            if self.con.is_none() {
                self.con = Some(self.open()?);
            }
            let Some(con) = self.con.as_mut() else { continue };
            match call(con.link()).and_then(|v| durable(con, self.opts.durability).map(|()| v)) {
                Ok(v) => return Ok(v),
                // READONLY: behind sentinels, the master became a replica.
                Err(e)
                    if attempt == 0
                        && (e.is_io_error()
                            || e.is_connection_dropped()
                            || e.is_timeout()
                            || e.code() == Some("READONLY")) =>
                {
                    self.con = None;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::unavailable(format!(
            "redis at {} keeps dropping the connection",
            redact(&self.opts.url)
        )))
    }

    /// Gives back every lease `owner` holds in `queue` (a dead worker's),
    /// counting an attempt and a crash on each job; returns (back to ready,
    /// trashed).
    pub fn recover_owner(&mut self, queue: &str, owner: &str, reason: &str) -> Result<Recovered> {
        self.give_back(queue, owner, GiveBack::Crash(reason))
    }

    /// Gives back every lease `owner` holds in `queue` counting nothing (a
    /// worker that stopped when asked but could not give them back
    /// itself); returns how many went back.
    #[cfg(feature = "cli")]
    pub(crate) fn release_owner(&mut self, queue: &str, owner: &str) -> Result<usize> {
        Ok(self.give_back(queue, owner, GiveBack::Release)?.back)
    }

    /// Gives back every lease `owner` holds in `queue` as `how` says.
    fn give_back(&mut self, queue: &str, owner: &str, how: GiveBack<'_>) -> Result<Recovered> {
        let keys = self.opts.keys(queue)?;
        let mut leases = OwnerLeases::new(&keys, owner);
        while let Some(find) = leases.next_call() {
            leases.read(self.retrying(|con| find.invoke_blocking(con))?)?;
        }
        let mut total = Recovered::default();
        for call in leases.give_back(how) {
            add_recovered(&mut total, self.retrying(|con| call.invoke_blocking(con))?)?;
        }
        Ok(total)
    }

    /// Counts jobs over `queues`.
    pub fn counts(&mut self, queues: &[String]) -> Result<QueueCounts> {
        let mut total = QueueCounts::default();
        for q in queues {
            let pipe = counts_pipe(&self.opts.keys(q)?);
            let counts = self.retrying(|con| query_pipe(con, &pipe))?;
            add_counts(&mut total, counts);
        }
        Ok(total)
    }

    /// Removes a worker's presence entry (it exited).
    pub fn remove_worker(&mut self, owner: &str) -> Result<()> {
        let key = self.opts.workers_key();
        self.retrying(|con| redis::cmd("HDEL").arg(&key).arg(owner).query::<()>(con))
    }
}

/// With a durability, waits until its replicas hold what `con` wrote (the
/// read timeout stretched to the wait's).
fn durable(con: &mut Con, durability: Option<Durability>) -> redis::RedisResult<()> {
    // A cluster board refuses a durability (see `connect::connect`).
    let (Some(d), Con::One(con)) = (durability, con) else {
        return Ok(());
    };
    con.set_read_timeout(Some(SYNC_TIMEOUT + d.timeout))?;
    let acked = d.wait_cmd().query::<redis::Value>(con);
    con.set_read_timeout(Some(SYNC_TIMEOUT))?;
    d.acknowledged(Some(acked?))
}
