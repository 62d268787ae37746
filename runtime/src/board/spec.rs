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

    /// Where the board is, for people to read: the backend and its server,
    /// never a password (`redis://user:***@host:6379/0`).
    pub fn describe(&self) -> String {
        match self {
            BoardSpec::Redis(o) => format!("Redis {}", without_password(&o.url)),
            #[cfg(feature = "zookeeper")]
            BoardSpec::ZooKeeper(o) => format!("ZooKeeper {}", o.connect),
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

/// A URL with the password of its `user:password@` part replaced by `***`.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let user = rest[..at].split_once(':').map_or("", |(u, _)| u);
            format!("{scheme}://{user}:***@{}", &rest[at + 1..])
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::without_password;

    #[test]
    fn a_password_is_never_shown() {
        assert_eq!(
            without_password("redis://:s3cret@h:6379/0"),
            "redis://:***@h:6379/0"
        );
        assert_eq!(without_password("rediss://bob:p@ss@h:1"), "rediss://bob:***@h:1");
        assert_eq!(without_password("redis://h:6379"), "redis://h:6379");
        assert_eq!(without_password("unix:///run/r.sock"), "unix:///run/r.sock");
    }
}
