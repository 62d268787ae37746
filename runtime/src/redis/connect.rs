//! Connecting to Redis: URLs (`redis://`, `rediss://`, `unix://`,
//! `redis+sentinel://`, `redis+cluster://`, with user/password), TLS, the
//! version check and reconnects.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::IntoConnectionInfo;

use crate::error::{Error, Result};
use crate::redis::cluster;
use crate::redis::durability::Durability;
use crate::redis::keepalive;
pub use crate::redis::link::RedisConnection;
use crate::redis::sentinel::{self, FollowMaster};
use crate::redis::subscribe::Subscriber;

/// Oldest Redis the board runs on (effects replication of scripts that
/// read TIME, `SET … PX`, `ZRANGE … REV` in the readers).
pub const MIN_REDIS_VERSION: (u32, u32) = (6, 2);
/// Oldest Redis a cluster board runs on (sharded pub/sub).
const MIN_CLUSTER_VERSION: (u32, u32) = (7, 0);

/// Oldest Redis with Functions (FUNCTION LOAD, FCALL).
const MIN_FUNCTIONS_VERSION: (u32, u32) = (7, 0);
/// Environment variable that turns the Functions library off (`0`): the
/// board then sends its Lua as scripts, as on Redis 6.2.
pub const FUNCTIONS_ENV: &str = "JOBWORKER_REDIS_FUNCTIONS";

/// How long one command may take before the call fails (scripts are
/// bounded; this only catches a hung server).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Reconnect attempts of the connection manager before a call fails.
const RECONNECT_RETRIES: usize = 8;
/// Reconnect attempts behind sentinels, before the sentinels are asked.
const SENTINEL_RECONNECT_RETRIES: usize = 1;
/// Longest pause between reconnect attempts.
const RECONNECT_MAX_DELAY: Duration = Duration::from_secs(2);

/// Environment variable naming a PEM file of the CA that signed the
/// server's certificate (for `rediss://` with a private CA).
pub(super) const CA_ENV: &str = "JOBWORKER_REDIS_CA";

/// A connected board: its reconnecting command connection, and where
/// pub/sub connections are opened.
#[derive(Clone)]
pub(crate) struct Connection {
    pub link: RedisConnection,
    pub url: String,
    /// Whether the board's Lua runs as the Functions library (FCALL) rather
    /// than as scripts (EVALSHA): on Redis 7 or newer, not on a cluster,
    /// unless the board's options turn it off.
    pub functions: bool,
}

impl Connection {
    /// Runs one command, retrying once after a dropped connection.
    pub(crate) async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        retry_once(|| {
            let mut con = self.link.clone();
            async move { cmd.query_async(&mut con).await }
        })
        .await
    }

    /// Opens a pub/sub connection (sharded on a cluster).
    pub(crate) async fn pubsub(&self) -> Result<Subscriber> {
        self.link.subscriber().await
    }

    /// Whether the board is a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        self.link.is_cluster()
    }

    /// The command that publishes on a channel of a queue: `SPUBLISH` on a
    /// cluster (sharded, in the queue's slot), `PUBLISH` otherwise.
    pub(crate) fn publish(&self, channel: &str, message: &str) -> redis::Cmd {
        let mut cmd = redis::cmd(if self.is_cluster() { "SPUBLISH" } else { "PUBLISH" });
        cmd.arg(channel).arg(message);
        cmd
    }

    /// Runs a pipeline, retrying once after a dropped connection.
    pub(crate) async fn query_pipe<T: redis::FromRedisValue>(&self, pipe: &redis::Pipeline) -> Result<T> {
        retry_once(|| {
            let mut con = self.link.clone();
            async move { pipe.query_async(&mut con).await }
        })
        .await
    }
}

