//! The board as the supervisor reaches it. The supervisor forks, so it
//! must stay single-threaded: no async runtime, no client thread. On Redis
//! it holds a blocking connection ([`SyncBoard`]). The ZooKeeper client is
//! async only, and its I/O reactor is a thread that lives as long as the
//! process (a forked worker would inherit its state but not the thread, and
//! hang), so the supervisor does not talk to ZooKeeper at all: the next
//! worker it forks gives a dead worker's claims back.

use crate::board::{BoardSpec, QueueCounts, Recovered};
use crate::error::Result;
use crate::redis::SyncBoard;

/// A board with blocking calls, for the supervisor (see the module docs).
// One per supervisor: the Redis variant's size does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum BlockingBoard {
    /// A blocking Redis connection.
    Redis(SyncBoard),
    /// A ZooKeeper board, which the supervisor does not reach itself.
    #[cfg(feature = "zookeeper")]
    ZooKeeper,
}

impl BlockingBoard {
    /// Connects (on ZooKeeper: checks the options only).
    pub(crate) fn connect(spec: &BoardSpec) -> Result<BlockingBoard> {
        Ok(match spec {
            BoardSpec::Redis(o) => BlockingBoard::Redis(SyncBoard::connect(o.clone())?),
            #[cfg(feature = "zookeeper")]
            BoardSpec::ZooKeeper(o) => {
                o.validate()?;
                BlockingBoard::ZooKeeper
            }
        })
    }

    /// The board's stored configuration (empty where the backend keeps
    /// none).
    #[cfg(feature = "cli")]
    pub(crate) fn config(&mut self) -> Result<std::collections::HashMap<String, String>> {
        match self {
            BlockingBoard::Redis(b) => b.config(),
            #[cfg(feature = "zookeeper")]
            BlockingBoard::ZooKeeper => Ok(Default::default()),
        }
    }

    /// Gives back the leases a dead worker held in `queue` (see
    /// [`Recovery::recover_owner`](crate::board::Recovery::recover_owner));
    /// `None` when the supervisor cannot, and hands the recovery to the
    /// next worker it forks (`WorkerConfig::recover`).
    pub(crate) fn recover_owner(
        &mut self,
        queue: &str,
        owner: &str,
        reason: &str,
    ) -> Result<Option<Recovered>> {
        match self {
            BlockingBoard::Redis(b) => b.recover_owner(queue, owner, reason).map(Some),
            #[cfg(feature = "zookeeper")]
            BlockingBoard::ZooKeeper => Ok(None),
        }
    }

    /// How many jobs `queues` hold together.
    pub(crate) fn counts(&mut self, queues: &[String]) -> Result<QueueCounts> {
        match self {
            BlockingBoard::Redis(b) => b.counts(queues),
            #[cfg(feature = "zookeeper")]
            BlockingBoard::ZooKeeper => Err(crate::Error::unsupported(
                "--progress and --until-drained are not supported on ZooKeeper yet",
            )),
        }
    }

    /// Removes a dead worker's registry entry (on ZooKeeper it went with
    /// the worker's session).
    pub(crate) fn remove_worker(&mut self, owner: &str) -> Result<()> {
        match self {
            BlockingBoard::Redis(b) => b.remove_worker(owner),
            #[cfg(feature = "zookeeper")]
            BlockingBoard::ZooKeeper => Ok(()),
        }
    }
}
