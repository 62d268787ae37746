//! The board's command connection: to one server, to the master the
//! sentinels name (`redis/sentinel.rs`) or to a cluster
//! (`redis/cluster.rs`), with an optional write durability
//! (`redis/durability.rs`).

use std::sync::Arc;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};

use crate::error::Result;
use crate::redis::cluster::ClusterUrl;
use crate::redis::durability::{self, Durability};
use crate::redis::sentinel::{FollowMaster, Master};
use crate::redis::split;
use crate::redis::subscribe::Subscriber;

/// A board's command connection (cheap to clone, shared by all clones):
/// it reconnects after a dropped connection, behind sentinels follows the
/// master through a failover, on a cluster sends each call to its slot's
/// master, and with a [`Durability`] acknowledges a call only once
/// replicas hold its writes.
#[derive(Clone)]
pub struct RedisConnection {
    link: Link,
    durability: Option<Durability>,
}

/// Behind sentinels: the follower and the master a call went to.
type Following = (Arc<FollowMaster>, Arc<Master>);

#[derive(Clone)]
enum Link {
    Direct {
        client: Arc<redis::Client>,
        manager: ConnectionManager,
    },
    Sentinel(Arc<FollowMaster>),
    Cluster {
        url: Arc<ClusterUrl>,
        con: ClusterConnection,
    },
}

impl RedisConnection {
    /// A connection to one server.
    pub(crate) fn direct(client: redis::Client, manager: ConnectionManager) -> RedisConnection {
        RedisConnection {
            link: Link::Direct {
                client: Arc::new(client),
                manager,
            },
            durability: None,
        }
    }

    /// A connection to the master `follow` follows.
    pub(crate) fn sentinel(follow: Arc<FollowMaster>) -> RedisConnection {
        RedisConnection {
            link: Link::Sentinel(follow),
            durability: None,
        }
    }

    /// A connection to the cluster `url` names.
    pub(crate) fn cluster(url: ClusterUrl, con: ClusterConnection) -> RedisConnection {
        RedisConnection {
            link: Link::Cluster {
                url: Arc::new(url),
                con,
            },
            durability: None,
        }
    }

