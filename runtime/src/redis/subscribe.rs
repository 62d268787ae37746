//! A pub/sub connection: plain channels on one server, or sharded channels
//! (`SSUBSCRIBE`) on a cluster, where every channel jobworker listens to
//! carries its queue's hash tag and lives on the node of the queue's slot.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use futures_util::{FutureExt, Stream, StreamExt};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Msg, PushInfo, PushKind};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::error::{Error, Result};
use crate::redis::board::RedisBoard;
use crate::redis::cluster::ClusterUrl;
use crate::redis::keys::QueueKeys;
use crate::redis::subscribed;

/// A subscribed connection and the messages it receives.
pub(crate) enum Subscriber {
    Plain(redis::aio::PubSub),
    Cluster {
        con: ClusterConnection,
        pushes: UnboundedReceiver<PushInfo>,
        /// The server dropped a subscription, or a channel's slot is
        /// served by another node than when it was subscribed: this
        /// connection ends once the messages already here are read.
        ended: bool,
        /// The sharded channels subscribed, each with the node that served
        /// its slot then (`None`: not known yet).
        served: BTreeMap<String, Option<String>>,
        /// When to look again where they are served (`subscribed.rs`).
        next_check: tokio::time::Instant,
    },
}

impl Subscriber {
    /// A pub/sub connection to `client`'s server (redis-rs sets no timeout
    /// on opening one).
    pub(crate) async fn plain(client: &redis::Client) -> Result<Subscriber> {
        match tokio::time::timeout(OPEN_TIMEOUT, client.get_async_pubsub()).await {
            Ok(pubsub) => Ok(Subscriber::Plain(pubsub?)),
            Err(_) => Err(Error::unavailable(format!(
                "no pub/sub connection to redis within {OPEN_TIMEOUT:?}"
            ))),
        }
    }

    /// A sharded pub/sub connection to the cluster `url` names.
    pub(crate) async fn cluster(url: &ClusterUrl) -> Result<Subscriber> {
        let (con, pushes) = url.subscriber().await?;
        Ok(Subscriber::Cluster {
            con,
            pushes,
            ended: false,
            served: BTreeMap::new(),
            next_check: tokio::time::Instant::now() + subscribed::CHECK_EVERY,
        })
    }

    /// Subscribes to `channel` (sharded on a cluster).
    pub(crate) async fn subscribe(&mut self, channel: &str) -> Result<()> {
        self.subscribe_all(&[channel]).await
    }

    /// Subscribes to `channels` (sharded on a cluster): one `SUBSCRIBE`
    /// on one server; on a cluster, one look at where their slots are
    /// served and one `SSUBSCRIBE` each (a command's channels must share
    /// a slot).
    pub(crate) async fn subscribe_all(&mut self, channels: &[&str]) -> Result<()> {
        if channels.is_empty() {
            return Ok(());
        }
        match self {
            Subscriber::Plain(p) => answered("SUBSCRIBE", async { Ok(p.subscribe(channels).await?) }).await,
            Subscriber::Cluster { con, served, .. } => {
                // Noted before: a slot that moves in between ends this
                // connection at the next check, not never (when the nodes
                // could be told: `nodes_serving`).
                let nodes = subscribed::nodes_serving(con, channels).await;
                for (channel, node) in channels.iter().zip(nodes) {
                    answered("SSUBSCRIBE", async { Ok(con.ssubscribe(*channel).await?) }).await?;
                    served.insert((*channel).to_owned(), node);
                }
                Ok(())
            }
        }
    }

    /// Subscribes to a channel pattern; a cluster has no sharded patterns.
    pub(crate) async fn psubscribe(&mut self, pattern: &str) -> Result<()> {
        match self {
            Subscriber::Plain(p) => answered("PSUBSCRIBE", async { Ok(p.psubscribe(pattern).await?) }).await,
            Subscriber::Cluster { .. } => {
                Err(Error::invalid("a redis cluster has no sharded channel patterns"))
            }
        }
    }

