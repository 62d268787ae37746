//! Crash recovery on Redis: giving back a dead worker's leases at once
//! (`recover_owner.lua`, found a page at a time), for the async board and the supervisor's
//! blocking one alike; and the job counts the supervisor's progress reads.

use std::collections::HashSet;

use crate::board::{QueueCounts, Recovered, Recovery};
use crate::error::Result;
use crate::redis::board::RedisBoard;
use crate::redis::invocation::Invocation;
use crate::redis::keys::QueueKeys;
use crate::redis::reply::Reply;
use crate::redis::scripts::SCRIPTS;

/// Crashes after which a job counts as a poison pill and is trashed.
pub const POISON_CRASHES: u32 = 3;

/// How `recover_owner.lua` gives back what it found.
#[derive(Clone, Copy)]
pub(crate) enum GiveBack<'r> {
    /// A dead worker's: the crash (`reason`) and an attempt are counted.
    Crash(&'r str),
    /// What a worker never started ([`Board::release_unread`](crate::Board::release_unread)),
    /// or what one that stopped when asked could not give back itself
    /// (the supervisor's [`SyncBoard::release_owner`](crate::redis::SyncBoard)):
    /// nothing is counted.
    Release,
}

/// Job ids a give-back call takes at most.
const GIVE_BACK_CHUNK: usize = 500;

/// One owner's leases in one queue, found a page at a time by
/// `recover_owner.lua`'s `find` step (a ZSCAN of the lease index, so that
/// no call reads the whole index), then given back by its `crash` or
/// `release` step. Drives the async board and the supervisor's blocking
/// one alike: each runs the calls [`next_call`](Self::next_call) asks for.
pub(crate) struct OwnerLeases<'k> {
    keys: &'k QueueKeys,
    owner: &'k str,
    /// The next page's ZSCAN cursor; None once the scan ended.
    cursor: Option<String>,
    /// The owner's leased jobs found so far (ZSCAN may return one twice).
    found: HashSet<String>,
}

impl<'k> OwnerLeases<'k> {
    /// Starts the search for `owner`'s leases in `keys`' queue.
    pub(crate) fn new(keys: &'k QueueKeys, owner: &'k str) -> OwnerLeases<'k> {
        OwnerLeases {
            keys,
            owner,
            cursor: Some("0".into()),
            found: HashSet::new(),
        }
    }

    /// The next `find` call, or None once the whole index was read.
    pub(crate) fn next_call(&self) -> Option<Invocation<'k>> {
        let cursor = self.cursor.as_deref()?;
        let mut inv = self.invocation("", "find");
        inv.arg(cursor);
        Some(inv)
    }

    /// Reads a `find` reply: the next cursor, then the page's jobs the
    /// owner holds.
    pub(crate) fn read(&mut self, value: redis::Value) -> Result<()> {
        let reply = Reply::from_value(value)?;
        let cursor = reply.string(0)?;
        for i in 1..reply.0.len() {
            self.found.insert(reply.string(i)?);
        }
        self.cursor = (cursor != "0").then_some(cursor);
        Ok(())
    }

    /// The calls giving back what was found (at least one: it also drops
    /// the owner's claim record).
    pub(crate) fn give_back(&self, how: GiveBack<'_>) -> Vec<Invocation<'k>> {
        let (reason, mode) = match how {
            GiveBack::Crash(reason) => (reason, "crash"),
            GiveBack::Release => ("", "release"),
        };
        let alone = if self.found.len() == 1 { "1" } else { "0" };
        let found: Vec<&String> = self.found.iter().collect();
        let chunks: Vec<&[&String]> = if found.is_empty() {
            vec![&[]]
        } else {
            found.chunks(GIVE_BACK_CHUNK).collect()
        };
        chunks
            .into_iter()
            .map(|ids| {
                let mut inv = self.invocation(reason, mode);
                inv.arg(alone).arg(ids);
                inv
            })
            .collect()
    }

    fn invocation(&self, reason: &str, mode: &str) -> Invocation<'k> {
        let mut inv = Invocation::new(&SCRIPTS.recover_owner, self.keys);
        inv.arg(self.owner).arg(reason).arg(POISON_CRASHES).arg(mode);
        inv
    }
}

/// Adds the reply of a give-back call of `recover_owner.lua` to `total`.
pub(crate) fn add_recovered(total: &mut Recovered, value: redis::Value) -> Result<()> {
    let one = recovered(value)?;
    total.back += one.back;
    total.trashed += one.trashed;
    Ok(())
}

/// Reads the reply of a give-back call of `recover_owner.lua`.
fn recovered(value: redis::Value) -> Result<Recovered> {
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
    /// Gives back what `owner` holds in `keys`' queue, as `how` says.
    async fn give_back(&self, keys: &QueueKeys, owner: &str, how: GiveBack<'_>) -> Result<Recovered> {
        let mut leases = OwnerLeases::new(keys, owner);
        while let Some(find) = leases.next_call() {
            leases.read(find.invoke(&self.conn).await?)?;
        }
        let mut total = Recovered::default();
        for call in leases.give_back(how) {
            add_recovered(&mut total, call.invoke(&self.conn).await?)?;
        }
        Ok(total)
    }

    /// Gives back every lease `owner` holds on `queues` without counting
    /// an attempt ([`Board::release_unread`](crate::Board::release_unread)).
    pub(crate) async fn release_owner(&self, queues: &[&str], owner: &str) -> Result<usize> {
        let mut back = 0;
        for queue in queues {
            let keys = self.keys(queue)?;
            back += self.give_back(&keys, owner, GiveBack::Release).await?.back;
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
        self.give_back(&keys, owner, GiveBack::Crash(reason)).await
    }
}
