//! Where a board is: what workers and the CLI carry across `fork`, and
//! connect with.

use std::time::Duration;

use crate::board::AnyBoard;
use crate::error::Result;
use crate::redis::{RedisBoard, RedisOptions};
#[cfg(feature = "zookeeper")]
use crate::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};

/// Where a board is: the options to connect to it. Workers and the CLI
/// carry this (not a connection) across `fork`.
#[derive(Debug, Clone, PartialEq)]
pub enum BoardSpec {
    /// A Redis board.
    Redis(RedisOptions),
    /// A ZooKeeper board.
    #[cfg(feature = "zookeeper")]
    ZooKeeper(ZooKeeperOptions),
}

impl BoardSpec {
    /// Connects to the board.
    pub async fn connect(&self) -> Result<AnyBoard> {
        Ok(match self {
            BoardSpec::Redis(o) => AnyBoard::Redis(RedisBoard::with_options(o.clone()).await?),
            #[cfg(feature = "zookeeper")]
            BoardSpec::ZooKeeper(o) => AnyBoard::ZooKeeper(ZooKeeperBoard::connect(o.clone()).await?),
        })
    }

    /// The Redis options, when this is a Redis board.
    pub fn as_redis(&self) -> Option<&RedisOptions> {
        match self {
            BoardSpec::Redis(o) => Some(o),
            #[cfg(feature = "zookeeper")]
            BoardSpec::ZooKeeper(_) => None,
        }
    }

    /// How long a lease of length `expiry` can be trusted without a
    /// confirmed extend: `expiry`, and on ZooKeeper at most the session
    /// timeout (a claim also ends with the session that made it).
    pub fn lease_horizon(&self, expiry: Duration) -> Duration {
        match self {
            BoardSpec::Redis(_) => expiry,
            #[cfg(feature = "zookeeper")]
            BoardSpec::ZooKeeper(o) => expiry.min(o.session_timeout),
        }
    }

    /// The backend's name, for messages.
    pub fn backend(&self) -> &'static str {
        match self {
            BoardSpec::Redis(_) => "Redis",
            #[cfg(feature = "zookeeper")]
            BoardSpec::ZooKeeper(_) => "ZooKeeper",
        }
    }
}
