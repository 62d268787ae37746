//! Redis Cluster: the `redis+cluster://` URL and the clients built from it.
//!
//! redis-rs' cluster connection routes each command, script call and
//! pipeline to the master of its keys' slot, follows MOVED and ASK
//! redirects (a slot migration), retries TRYAGAIN and CLUSTERDOWN, and
//! reconnects by itself. jobworker keeps every call in one queue's slot
//! (the `{queue}` hash tag), and its pub/sub on sharded channels of the
//! queue's slot (`SSUBSCRIBE`, Redis ≥ 7). When a slot migrates, the old
//! node drops its subscriptions (an `SUNSUBSCRIBE` push), which redis-rs
//! takes as confirmed and does not renew: jobworker's pub/sub connection
//! ends then, and its caller opens a new one (`subscribe.rs`). After a
//! failover redis-rs keeps trying the dead master's address for those
//! subscriptions: a waiting pub/sub connection looks every 5 s at which
//! node serves its channels' slots, and ends when one changed
//! (`subscribed.rs`).
//!
//! A script must not run while its queue's slot migrates: it reads per-job
//! keys it does not declare, and one already moved would fail the script
//! half way (Redis does not roll back). So on a cluster every script call
//! also declares the queue's fence key (`QueueKeys::fence`), which never
//! exists: a node answers a call with a missing key in a migrating slot
//! with TRYAGAIN (or ASK, then TRYAGAIN), and the call runs once the slot
//! has moved.

use std::time::Duration;

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, TlsMode};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::error::{Error, Result};
use crate::redis::connect::{private_ca, redact};

/// URL schemes of a cluster board (plain and TLS).
const SCHEMES: [(&str, bool); 2] = [("redis+cluster://", false), ("rediss+cluster://", true)];

/// How long one command may take before the call fails.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Redirects and retries of one call (MOVED, ASK, TRYAGAIN, a node
/// reconnecting) before it fails: with the waits below, about 10 s of
/// patience, in which a queue's slot migration usually ends.
const RETRIES: u32 = 16;
/// Shortest and longest wait before a retry, ms (redis-rs waits at least
/// 1.28 s by default: a queue would stall that long after each TRYAGAIN).
const RETRY_WAIT_MS: (u64, u64) = (10, 1000);

/// A parsed `redis+cluster://[user:password@]host:port[,host:port…][/]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClusterUrl {
    /// One `redis://` (or `rediss://`) URL per seed node, each with the
    /// credentials.
    pub nodes: Vec<String>,
    pub tls: bool,
}

/// Parses a cluster URL; `None` when `url` is not one.
pub(crate) fn parse(url: &str) -> Option<Result<ClusterUrl>> {
    let (scheme, tls) = SCHEMES.into_iter().find(|(s, _)| url.starts_with(s))?;
    Some(parse_rest(&url[scheme.len()..], tls).map_err(|why| {
        Error::invalid(format!(
            "bad cluster url {}: {why} (expected {scheme}[user:password@]host:port[,host:port…])",
            redact(url)
        ))
    }))
}

fn parse_rest(rest: &str, tls: bool) -> std::result::Result<ClusterUrl, String> {
    let (auth, rest) = match rest.rfind('@') {
        Some(at) => (&rest[..=at], &rest[at + 1..]),
        None => ("", rest),
    };
    let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !matches!(path.trim_end_matches('/'), "" | "0") {
        return Err("a cluster has database 0 only".into());
    }
    let scheme = if tls { "rediss" } else { "redis" };
    let nodes = hosts
        .split(',')
        .map(|h| {
            let (host, port) = h.rsplit_once(':').ok_or(format!("{h:?} has no port"))?;
            port.parse::<u16>().map_err(|_| format!("bad port in {h:?}"))?;
            if host.is_empty() {
                return Err(format!("{h:?} has no host"));
            }
            Ok(format!("{scheme}://{auth}{h}"))
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    Ok(ClusterUrl { nodes, tls })
}

impl ClusterUrl {
    fn builder(&self) -> Result<ClusterClientBuilder> {
        let mut builder = ClusterClient::builder(self.nodes.clone())
            .retries(RETRIES)
            .min_retry_wait(RETRY_WAIT_MS.0)
            .max_retry_wait(RETRY_WAIT_MS.1)
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .tcp_settings(crate::redis::keepalive::tcp_settings());
        if self.tls {
            builder = builder.tls(TlsMode::Secure);
            if let Some(certs) = private_ca()? {
                builder = builder.certs(certs);
            }
        }
        Ok(builder)
    }

    fn client(&self, builder: ClusterClientBuilder) -> Result<ClusterClient> {
        builder
            .build()
            .map_err(|e| Error::invalid(format!("bad cluster url {}: {e}", redact(&self.nodes[0]))))
    }

    /// The command connection (shared by clones).
    pub(crate) async fn connect(&self) -> Result<ClusterConnection> {
        let client = self.client(self.builder()?)?;
        client.get_async_connection().await.map_err(|e| {
            Error::unavailable(format!("cannot reach the redis cluster at {}: {e}", self.seeds()))
        })
    }

    /// A connection for sharded pub/sub: messages arrive on the receiver.
    pub(crate) async fn subscriber(&self) -> Result<(ClusterConnection, UnboundedReceiver<PushInfo>)> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let builder = self
            .builder()?
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(tx);
        let con = self.client(builder)?.get_async_connection().await.map_err(|e| {
            Error::unavailable(format!("cannot reach the redis cluster at {}: {e}", self.seeds()))
        })?;
        Ok((con, rx))
    }

    /// A blocking connection (for the supervisor) whose calls time out
    /// after `timeout`.
    pub(crate) fn blocking(&self, timeout: Duration) -> Result<redis::cluster::ClusterConnection> {
        let builder = self
            .builder()?
            .connection_timeout(timeout)
            .response_timeout(timeout);
        self.client(builder)?.get_connection().map_err(|e| {
            Error::unavailable(format!("cannot reach the redis cluster at {}: {e}", self.seeds()))
        })
    }

    /// The seed nodes, credentials hidden, for messages.
    pub(crate) fn seeds(&self) -> String {
        let hosts: Vec<String> = self.nodes.iter().map(|n| redact(n)).collect();
        hosts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_seed_nodes_credentials_and_tls() {
        let u = parse("redis+cluster://u:p%40w@h1:7000,h2:7001").unwrap().unwrap();
        assert_eq!(u.nodes, ["redis://u:p%40w@h1:7000", "redis://u:p%40w@h2:7001"]);
        assert!(!u.tls);
        let t = parse("rediss+cluster://h:7000/").unwrap().unwrap();
        assert_eq!(t.nodes, ["rediss://h:7000"]);
        assert!(t.tls);
        assert!(parse("redis://h:6379").is_none());
    }

    #[test]
    fn refuses_what_a_cluster_cannot_be() {
        for bad in [
            "redis+cluster://h:7000/3",
            "redis+cluster://h",
            "redis+cluster://h:x",
            "redis+cluster://:7000",
        ] {
            let e = parse(bad).unwrap().unwrap_err();
            assert!(e.is_invalid(), "{bad}: {e}");
        }
    }
}
