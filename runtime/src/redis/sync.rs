//! A blocking Redis client for the supervisor, which must stay
//! single-threaded and never runs an async runtime (it forks).

use redis::Connection;

use crate::error::{Error, Result};
use crate::redis::connect::{check_version, client, redact, CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use crate::redis::reply::Reply;
use crate::redis::scripts::{invocation, SCRIPTS};
use crate::redis::RedisOptions;

/// Crashes after which a job counts as a poison pill and is trashed.
pub const POISON_CRASHES: u32 = 3;

/// A blocking connection with the board's options (no threads, no runtime).
pub struct SyncBoard {
    con: Connection,
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
        let unreachable = |e: redis::RedisError| Error::unavailable(format!("cannot reach redis at {}: {e}", redact(&opts.url)));
        let con = client.get_connection_with_timeout(CONNECT_TIMEOUT).map_err(unreachable)?;
        con.set_read_timeout(Some(RESPONSE_TIMEOUT)).map_err(unreachable)?;
        con.set_write_timeout(Some(RESPONSE_TIMEOUT)).map_err(unreachable)?;
        let mut board = SyncBoard { con, opts };
        let info: String = board.query(redis::cmd("INFO").arg("server"))?;
        check_version(&info, &board.opts.url)?;
        Ok(board)
    }

    fn query<T: redis::FromRedisValue>(&mut self, cmd: &redis::Cmd) -> Result<T> {
        Ok(cmd.query(&mut self.con)?)
    }

    /// Gives back every lease `owner` holds in `queue` (a dead worker's),
    /// counting an attempt and a crash on each job; returns (back to ready,
    /// trashed).
    pub fn recover_owner(&mut self, queue: &str, owner: &str, reason: &str) -> Result<(usize, usize)> {
        let keys = self.opts.keys(queue)?;
        let (mut recovered, mut trashed, mut start) = (0, 0, 0i64);
        while start >= 0 {
            let mut inv = invocation(&SCRIPTS.recover_owner, &keys);
            inv.arg(owner).arg(reason).arg(POISON_CRASHES).arg(start);
            let reply = Reply::from_value(inv.invoke(&mut self.con)?)?;
            recovered += reply.int(1)? as usize;
            trashed += reply.int(2)? as usize;
            start = reply.int(3)?;
        }
        Ok((recovered, trashed))
    }

    /// Counts jobs over `queues`.
    pub fn counts(&mut self, queues: &[String]) -> Result<QueueCounts> {
        let mut total = QueueCounts::default();
        for q in queues {
            let keys = self.opts.keys(q)?;
            let (listed, claimed, completed, trashed): (usize, usize, usize, usize) = redis::pipe()
                .hlen(keys.listings())
                .zcard(keys.leases())
                .zcard(keys.completed())
                .hlen(keys.trash())
                .query(&mut self.con)?;
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
        self.query::<()>(redis::cmd("HDEL").arg(&key).arg(owner))
    }
}