    /// Whether this is a cluster connection (pub/sub is sharded, calls
    /// keep to one slot).
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.link, Link::Cluster { .. })
    }

    /// Every call from now on waits for `durability`'s replicas.
    pub(crate) fn set_durability(&mut self, durability: Option<Durability>) {
        self.durability = durability;
    }

    /// A new pub/sub connection: to the server commands go to now (behind
    /// sentinels, the master they name now), or sharded on a cluster.
    pub(crate) async fn subscriber(&self) -> Result<Subscriber> {
        match &self.link {
            Link::Direct { client, .. } => Subscriber::plain(client).await,
            Link::Sentinel(f) => {
                let master = f.confirmed().await;
                let opened = Subscriber::plain(&master.client).await;
                if let Err(e) = &opened {
                    f.doubt(&master, e).await;
                }
                opened
            }
            Link::Cluster { url, .. } => Subscriber::cluster(url).await,
        }
    }

    /// The connection to send on now, and the master it goes to (behind
    /// sentinels).
    async fn target(&self) -> (Target, Option<Following>) {
        match &self.link {
            Link::Direct { manager, .. } => (Target::One(manager.clone()), None),
            Link::Sentinel(f) => {
                let master = f.current_checked().await;
                (Target::One(master.manager.clone()), Some((Arc::clone(f), master)))
            }
            Link::Cluster { con, .. } => (Target::Cluster(con.clone()), None),
        }
    }

    /// The plain connection to one server, when a call needs nothing else
    /// (the hot path: no sentinels to follow, no replicas to wait for).
    fn plain(&self) -> Option<ConnectionManager> {
        match (&self.link, self.durability) {
            (Link::Direct { manager, .. }, None) => Some(manager.clone()),
            _ => None,
        }
    }

    /// Whether calls sent at once from one task reach the server in the
    /// order they are first polled, each without waiting for the others: a
    /// plain connection to one server. (Behind sentinels, the first call
    /// after a doubt about the master waits on them while later ones go
    /// on; a cluster sends a redirected call again alone; a durability's
    /// WAIT holds the connection's next call until replicas answer.)
    pub(crate) fn keeps_call_order(&self) -> bool {
        self.plain().is_some()
    }

    /// Sends `cmd`, and with a durability its WAIT in the same write (so
    /// that both go on one connection) unless `cmd` is a plain read. The
    /// command's own error comes first: a refused command is not reported
    /// as short of replicas.
    async fn send_one(&self, manager: &mut impl ConnectionLike, cmd: &Cmd) -> RedisResult<Value> {
        let Some(d) = self.durability.filter(|_| durability::may_write(cmd)) else {
            return manager.req_packed_command(cmd).await;
        };
        let mut pipe = redis::pipe();
        pipe.add_command(cmd.clone()).add_command(d.wait_cmd());
        let mut values = manager.req_packed_commands(&pipe, 0, 2).await?;
        let acked = values.pop();
        let reply = values.pop().unwrap_or(Value::Nil).extract_error()?;
        d.acknowledged(acked)?;
        Ok(reply)
    }

    /// Sends `pipeline`, and with a durability its WAIT (unless every
    /// command is a plain read): in the same write, or (a MULTI/EXEC
    /// transaction, which cannot hold one) right after.
    async fn send_many(
        &self,
        manager: &mut impl ConnectionLike,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let writes = || pipeline.cmd_iter().any(durability::may_write);
        let Some(d) = self.durability.filter(|_| writes()) else {
            return manager.req_packed_commands(pipeline, offset, count).await;
        };
        if pipeline.is_transaction() {
            let values = manager.req_packed_commands(pipeline, offset, count).await?;
            d.acknowledged(Some(manager.req_packed_command(&d.wait_cmd()).await?))?;
            return Ok(values);
        }
        let mut with_wait = pipeline.clone();
        with_wait.add_command(d.wait_cmd());
        let mut values = manager.req_packed_commands(&with_wait, offset, count + 1).await?;
        d.acknowledged(values.pop())?;
        Ok(values)
    }
}

/// Where a call goes: one server's reconnecting connection, or the
/// cluster's (which routes by slot; with a durability its WAIT rides in
/// the call's own pipeline, so it reaches the same master).
enum Target {
    One(ConnectionManager),
    Cluster(ClusterConnection),
}

/// The error a call's replies carry, if any (a pipeline's are inside).
fn reply_error(values: &[Value]) -> Option<RedisError> {
    values.iter().find_map(|v| match v {
        Value::ServerError(e) => Some(RedisError::from(e.clone())),
        _ => None,
    })
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        if let Some(mut manager) = self.plain() {
            return Box::pin(async move { manager.req_packed_command(cmd).await });
        }
        let this = self.clone();
        Box::pin(async move {
            let (target, master) = this.target().await;
            let result = match target {
                Target::One(mut manager) => this.send_one(&mut manager, cmd).await,
                Target::Cluster(mut con) => this.send_one(&mut con, cmd).await,
            };
            if let (Err(e), Some((f, m))) = (&result, &master) {
                f.check(m, e).await;
            }
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        if let Some(mut manager) = self.plain() {
            return Box::pin(async move { manager.req_packed_commands(pipeline, offset, count).await });
        }
        let this = self.clone();
        Box::pin(async move {
            let (target, master) = this.target().await;
            let result = match target {
                Target::One(mut manager) => this.send_many(&mut manager, pipeline, offset, count).await,
                Target::Cluster(mut con) => match split::by_slot(pipeline) {
                    Some(groups) => split::send_split(&mut con, pipeline, groups).await,
                    None => this.send_many(&mut con, pipeline, offset, count).await,
                },
            };
            if let Some((f, m)) = &master {
                let failed = match &result {
                    Err(e) => Some(e.clone()),
                    Ok(values) => reply_error(values),
                };
                if let Some(e) = failed {
                    f.check(m, &e).await;
                }
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        match &self.link {
            Link::Direct { manager, .. } => manager.get_db(),
            Link::Sentinel(f) => f.current().manager.get_db(),
            Link::Cluster { con, .. } => con.get_db(),
        }
    }
}
