//! Crash recovery on Redis: giving back a dead worker's leases at once
//! (`recover_owner.lua`), for the async board and the supervisor's
//! blocking one alike; and the job counts the supervisor's progress reads.

use crate::board::{QueueCounts, Recovered, Recovery};
use crate::error::Result;
use crate::redis::board::RedisBoard;
use crate::redis::invocation::Invocation;
use crate::redis::keys::QueueKeys;
use crate::redis::reply::Reply;
use crate::redis::scripts::SCRIPTS;

/// Crashes after which a job counts as a poison pill and is trashed.
pub const POISON_CRASHES: u32 = 3;

/// The call of `recover_owner.lua` for a dead `owner`'s leases in `keys`'
/// queue: the crash (`reason`) and an attempt are counted.
pub(crate) fn recover_invocation<'k>(keys: &'k QueueKeys, owner: &str, reason: &str) -> Invocation<'k> {
    let mut inv = Invocation::new(&SCRIPTS.recover_owner, keys);
    inv.arg(owner).arg(reason).arg(POISON_CRASHES).arg("crash");
    inv
}

/// The call of `recover_owner.lua` giving back what `owner` still holds in
/// `keys`' queue without counting anything ([`Board::release_unread`](crate::Board::release_unread)).
pub(crate) fn release_invocation<'k>(keys: &'k QueueKeys, owner: &str) -> Invocation<'k> {
    let mut inv = Invocation::new(&SCRIPTS.recover_owner, keys);
    inv.arg(owner).arg("").arg(POISON_CRASHES).arg("release");
    inv
}

/// Reads the reply of `recover_owner.lua`.
pub(crate) fn recovered(value: redis::Value) -> Result<Recovered> {
    let reply = Reply::from_value(value)?;
    Ok(Recovered {
        back: reply.int(1)? as usize,
        trashed: reply.int(2)? as usize,
    })
}

/// The pipeline counting one queue's jobs: listed, claimed, completed,
/// trashed.
pub(crate) fn counts_pipe(keys: &QueueKeys) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.hlen(keys.listings())
        .zcard(keys.leases())
        .zcard(keys.completed())
        .hlen(keys.trash());
    pipe
}

/// Adds one queue's counts (the reply of [`counts_pipe`]) to `total`.
pub(crate) fn add_counts(
    total: &mut QueueCounts,
    (listed, claimed, completed, trashed): (usize, usize, usize, usize),
) {
    total.listed += listed;
    total.claimed += claimed;
    total.completed += completed;
    total.trashed += trashed;
}

impl RedisBoard {
    /// Gives back every lease `owner` holds on `queues` without counting
    /// an attempt ([`Board::release_unread`](crate::Board::release_unread)).
    pub(crate) async fn release_owner(&self, queues: &[&str], owner: &str) -> Result<usize> {
        let mut back = 0;
        for queue in queues {
            let keys = self.keys(queue)?;
            back += recovered(release_invocation(&keys, owner).invoke(&self.conn).await?)?.back;
        }
        Ok(back)
    }

    /// How many jobs `queues` hold together.
    pub(crate) async fn counts(&self, queues: &[String]) -> Result<QueueCounts> {
        let mut total = QueueCounts::default();
        for q in queues {
            add_counts(
                &mut total,
                self.conn.query_pipe(&counts_pipe(&*self.keys(q)?)).await?,
            );
        }
        Ok(total)
    }
}

impl Recovery for RedisBoard {
    async fn recover_owner(&self, queue: &str, owner: &str, reason: &str) -> Result<Recovered> {
        let keys = self.keys(queue)?;
        let inv = recover_invocation(&keys, owner, reason);
        recovered(inv.invoke(&self.conn).await?)
    }
}
