//! The ZooKeeper session of a board: a `zookeeper-client` [`zk::Client`]
//! driven from a thread of its own, replaced when the session ends, plus
//! the server clock estimate and the mapping of client errors.
//!
//! The client's I/O task runs on a private single-threaded tokio runtime
//! (thread `jobworker-zookeeper`), so session pings go on even when the
//! caller's runtime is busy or blocked, and the board works from any tokio
//! runtime (multi-thread or current-thread): requests only send on a
//! channel and await a reply.
//!
//! When the session expires (or is closed) the next request connects a new
//! one: every ephemeral znode of the old session (its locks, its worker
//! entities) is gone by then; worker entities are registered again. While
//! no quorum serves, connects fail at once: they are paced
//! (`reconnect.rs`).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::zookeeper::access::Access;
use crate::zookeeper::connect::connect_on;
use crate::zookeeper::reconnect::Reconnect;
use crate::zookeeper::tls::ZooKeeperTls;

/// How long the session thread waits for a closing session to say goodbye
/// (so our ephemerals go at once) before it exits.
const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// Clock samples from replies slower than this are ignored.
const CLOCK_SAMPLE_MAX_RTT_MS: i64 = 100;

/// Local wall-clock time in ms since the epoch.
pub(crate) fn local_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The server clock, estimated from the mtime of znodes we just wrote.
///
/// Lease deadlines and retry times are server-clock times, so boards on
/// machines whose clocks disagree still agree on when a lease expires.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    offset_ms: AtomicI64,
}

impl Clock {
    /// Now, on the server's clock (as well as we know it).
    pub(crate) fn now_ms(&self) -> i64 {
        local_ms() + self.offset_ms.load(Ordering::Relaxed)
    }

    /// Learns from a znode written between local times `sent` and
    /// `received` whose stat says `server_ms`.
    pub(crate) fn sample(&self, server_ms: i64, sent: i64, received: i64) {
        if server_ms > 0 && received >= sent && received - sent <= CLOCK_SAMPLE_MAX_RTT_MS {
            self.offset_ms
                .store(server_ms - (sent + received) / 2, Ordering::Relaxed);
        }
    }
}

/// The current client and what replaced it.
struct Current {
    client: zk::Client,
    /// Bumped on every new session.
    generation: u64,
}

/// A board's ZooKeeper session (see the module docs).
pub(crate) struct Session {
    hosts: String,
    timeout: Duration,
    /// The credentials and the ACLs of the znodes this session creates.
    access: Access,
    /// TLS to the servers, when asked for.
    tls: Option<ZooKeeperTls>,
    runtime: tokio::runtime::Handle,
    /// Hands the last client to the session thread on drop, which closes it.
    stop: Mutex<Option<tokio::sync::oneshot::Sender<zk::Client>>>,
    current: Mutex<Current>,
    /// Held while a new session connects; paces the attempts.
    reconnecting: tokio::sync::Mutex<Reconnect>,
    /// Failed attempts to connect a new session, counted outside the lock:
    /// a request that sees it move while it waited takes that failure.
    failed_reconnects: AtomicU64,
    /// Sessions this board had and lost (their locks are gone or going).
    lost: Mutex<HashSet<i64>>,
    /// Ephemeral znodes to create again in a new session (worker entities).
    ephemerals: Mutex<BTreeMap<String, Vec<u8>>>,
    /// The server clock estimate.
    pub clock: Clock,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("hosts", &self.hosts).finish()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let stop = self.stop.get_mut().ok().and_then(Option::take);
        let current = self.current.get_mut().ok().map(|c| c.client.clone());
        if let (Some(stop), Some(client)) = (stop, current) {
            // The thread drops the last clone and waits for the close.
            let _ = stop.send(client);
        }
    }
}

