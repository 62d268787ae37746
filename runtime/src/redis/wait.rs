//! Waiting for work without polling: a pub/sub connection subscribed to
//! each queue's notify channel, plus the times at which scheduled jobs fall
//! due, leases expire or recurring jobs are due to spawn.

use std::collections::HashSet;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};

use crate::error::Result;
use crate::redis::board::RedisBoard;
use crate::redis::connect::Connection;
use crate::redis::keys::QueueKeys;

/// A subscribed pub/sub connection, kept between waits.
pub(crate) struct Waiter {
    pubsub: redis::aio::PubSub,
    channels: HashSet<String>,
}

/// What a queue holds right now, as far as claiming goes.
struct Outlook {
    /// Work is claimable now (or the index must catch up first).
    ready: bool,
    /// Milliseconds until the next scheduled job falls due, lease expires
    /// or recurring job is due, if any.
    next_ms: Option<i64>,
}

async fn outlook(board: &RedisBoard, keys: &QueueKeys) -> Result<Outlook> {
    type Row = (
        usize,
        Vec<(String, f64)>,
        Vec<(String, f64)>,
        Vec<(String, f64)>,
        usize,
        usize,
        usize,
        usize,
        (Option<String>, Option<usize>),
        (i64, i64),
    );
    let mut pipe = redis::pipe();
    pipe.zcard(keys.ready())
        .cmd("ZRANGE")
        .arg(keys.scheduled())
        .arg(0)
        .arg(0)
        .arg("WITHSCORES")
        .cmd("ZRANGE")
        .arg(keys.leases())
        .arg(0)
        .arg(0)
        .arg("WITHSCORES")
        .cmd("ZRANGE")
        .arg(keys.recurring())
        .arg(0)
        .arg(0)
        .arg("WITHSCORES")
        .scard(keys.outbox())
        .hlen(keys.listings())
        .zcard(keys.scheduled())
        .zcard(keys.leases())
        .cmd("HMGET")
        .arg(keys.settings())
        .arg("paused")
        .arg("limit")
        .cmd("TIME");
    let (
        ready,
        next_due,
        next_lease,
        next_run,
        owed,
        listed,
        scheduled,
        leased,
        (paused, limit),
        (secs, micros),
    ): Row = board.conn.query_pipe(&pipe).await?;
    // A paused queue, or one at its concurrency limit, hands nothing out:
    // its ready jobs wait for resume (which notifies) or a freed lease.
    let closed = paused.as_deref() == Some("1") || limit.is_some_and(|n| leased >= n);
    let now_ms = secs * 1000 + micros / 1000;
    let next_ms = next_due
        .iter()
        .chain(&next_lease)
        .chain(&next_run)
        .map(|(_, at)| at.min(i64::MAX as f64) as i64 - now_ms)
        .min();
    Ok(Outlook {
        ready: (!closed && (ready > 0 || listed > ready + scheduled + leased))
            || owed > 0
            || next_ms.is_some_and(|ms| ms <= 0),
        next_ms,
    })
}

impl Waiter {
    /// Opens the pub/sub connection.
    pub(super) async fn open(conn: &Connection) -> Result<Waiter> {
        Ok(Waiter {
            pubsub: conn.client.get_async_pubsub().await?,
            channels: HashSet::new(),
        })
    }

    /// Waits until one of the queues may have claimable work or `timeout`
    /// passes.
    pub(super) async fn wait(
        &mut self,
        board: &RedisBoard,
        queues: &[QueueKeys],
        timeout: Duration,
    ) -> Result<bool> {
        for keys in queues {
            if !self.channels.contains(&keys.notify) {
                // Recorded only once subscribed: a wait dropped meanwhile
                // subscribes again next time.
                self.pubsub.subscribe(&keys.notify).await?;
                self.channels.insert(keys.notify.clone());
            }
        }
        // Drop notices that arrived while nobody waited: the check below
        // sees their jobs; a notice after it wakes the wait.
        {
            let mut messages = self.pubsub.on_message();
            while let Some(Some(_)) = messages.next().now_or_never() {}
        }
        let mut sleep = timeout;
        for keys in queues {
            let o = outlook(board, keys).await?;
            if o.ready {
                return Ok(true);
            }
            if let Some(ms) = o.next_ms {
                sleep = sleep.min(Duration::from_millis(ms.max(1) as u64));
            }
        }
        let mut messages = self.pubsub.on_message();
        match tokio::time::timeout(sleep, messages.next()).await {
            Ok(Some(_)) => Ok(true),
            Ok(None) => Err(crate::Error::unavailable("redis pub/sub connection closed")),
            Err(_) => Ok(sleep < timeout),
        }
    }
}