/// The URL with any password replaced by `***`, for messages.
pub(super) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let auth = &url[scheme + 3..at];
            match auth.find(':') {
                Some(colon) => format!("{}{}:***{}", &url[..scheme + 3], &auth[..colon], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// The private CA named by [`CA_ENV`], if set.
pub(crate) fn private_ca() -> Result<Option<redis::TlsCertificates>> {
    crate::crypto::install_provider();
    let Ok(path) = std::env::var(CA_ENV) else {
        return Ok(None);
    };
    let ca = std::fs::read(&path).map_err(|e| Error::io(&format!("cannot read {CA_ENV}={path}"), e))?;
    Ok(Some(redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(ca),
    }))
}

/// The client of a one-server URL (not a sentinel URL), its TCP
/// connections with keepalive (`keepalive.rs`).
pub(crate) fn client(url: &str) -> Result<redis::Client> {
    let bad = |e: redis::RedisError| Error::invalid(format!("bad redis url {}: {e}", redact(url)));
    let info = url
        .into_connection_info()
        .map_err(bad)?
        .set_tcp_settings(keepalive::tcp_settings());
    match private_ca()? {
        Some(certs) if url.starts_with("rediss://") => {
            redis::Client::build_with_tls(info, certs).map_err(bad)
        }
        _ => redis::Client::open(info).map_err(bad),
    }
}

/// Connects, checks the server version and returns the connection; with
/// `durability`, every call waits for that many replicas.
pub(crate) async fn connect(url: &str, durability: Option<Durability>) -> Result<Connection> {
    let mut conn = connect_to(url).await?;
    if conn.is_cluster() && durability.is_some() {
        return Err(Error::invalid(
            "--durability is not supported on a redis cluster yet (it is on one server and behind sentinels)",
        ));
    }
    conn.link.set_durability(durability);
    Ok(conn)
}

async fn connect_to(url: &str) -> Result<Connection> {
    let config = ConnectionManagerConfig::new()
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_max_delay(RECONNECT_MAX_DELAY);
    if let Some(spec) = cluster::parse(url) {
        return connect_cluster(spec?, url).await;
    }
    let Some(spec) = sentinel::parse(url) else {
        return connect_direct(url, config.set_number_of_retries(RECONNECT_RETRIES)).await;
    };
    // Behind sentinels a dead master is left after a few tries: the next
    // call asks the sentinels where the master is now.
    let config = config.set_number_of_retries(SENTINEL_RECONNECT_RETRIES);
    let follow = FollowMaster::connect(&spec?, config).await?;
    let mut con = follow.current().manager.clone();
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut con)
        .await
        .map_err(|e| refused(&e, url))?;
    check_version(&info, url)?;
    Ok(Connection {
        link: RedisConnection::sentinel(Arc::new(follow)),
        url: url.to_owned(),
        functions: uses_functions(&info),
    })
}

async fn connect_cluster(spec: cluster::ClusterUrl, url: &str) -> Result<Connection> {
    // The version of one seed node (a cluster's INFO replies per node).
    let info = server_info(&spec.nodes[0]).await?;
    check_version(&info, url)?;
    if version_of(&info) < MIN_CLUSTER_VERSION {
        return Err(Error::unavailable(format!(
            "the redis cluster at {} runs {}; a cluster board needs {}.{} or newer (sharded pub/sub)",
            redact(url),
            version_text(&info),
            MIN_CLUSTER_VERSION.0,
            MIN_CLUSTER_VERSION.1
        )));
    }
    let con = spec.connect().await?;
    Ok(Connection {
        link: RedisConnection::cluster(spec, con),
        url: url.to_owned(),
        // A library would have to be loaded on every master, and on a
        // master added later: a cluster board sends scripts, which the node
        // that lacks one loads on NOSCRIPT.
        functions: false,
    })
}

/// `INFO server` of the one server `url` names, failing at once when it
/// cannot be reached.
async fn server_info(url: &str) -> Result<String> {
    let probe = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    let mut first = client(url)?
        .get_multiplexed_async_connection_with_config(&probe)
        .await
        .map_err(|e| refused(&e, url))?;
    redis::cmd("INFO")
        .arg("server")
        .query_async(&mut first)
        .await
        .map_err(|e| refused(&e, url))
}

async fn connect_direct(url: &str, config: ConnectionManagerConfig) -> Result<Connection> {
    // One plain attempt first, so an unreachable server fails at once
    // instead of after the manager's reconnect schedule.
    let info = server_info(url).await?;
    let client = client(url)?;
    let manager = ConnectionManager::new_with_config(client.clone(), config)
        .await
        .map_err(|e| Error::unavailable(format!("cannot reach redis at {}: {e}", redact(url))))?;
    check_version(&info, url)?;
    Ok(Connection {
        link: RedisConnection::direct(client, manager),
        url: url.to_owned(),
        functions: uses_functions(&info),
    })
}