impl Session {
    /// Starts the session thread and connects to `hosts` with `access`'s
    /// credentials (over TLS with `tls`).
    pub(crate) async fn connect(
        hosts: &str,
        timeout: Duration,
        access: Access,
        tls: Option<ZooKeeperTls>,
    ) -> Result<Session> {
        let (handle_tx, handle_rx) = tokio::sync::oneshot::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<zk::Client>();
        // The runtime is made and dropped on its own thread (dropping one
        // inside the caller's async context would panic).
        std::thread::Builder::new()
            .name("jobworker-zookeeper".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = handle_tx.send(Err(e));
                        return;
                    }
                };
                let _ = handle_tx.send(Ok(runtime.handle().clone()));
                runtime.block_on(async move {
                    if let Ok(client) = stop_rx.await {
                        let mut states = client.state_watcher();
                        drop(client);
                        let closed = async {
                            while !states.peek_state().is_terminated() {
                                states.changed().await;
                            }
                        };
                        let _ = tokio::time::timeout(CLOSE_WAIT, closed).await;
                    }
                });
            })
            .map_err(|e| Error::io("cannot start the zookeeper session thread", e))?;
        let handle = handle_rx
            .await
            .map_err(|_| Error::unavailable("the zookeeper session thread ended at start"))?
            .map_err(|e| Error::io("cannot start the zookeeper session runtime", e))?;
        let client = connect_on(&handle, hosts, timeout, &access, tls.as_ref()).await?;
        Ok(Session {
            hosts: hosts.to_owned(),
            timeout,
            access,
            tls,
            runtime: handle,
            stop: Mutex::new(Some(stop_tx)),
            current: Mutex::new(Current {
                client,
                generation: 0,
            }),
            reconnecting: tokio::sync::Mutex::default(),
            failed_reconnects: AtomicU64::new(0),
            lost: Mutex::default(),
            ephemerals: Mutex::default(),
            clock: Clock::default(),
        })
    }

    /// The servers, for messages.
    pub(crate) fn hosts(&self) -> &str {
        &self.hosts
    }

    /// The ACLs of the znodes this session creates.
    pub(crate) fn access(&self) -> &Access {
        &self.access
    }

    /// The runtime of the session thread (for background requests).
    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }

    /// A client of a live session: the current one, or a new session when
    /// it ended (expired, closed).
    pub(crate) async fn client(&self) -> Result<zk::Client> {
        if let Some(client) = self.live() {
            return Ok(client);
        }
        let failed_before = self.failed_reconnects.load(Ordering::Acquire);
        let mut reconnect = self.reconnecting.lock().await;
        if let Some(client) = self.live() {
            return Ok(client);
        }
        if self.failed_reconnects.load(Ordering::Acquire) != failed_before {
            if let Some(e) = reconnect.failure() {
                return Err(e);
            }
        }
        let old = self.current.lock().map(|c| c.client.session_id().0).unwrap_or(0);
        if reconnect.announce(old) {
            tracing::warn!(hosts = %self.hosts, session = %zk::SessionId(old), "zookeeper session ended; connecting a new one");
        }
        reconnect.take_turn().await;
        let tls = self.tls.as_ref();
        let client = match connect_on(&self.runtime, &self.hosts, self.timeout, &self.access, tls).await {
            Ok(client) => client,
            Err(e) => {
                reconnect.failed(&e);
                self.failed_reconnects.fetch_add(1, Ordering::Release);
                return Err(e);
            }
        };
        reconnect.succeeded();
        if let Ok(mut lost) = self.lost.lock() {
            lost.insert(old);
        }
        if let Ok(mut current) = self.current.lock() {
            current.client = client.clone();
            current.generation += 1;
        }
        self.restore_ephemerals(&client).await;
        Ok(client)
    }

    fn live(&self) -> Option<zk::Client> {
        let current = self.current.lock().ok()?;
        (!current.client.state().is_terminated()).then(|| current.client.clone())
    }

    /// The current client, live or not (for the session id and state).
    pub(crate) fn current(&self) -> Option<zk::Client> {
        self.current.lock().ok().map(|c| c.client.clone())
    }

    /// How many times the session was replaced.
    pub(crate) fn generation(&self) -> u64 {
        self.current.lock().map(|c| c.generation).unwrap_or(0)
    }

    /// How many attempts to connect a new session failed.
    pub(crate) fn failed_reconnects(&self) -> u64 {
        self.failed_reconnects.load(Ordering::Acquire)
    }

    /// True when `session` is one this board had and lost.
    pub(crate) fn was_lost(&self, session: i64) -> bool {
        self.lost.lock().map(|l| l.contains(&session)).unwrap_or(false)
    }

    /// Remembers an ephemeral znode to create again in a new session.
    pub(crate) fn keep_ephemeral(&self, path: &str, body: &[u8]) {
        if let Ok(mut e) = self.ephemerals.lock() {
            e.insert(path.to_owned(), body.to_vec());
        }
    }

    /// The kept ephemeral znodes whose path ends with `suffix`.
    pub(crate) fn kept_ephemerals(&self, suffix: &str) -> Vec<String> {
        self.ephemerals
            .lock()
            .map(|e| e.keys().filter(|p| p.ends_with(suffix)).cloned().collect())
            .unwrap_or_default()
    }

    /// Forgets an ephemeral znode.
    pub(crate) fn forget_ephemeral(&self, path: &str) {
        if let Ok(mut e) = self.ephemerals.lock() {
            e.remove(path);
        }
    }

    async fn restore_ephemerals(&self, client: &zk::Client) {
        let kept: Vec<(String, Vec<u8>)> = self
            .ephemerals
            .lock()
            .map(|e| e.iter().map(|(p, b)| (p.clone(), b.clone())).collect())
            .unwrap_or_default();
        for (path, body) in kept {
            let _ = client
                .mkdir(super::paths::parent(&path), &self.access.persistent())
                .await;
            match client.create(&path, &body, &self.access.ephemeral()).await {
                Ok(_) | Err(zk::Error::NodeExists) => {}
                Err(e) => tracing::warn!(path, error = %e, "cannot register the worker again"),
            }
        }
    }

    /// The error for a request that failed with `err` while doing `what`
    /// (which names the job and queue).
    pub(crate) fn error(&self, what: &str, err: &zk::Error) -> Error {
        match err {
            zk::Error::BadArguments(_) | zk::Error::InvalidAcl => {
                Error::invalid(format!("{what}: zookeeper refused the request: {err}"))
            }
            zk::Error::NoAuth | zk::Error::AuthFailed => Error::unavailable(format!(
                "{what}: zookeeper at {} refused access: {err}",
                self.hosts
            )),
            _ => Error::unavailable(format!(
                "{what}: zookeeper at {} is unavailable: {err}",
                self.hosts
            )),
        }
    }
}