    /// A round trip to the server that holds `channel` (its queue's node on
    /// a cluster): messages come in order on a connection, so once it is
    /// back every message sent there before is here.
    pub(crate) async fn ping(&mut self, channel: &str) -> Result<()> {
        answered("PING", async {
            match self {
                Subscriber::Plain(p) => p.ping::<redis::Value>().await.map(drop)?,
                Subscriber::Cluster { con, .. } => {
                    let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                        Route::with_key(channel, SlotAddr::Master),
                    ));
                    con.route_command(redis::cmd("PING"), route).await.map(drop)?
                }
            }
            Ok(())
        })
        .await
    }

    /// The next message; `None` once the connection is closed for good,
    /// or (on a cluster) once a subscription is gone: the server
    /// unsubscribed a channel by itself (jobworker never unsubscribes), as
    /// it does when the channel's slot moves to another node (a reshard),
    /// or a channel's slot is served by another node than when it was
    /// subscribed (a failover, seen within `subscribed::CHECK_EVERY`).
    /// redis-rs renews neither, so the caller opens a new connection, which
    /// subscribes where the slot is now. Messages that came before are
    /// still read first.
    pub(crate) async fn next(&mut self) -> Option<Msg> {
        match self {
            Subscriber::Plain(p) => p.on_message().next().await,
            Subscriber::Cluster {
                con,
                pushes,
                ended,
                served,
                next_check,
            } => loop {
                if let Some(msg) = Self::queued(pushes, ended) {
                    return Some(msg);
                }
                if *ended {
                    return None;
                }
                if tokio::time::Instant::now() >= *next_check {
                    // A check dropped half way (the caller's timeout) is
                    // made again at the next call.
                    let moved = subscribed::moved(con, served).await;
                    *next_check = tokio::time::Instant::now() + subscribed::CHECK_EVERY;
                    if moved {
                        tracing::debug!(
                            "a sharded channel's slot is served by another node; this pub/sub connection ends"
                        );
                        *ended = true;
                    }
                    continue;
                }
                tokio::select! {
                    push = pushes.recv() => match push {
                        Some(push) => {
                            if let Some(msg) = Self::read(push, ended) {
                                return Some(msg);
                            }
                        }
                        None => return None,
                    },
                    _ = tokio::time::sleep_until(*next_check) => {}
                }
            },
        }
    }

    /// A message already here, if any (never waits).
    pub(crate) fn ready(&mut self) -> Option<Msg> {
        match self {
            Subscriber::Plain(_) => self.next().now_or_never().flatten(),
            Subscriber::Cluster { pushes, ended, .. } => Self::queued(pushes, ended),
        }
    }

    /// The first message among the pushes already here (marking the
    /// connection ended when the server dropped a subscription).
    fn queued(pushes: &mut UnboundedReceiver<PushInfo>, ended: &mut bool) -> Option<Msg> {
        while let Ok(push) = pushes.try_recv() {
            if let Some(msg) = Self::read(push, ended) {
                return Some(msg);
            }
        }
        None
    }

    /// The message of `push`, if it is one; an `SUNSUBSCRIBE` nobody asked
    /// for marks the connection ended.
    fn read(push: PushInfo, ended: &mut bool) -> Option<Msg> {
        if push.kind == PushKind::SUnsubscribe {
            tracing::debug!("the server dropped a sharded subscription; this pub/sub connection ends");
            *ended = true;
            return None;
        }
        Msg::from_push_info(push)
    }

    /// The messages as a stream (for a subscriber kept by its reader).
    pub(crate) fn into_stream(self) -> impl Stream<Item = Msg> + Send + Unpin {
        futures_util::stream::unfold(self, |mut s| async move { s.next().await.map(|m| (m, s)) }).boxed()
    }
}

/// How long opening a plain pub/sub connection may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a subscribe or a ping may wait for its reply (a command's
/// own timeout, `connect.rs`; redis-rs sets none on a pub/sub connection).
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// `call`, failed when the server has not answered `what` within
/// [`REPLY_TIMEOUT`]: a server that answers nothing (frozen, or cut off
/// after the connection opened) fails the call rather than holding its
/// caller until it answers. The worker's wait then drops the connection
/// and opens another at its next call; a subscription over every queue
/// subscribes again at its next round (a subscribe is idempotent).
async fn answered<T>(what: &str, call: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(REPLY_TIMEOUT, call)
        .await
        .unwrap_or_else(|_| {
            Err(Error::unavailable(format!(
                "redis did not answer {what} on the pub/sub connection within {REPLY_TIMEOUT:?}"
            )))
        })
}

/// How often a subscription over every queue looks for new queues.
const NEW_QUEUES_EVERY: Duration = Duration::from_secs(2);

/// On a cluster, where no channel spans queues: the messages of
/// `channels(queue)` for every queue of the registry, subscribed now and,
/// for queues that appear later, within [`NEW_QUEUES_EVERY`].
pub(crate) async fn every_queue<F>(
    board: &RedisBoard,
    channels: F,
) -> Result<impl Stream<Item = Msg> + Send + Unpin>
where
    F: Fn(&QueueKeys) -> String + Send + Sync + 'static,
{
    let mut sub = board.conn.pubsub().await?;
    let mut seen = HashSet::new();
    subscribe_new(board, &mut sub, &mut seen, &channels).await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let board = board.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(NEW_QUEUES_EVERY);
        loop {
            tokio::select! {
                msg = sub.next() => {
                    if msg.is_none_or(|m| tx.send(m).is_err()) {
                        return;
                    }
                }
                _ = tick.tick() => {
                    if tx.is_closed() {
                        return;
                    }
                    if let Err(e) = subscribe_new(&board, &mut sub, &mut seen, &channels).await {
                        tracing::warn!(error = %e, "cannot subscribe to new queues' channels; trying again");
                    }
                }
            }
        }
    });
    Ok(futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) }).boxed())
}

async fn subscribe_new<F: Fn(&QueueKeys) -> String>(
    board: &RedisBoard,
    sub: &mut Subscriber,
    seen: &mut HashSet<String>,
    channels: &F,
) -> Result<()> {
    let mut new = Vec::new();
    for queue in board.queues().await? {
        if seen.contains(&queue) {
            continue;
        }
        match board.keys(&queue) {
            Ok(keys) => new.push((channels(&keys), queue)),
            Err(e) => {
                // A name no post could have made (an older release's
                // claim registered it): never a message to hear.
                tracing::warn!(queue, error = %e, "skipping a queue of the registry");
                seen.insert(queue);
            }
        }
    }
    let names: Vec<&str> = new.iter().map(|(channel, _)| channel.as_str()).collect();
    sub.subscribe_all(&names).await?;
    seen.extend(new.into_iter().map(|(_, queue)| queue));
    Ok(())
}
