//! The board as the supervisor reaches it. The supervisor forks, so it
//! must stay single-threaded: no async runtime, no client thread. On Redis
//! it holds a blocking connection ([`SyncBoard`]). The ZooKeeper client is
//! async only, and its I/O reactor is a thread that lives as long as the
//! process (a forked worker would inherit its state but not the thread, and
//! hang), so the supervisor does not talk to ZooKeeper itself: it asks a
//! forked agent (`agent.rs`), and when it has none (the fork failed), the
//! next worker it forks gives a dead worker's claims back.

#[cfg(feature = "zookeeper")]
use crate::board::agent::Agent;
use crate::board::{BoardSpec, QueueCounts, Recovered};
use crate::error::Result;
use crate::redis::SyncBoard;
#[cfg(feature = "zookeeper")]
use crate::zookeeper::ZooKeeperOptions;

/// A board with blocking calls, for the supervisor (see the module docs).
// One per supervisor: the Redis variant's size does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum BlockingBoard {
    /// A blocking Redis connection.
    Redis(SyncBoard),
    /// A ZooKeeper board, which the supervisor reaches through its agent
    /// (`None` until the supervisor forked one, and again after it failed).
    #[cfg(feature = "zookeeper")]
    ZooKeeper(ZooKeeperOptions, Option<Agent>),
}

impl BlockingBoard {
    /// Connects (on ZooKeeper: checks the options only).
    pub(crate) fn connect(spec: &BoardSpec) -> Result<BlockingBoard> {
        Ok(match spec {
            BoardSpec::Redis(o) => BlockingBoard::Redis(SyncBoard::connect(o.clone())?),
            #[cfg(feature = "zookeeper")]
            BoardSpec::ZooKeeper(o) => {
                o.validate()?;
                BlockingBoard::ZooKeeper(o.clone(), None)
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
            BlockingBoard::ZooKeeper(_, None) => {
                tracing::warn!("no zookeeper agent: the stored configuration is not read");
                Ok(Default::default())
            }
            #[cfg(feature = "zookeeper")]
            BlockingBoard::ZooKeeper(_, agent) => through(agent, Agent::config),
        }
    }

    /// Forks the agent of a ZooKeeper board that has none (`let_go` runs
    /// first in the child: see [`Agent::fork`]). A fork that fails leaves
    /// the board without: counts fail, recoveries go to the next worker
    /// forked, the stored configuration reads as empty.
    pub(crate) fn ensure_agent(&mut self, let_go: impl FnOnce()) {
        #[cfg(feature = "zookeeper")]
        if let BlockingBoard::ZooKeeper(opts, slot @ None) = self {
            match Agent::fork(opts.clone(), let_go) {
                Ok(agent) => *slot = Some(agent),
                Err(e) => tracing::warn!(error = %e, "cannot fork the zookeeper agent"),
            }
        }
    }

    /// The agent's process ended (and was waited): forget it, to fork
    /// another at the next request. False when `pid` was not the agent.
    #[cfg(feature = "zookeeper")]
    pub(crate) fn agent_exited(&mut self, pid: nix::unistd::Pid) -> bool {
        match self {
            BlockingBoard::ZooKeeper(_, slot) if slot.as_ref().is_some_and(|a| a.is(pid)) => {
                if let Some(mut agent) = slot.take() {
                    agent.disown();
                }
                true
            }
            _ => false,
        }
    }

    /// In a forked worker: lets go of the supervisor's agent without
    /// killing it.
    #[cfg(feature = "zookeeper")]
    pub(crate) fn disown_agent(&mut self) {
        if let BlockingBoard::ZooKeeper(_, Some(agent)) = self {
            agent.disown();
        }
    }

    /// Gives back the leases a dead worker held in `queue` (see
    /// [`Recovery::recover_owner`](crate::board::Recovery::recover_owner));
    /// `None` when the supervisor cannot (a ZooKeeper board without an
    /// agent), and hands the recovery to the next worker it forks
    /// (`WorkerConfig::recover`).
    pub(crate) fn recover_owner(
        &mut self,
        queue: &str,
        owner: &str,
        reason: &str,
    ) -> Result<Option<Recovered>> {
        match self {
            BlockingBoard::Redis(b) => b.recover_owner(queue, owner, reason).map(Some),
            #[cfg(feature = "zookeeper")]
            BlockingBoard::ZooKeeper(_, None) => Ok(None),
            #[cfg(feature = "zookeeper")]
            BlockingBoard::ZooKeeper(_, agent) => {
                through(agent, |a| a.recover_owner(queue, owner, reason)).map(Some)
            }
        }
    }

    /// Whether [`release_owner`](Self::release_owner) has anything to do:
    /// on ZooKeeper a worker's claims end with its session, which the
    /// server ends at most its timeout after the worker's exit.
    pub(crate) fn releases_owners(&self) -> bool {
        matches!(self, BlockingBoard::Redis(_))
    }

    /// Gives back the leases `owner` held in `queue` counting nothing: a
    /// worker that stopped when asked but could not give them back itself.
    /// Returns how many went back (none on ZooKeeper: see
    /// [`releases_owners`](Self::releases_owners)).
    pub(crate) fn release_owner(&mut self, queue: &str, owner: &str) -> Result<usize> {
        match self {
            BlockingBoard::Redis(b) => b.release_owner(queue, owner),
            #[cfg(feature = "zookeeper")]
            BlockingBoard::ZooKeeper(..) => Ok(0),
        }
    }

    /// How many jobs `queues` hold together.
    pub(crate) fn counts(&mut self, queues: &[String]) -> Result<QueueCounts> {
        match self {
            BlockingBoard::Redis(b) => b.counts(queues),
            #[cfg(feature = "zookeeper")]
            BlockingBoard::ZooKeeper(_, agent) => through(agent, |a| a.counts(queues)),
        }
    }

    /// Removes a dead worker's registry entry (on ZooKeeper it went with
    /// the worker's session).
    pub(crate) fn remove_worker(&mut self, owner: &str) -> Result<()> {
        match self {
            BlockingBoard::Redis(b) => b.remove_worker(owner),
            #[cfg(feature = "zookeeper")]
            BlockingBoard::ZooKeeper(..) => Ok(()),
        }
    }
}

/// Asks the agent; one that cannot answer (not the board's own failure)
/// is dropped (killed), to be forked again.
#[cfg(feature = "zookeeper")]
fn through<T>(agent: &mut Option<Agent>, ask: impl FnOnce(&mut Agent) -> Result<T>) -> Result<T> {
    let Some(a) = agent.as_mut() else {
        return Err(crate::Error::unavailable("the supervisor has no zookeeper agent"));
    };
    let answer = ask(a);
    if answer.as_ref().is_err_and(|e| !e.is_unavailable()) {
        *agent = None;
    }
    answer
}
