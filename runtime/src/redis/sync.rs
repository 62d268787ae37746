//! A blocking Redis client for the supervisor, which must stay
//! single-threaded and never runs an async runtime (it forks).

use redis::Connection;

use crate::error::{Error, Result};
use crate::redis::connect::{check_version, client, redact};
use crate::redis::reply::Reply;
use crate::redis::scripts::{invocation, SCRIPTS};
use crate::redis::RedisOptions;

/// Timeout of the supervisor's calls: short, so that it never blocks its
/// signal handling for long.
const SYNC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Crashes after which a job counts as a poison pill and is trashed.
pub const POISON_CRASHES: u32 = 3;

/// A blocking connection with the board's options (no threads, no runtime).
pub struct SyncBoard {
    client: redis::Client,
    con: Option<Connection>,
    opts: RedisOptions,
}

/// How many jobs a set of queues holds, for progress reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Jobs in the listings (ready, scheduled, claimed).
    pub listed: usize,
    /// Jobs claimed right now.
    pub claimed: usize,
    /// Jobs in the completed history.
    pub completed: usize,
    /// Jobs in the trash.
    pub trashed: usize,
}

impl SyncBoard {
    /// Connects and checks the server version.
    pub fn connect(opts: RedisOptions) -> Result<SyncBoard> {
        let client = client(&opts.url)?;
        let mut board = SyncBoard {
            client,
            con: None,
            opts,
        };
        let info: String = board.retrying(|con| redis::cmd("INFO").arg("server").query(con))?;
        check_version(&info, &board.opts.url)?;
        Ok(board)
    }

    /// The board configuration stored in Redis (`<prefix>:config`).
    pub fn config(&mut self) -> Result<std::collections::HashMap<String, String>> {
        let key = format!("{}:config", self.opts.prefix);
        self.retrying(|con| redis::cmd("HGETALL").arg(&key).query(con))
    }

    fn open(&self) -> Result<Connection> {
        let unreachable = |e: redis::RedisError| crate::redis::connect::refused(&e, &self.opts.url);
        let con = self
            .client
            .get_connection_with_timeout(SYNC_TIMEOUT)
            .map_err(unreachable)?;
        con.set_read_timeout(Some(SYNC_TIMEOUT)).map_err(unreachable)?;
        con.set_write_timeout(Some(SYNC_TIMEOUT)).map_err(unreachable)?;
        Ok(con)
    }

    /// Runs `call` on the connection, reconnecting (once) when the
    /// connection is gone or breaks (a server restart).
    fn retrying<T>(&mut self, mut call: impl FnMut(&mut Connection) -> redis::RedisResult<T>) -> Result<T> {
        for attempt in 0..2 {
            if self.con.is_none() {
                self.con = Some(self.open()?);
            }
            let Some(con) = self.con.as_mut() else { continue };
            match call(con) {
                Ok(v) => return Ok(v),
                Err(e)
                    if attempt == 0 && (e.is_io_error() || e.is_connection_dropped() || e.is_timeout()) =>
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
    pub fn recover_owner(&mut self, queue: &str, owner: &str, reason: &str) -> Result<(usize, usize)> {
        let keys = self.opts.keys(queue)?;
        let mut inv = invocation(&SCRIPTS.recover_owner, &keys);
        inv.arg(owner).arg(reason).arg(POISON_CRASHES);
        let value = self.retrying(|con| inv.invoke(con))?;
        let reply = Reply::from_value(value)?;
        Ok((reply.int(1)? as usize, reply.int(2)? as usize))
    }

    /// Counts jobs over `queues`.
    pub fn counts(&mut self, queues: &[String]) -> Result<QueueCounts> {
        let mut total = QueueCounts::default();
        for q in queues {
            let keys = self.opts.keys(q)?;
            let mut pipe = redis::pipe();
            pipe.hlen(keys.listings())
                .zcard(keys.leases())
                .zcard(keys.completed())
                .hlen(keys.trash());
            let (listed, claimed, completed, trashed): (usize, usize, usize, usize) =
                self.retrying(|con| pipe.query(con))?;
            total.listed += listed;
            total.claimed += claimed;
            total.completed += completed;
            total.trashed += trashed;
        }
        Ok(total)
    }

    /// Removes a worker's presence entry (it exited).
    pub fn remove_worker(&mut self, owner: &str) -> Result<()> {
        let key = self.opts.workers_key();
        self.retrying(|con| redis::cmd("HDEL").arg(&key).arg(owner).query::<()>(con))
    }
}
