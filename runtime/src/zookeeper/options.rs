//! Options of a ZooKeeper board.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::job::DEFAULT_MAX_ATTEMPTS;
use crate::zookeeper::access::{Access, Digest};
use crate::zookeeper::paths;
use crate::zookeeper::tls::ZooKeeperTls;

/// Default session timeout (kazoo's default too).
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// Completed jobs kept per queue by default (as on Redis).
pub const DEFAULT_HISTORY_COUNT: usize = 50_000;
/// How long completed jobs are kept by default (as on Redis).
pub const DEFAULT_HISTORY_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// Options of a ZooKeeper board.
///
/// ```
/// use jobworker::zookeeper::ZooKeeperOptions;
///
/// // Credentials go to `digest`, never into `connect` (logs show it).
/// let opts = ZooKeeperOptions::new("app:secret@zk1:2181,zk2:2181/jobs");
/// assert_eq!(opts.connect, "zk1:2181,zk2:2181/jobs");
/// assert_eq!(opts.split()?, ("zk1:2181,zk2:2181".to_owned(), "/jobs".to_owned()));
/// opts.validate()?;
/// # Ok::<(), jobworker::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ZooKeeperOptions {
    /// `host:port[,host:port…]/root`: the servers and the root path under
    /// which queue `Q` lives at `<root>/<Q>/jobs` (taskflow's `path`).
    /// Never holds credentials: [`new`](Self::new) moves them to `digest`.
    pub connect: String,
    /// Digest credentials: the session authenticates with them and every
    /// znode the board creates is creator-only (plus read for `reader`).
    /// `None`: every znode is `world:anyone` (kazoo's default).
    pub digest: Option<Digest>,
    /// An identity (`SCHEME:ID`, as in ZooKeeper's `setAcl`) given read
    /// access to every znode the board creates; needs `digest`.
    pub reader: Option<String>,
    /// TLS to every server (their `secureClientPort`); `None`: plain TCP.
    pub tls: Option<ZooKeeperTls>,
    /// Session timeout. Claims made through a session end with it (as in
    /// taskflow) at the latest; the server clamps it to its
    /// `[min,max]SessionTimeout`.
    pub session_timeout: Duration,
    /// Tries allowed for jobs posted by taskflow (which has no such field).
    pub default_max_attempts: u32,
    /// Completed jobs kept per queue (0 keeps none).
    pub history_count: usize,
    /// How long completed jobs are kept.
    pub history_age: Duration,
    /// Trashed jobs (the dead letter) kept per queue; the oldest go first.
    pub trash_count: usize,
    /// How long trashed jobs are kept.
    pub trash_age: Duration,
}

impl ZooKeeperOptions {
    /// Defaults for `connect`, `[user:password@]host:port[,host:port…]/root`
    /// (credentials go to [`digest`](Self::digest)).
    pub fn new(connect: impl Into<String>) -> Self {
        let connect = connect.into();
        let (digest, connect) = Digest::split_off(&connect);
        ZooKeeperOptions {
            connect: connect.to_owned(),
            digest,
            reader: None,
            tls: None,
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            default_max_attempts: DEFAULT_MAX_ATTEMPTS,
            history_count: DEFAULT_HISTORY_COUNT,
            history_age: DEFAULT_HISTORY_AGE,
            trash_count: crate::redis::DEFAULT_TRASH_COUNT,
            trash_age: crate::redis::DEFAULT_TRASH_AGE,
        }
    }

    /// The server list and the root path (`""` for the ZooKeeper root).
    pub fn split(&self) -> Result<(String, String)> {
        let (hosts, root) = paths::split_connect(&self.connect)?;
        if let Some(host) = hosts.split(',').find(|h| !is_host_port(h)) {
            return Err(Error::invalid(format!(
                "zookeeper address {:?}: {host:?} is not host[:port] (a port 1 to 65535)",
                self.connect
            )));
        }
        Ok((hosts, root))
    }

    /// How the session authenticates and which ACLs its znodes get.
    pub(crate) fn access(&self) -> Result<Access> {
        Access::new(self.digest.as_ref(), self.reader.as_deref())
    }

    /// Checks the options.
    pub fn validate(&self) -> Result<()> {
        self.split()?;
        self.access()?;
        if let Some(tls) = &self.tls {
            tls.options()?;
        }
        if self.session_timeout < Duration::from_millis(100) {
            return Err(Error::invalid(format!(
                "zookeeper session timeout {:?} is too short (at least 100 ms)",
                self.session_timeout
            )));
        }
        if self.default_max_attempts == 0 {
            return Err(Error::invalid("default_max_attempts must be at least 1"));
        }
        Ok(())
    }
}

/// `host`, `host:port`, `[v6 address]` or `[v6 address]:port`, as the
/// client reads a server: checked here, since the client reports a bad one
/// only on connecting, as "invalid address" (exit 4, as if the server were
/// down, not 2).
fn is_host_port(server: &str) -> bool {
    let (host, port) = match server.strip_prefix('[') {
        Some(v6) => match v6.rsplit_once(']') {
            Some((host, "")) => (host, None),
            Some((host, rest)) => match rest.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return false,
            },
            None => return false,
        },
        None => match server.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (server, None),
        },
    };
    !host.is_empty() && port.is_none_or(|p| p.is_empty() || matches!(p.parse::<u16>(), Ok(1..)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_validated() {
        let opts = ZooKeeperOptions::new("127.0.0.1:2181,127.0.0.1:2182/jw");
        assert_eq!(
            opts.split().unwrap(),
            ("127.0.0.1:2181,127.0.0.1:2182".into(), "/jw".into())
        );
        assert!(opts.validate().is_ok());
        let mut short = opts.clone();
        short.session_timeout = Duration::from_millis(10);
        assert!(short.validate().unwrap_err().is_invalid());
        let mut none = opts.clone();
        none.default_max_attempts = 0;
        assert!(none.validate().unwrap_err().is_invalid());
        assert!(ZooKeeperOptions::new("").validate().unwrap_err().is_invalid());
        for bad in [
            "h:notaport/x",
            "h:0",
            "h:65536",
            ":2181",
            "h:1,h:x",
            "[::1",
            "[::1]2181",
        ] {
            let e = ZooKeeperOptions::new(bad).validate().unwrap_err();
            assert!(
                e.is_invalid() && e.to_string().contains("host[:port]"),
                "{bad}: {e}"
            );
        }
        for good in ["h", "h:2181,h2:2182/jw", "[::1]:2181", "[::1]"] {
            assert!(ZooKeeperOptions::new(good).validate().is_ok(), "{good}");
        }
        let authed = ZooKeeperOptions::new("app:pw@127.0.0.1:2181/jw");
        assert_eq!(authed.connect, "127.0.0.1:2181/jw");
        assert_eq!(authed.digest.as_ref().map(|d| d.user.as_str()), Some("app"));
        assert!(authed.validate().is_ok());
        let mut reader_alone = opts.clone();
        reader_alone.reader = Some("world:anyone".into());
        assert!(reader_alone.validate().unwrap_err().is_invalid());
    }
}