/// True for errors that say what the server did (the request was applied
/// or refused as a whole); any other error leaves the outcome of a write
/// unknown.
pub(crate) fn is_definite(err: &zk::Error) -> bool {
    matches!(
        err,
        zk::Error::NoNode
            | zk::Error::NodeExists
            | zk::Error::BadVersion
            | zk::Error::NotEmpty
            | zk::Error::NoChildrenForEphemerals
            | zk::Error::NoAuth
            | zk::Error::InvalidAcl
            | zk::Error::BadArguments(_)
            | zk::Error::NotReadOnly
            | zk::Error::QuotaExceeded
    )
}

/// The failed operation of a multi-op transaction, when the server said
/// which one.
pub(crate) fn failed_op(err: &zk::MultiWriteError) -> Option<(usize, &zk::Error)> {
    match err {
        zk::MultiWriteError::OperationFailed { index, source } => Some((*index, source)),
        zk::MultiWriteError::RequestFailed { .. } => None,
    }
}

/// True when a transaction failed because something it checks changed
/// meanwhile (made, deleted or written by someone else): read again.
pub(crate) fn lost_a_race(err: &zk::MultiWriteError) -> bool {
    matches!(
        failed_op(err),
        Some((
            _,
            zk::Error::NodeExists | zk::Error::NoNode | zk::Error::BadVersion
        ))
    )
}

/// The error inside a transaction error.
pub(crate) fn source(err: &zk::MultiWriteError) -> &zk::Error {
    match err {
        zk::MultiWriteError::OperationFailed { source, .. }
        | zk::MultiWriteError::RequestFailed { source } => source,
    }
}