/// What a failed first connection means for the user, in one line: a
/// mistake in the URL or setup (wrong credentials, a database the server
/// does not have, a server that does not speak Redis, a certificate that is
/// not trusted) is a config error ([`Error::is_invalid`], exit 2); anything
/// else (refused, timed out, name not found) is unreachable (exit 4).
pub(crate) fn refused(e: &redis::RedisError, url: &str) -> Error {
    let (url, text) = (redact(url), e.to_string());
    let has = |needle: &str| text.to_lowercase().contains(needle);
    if e.kind() == redis::ErrorKind::AuthenticationFailed || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"))
    {
        Error::invalid(format!(
            "redis at {url} refused the credentials: check the user and password in the URL \
             (redis://user:password@host:port/db)"
        ))
    } else if has("db index is out of range") || has("switch database") {
        Error::invalid(format!(
            "redis at {url} has no such database: the number after the last / must be below the \
             server's `databases` setting (16 by default)"
        ))
    } else if has("parse error") || has("incompatible type") {
        Error::invalid(format!(
            "the server at {url} does not speak the Redis protocol: is it the right host and port?"
        ))
    } else if has("certificate") || has("unknownissuer") || has("tls") || has("handshake") {
        Error::invalid(format!(
            "the TLS connection to redis at {url} failed ({text}); for a server certificate signed \
             by a private CA, set {CA_ENV}=ca.pem"
        ))
    } else {
        Error::unavailable(format!("cannot reach redis at {url}: {text}"))
    }
}

/// `redis_version` of an `INFO server` reply.
fn version_text(info: &str) -> &str {
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(str::trim)
        .unwrap_or("unknown")
}

/// Major and minor version of an `INFO server` reply.
fn version_of(info: &str) -> (u32, u32) {
    let mut parts = version_text(info)
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// Whether the server of this `INFO server` reply has Functions.
fn uses_functions(info: &str) -> bool {
    version_of(info) >= MIN_FUNCTIONS_VERSION
}

pub(crate) fn check_version(info: &str, url: &str) -> Result<()> {
    let version = version_text(info);
    if version_of(info) < MIN_REDIS_VERSION {
        return Err(Error::unavailable(format!(
            "redis at {} is version {version}; jobworker needs {}.{} or newer",
            redact(url),
            MIN_REDIS_VERSION.0,
            MIN_REDIS_VERSION.1
        )));
    }
    Ok(())
}

/// Runs `call` and, when it failed because the connection dropped (server
/// restart), runs it once more after the manager reconnected.
///
/// For the verbs that use it, running twice does no harm (a second
/// abandon of the same lease is refused; an extend extends). Posts,
/// claims, consumes and cancels do not use it: they are sent again as
/// themselves ([`send_again_if_lost`]), so that a first sending that ran
/// is recognised.
pub(crate) async fn retry_once<T, F, Fut>(mut call: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = redis::RedisResult<T>>,
{
    let first = call();
    send_again_if_lost(first, call, "calling").await
}

/// Runs `first` and, when its connection dropped, `again`: the same call
/// sent once more (a post, claim, consume or cancel says so, so that a
/// first sending that ran is recognised); `what` names the call in the
/// log.
pub(crate) async fn send_again_if_lost<T, F, G>(first: F, again: impl FnOnce() -> G, what: &str) -> Result<T>
where
    F: Future<Output = redis::RedisResult<T>>,
    G: Future<Output = redis::RedisResult<T>>,
{
    match first.await {
        Ok(value) => Ok(value),
        Err(e) if connection_lost(&e) => {
            tracing::warn!(error = %e, "redis connection lost while {what}; sending it again");
            Ok(again().await?)
        }
        Err(e) => Err(e.into()),
    }
}

/// Added to the time since a call was first sent when it is sent again:
/// the new connection may take that long (reconnect attempts) before the
/// call runs. What happened within the window is taken as the first
/// sending's: a life of a posted job's id begun then (for a given id:
/// anybody's post of that id), a named claim or a cancel of the job then.
const AGAIN_MARGIN: Duration = Duration::from_secs(60);

/// The window of a call sent again, first sent at `first`.
pub(crate) fn again_window(first: Instant) -> Duration {
    first.elapsed() + AGAIN_MARGIN
}

/// Whether a call failed because its connection dropped or its server
/// became a replica (a failover): the call may or may not have run, and a
/// new connection may run it again.
pub(crate) fn connection_lost(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() || e.code() == Some("READONLY")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("redis://u:secret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://h:1/0"), "redis://h:1/0");
        assert_eq!(redact("rediss://:pw@h/"), "rediss://:***@h/");
    }

    #[test]
    fn old_servers_are_refused() {
        let err = check_version("redis_version:5.0.7\r\n", "redis://h/").unwrap_err();
        assert!(err.is_unavailable());
        assert!(err.message().contains("5.0.7"), "{err}");
        assert!(check_version("redis_version:7.0.15\r\n", "redis://h/").is_ok());
    }
}
