//! Waiting for work without polling: a pub/sub connection subscribed to
//! each queue's notify channel (and a worker's hand-off channels, see
//! `handoff.rs`), plus the times at which scheduled jobs fall due, leases
//! expire or recurring jobs are due to spawn.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::board::Woken;
use crate::error::Result;
use crate::job::Claimed;
use crate::redis::board::RedisBoard;
use crate::redis::connect::Connection;
use crate::redis::keys::QueueKeys;
use crate::redis::subscribe::Subscriber;

/// A subscribed pub/sub connection, kept between waits.
pub(crate) struct Waiter {
    pubsub: Subscriber,
    /// The notify channels subscribed to.
    channels: HashSet<String>,
    /// The hand-off channels subscribed to, with their queue's keys.
    handoffs: HashMap<String, Arc<QueueKeys>>,
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
            pubsub: conn.pubsub().await?,
            channels: HashSet::new(),
            handoffs: HashMap::new(),
        })
    }

    /// Subscribes to the queues' notify channels and, for `who`, to its
    /// hand-off channels, those not subscribed yet in one go. They are
    /// recorded only once subscribed: a wait dropped meanwhile subscribes
    /// again next time.
    async fn subscribe_all(&mut self, queues: &[Arc<QueueKeys>], who: Option<&str>) -> Result<()> {
        let mut notices = Vec::new();
        let mut handoffs = Vec::new();
        for keys in queues {
            if !self.channels.contains(&keys.notify) {
                notices.push(keys.notify.clone());
            }
            if let Some(channel) = who.map(|who| keys.handoff(who)) {
                if !self.handoffs.contains_key(&channel) {
                    handoffs.push((channel, keys.clone()));
                }
            }
        }
        let new: Vec<&str> = notices
            .iter()
            .chain(handoffs.iter().map(|(channel, _)| channel))
            .map(String::as_str)
            .collect();
        self.pubsub.subscribe_all(&new).await?;
        self.channels.extend(notices);
        self.handoffs.extend(handoffs);
        Ok(())
    }

    /// Waits only for hand-offs to `who` (notices are dropped): a worker
    /// with no room reads what was handed to it before it filled up, to
    /// give it back at once rather than hold it unread until its lease
    /// ends.
    pub(super) async fn wait_handoffs(
        &mut self,
        board: &RedisBoard,
        queues: &[Arc<QueueKeys>],
        who: &str,
        timeout: Duration,
    ) -> Result<Vec<Claimed>> {
        self.subscribe_all(queues, Some(who)).await?;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut handed = Vec::new();
        loop {
            self.read_ready(&mut handed);
            if !handed.is_empty() {
                return Ok(self.woken(board, Some(who), handed).await.handed);
            }
            match tokio::time::timeout_at(deadline, self.pubsub.next()).await {
                Ok(Some(msg)) => keep_handoff(&self.handoffs, msg, &mut handed),
                Ok(None) => return Err(crate::Error::unavailable("redis pub/sub connection closed")),
                Err(_) => return Ok(Vec::new()),
            }
        }
    }

    /// Reads the messages already here: hand-offs are kept in `handed`,
    /// notices dropped (the caller looks at the queues next, or has just
    /// been woken).
    fn read_ready(&mut self, handed: &mut Vec<(String, Vec<u8>)>) {
        while let Some(msg) = self.pubsub.ready() {
            keep_handoff(&self.handoffs, msg, handed);
        }
    }

    /// Waits until one of the queues may have claimable work, a post hands
    /// `who` a job, or `timeout` passes.
    pub(super) async fn wait(
        &mut self,
        board: &RedisBoard,
        queues: &[Arc<QueueKeys>],
        who: Option<&str>,
        timeout: Duration,
    ) -> Result<Woken> {
        self.subscribe_all(queues, who).await?;
        let mut handed = Vec::new();
        self.read_ready(&mut handed);
        if !handed.is_empty() {
            return Ok(self.woken(board, who, handed).await);
        }
        let mut sleep = timeout;
        for keys in queues {
            let o = outlook(board, keys).await?;
            if o.ready {
                return Ok(Woken {
                    work: true,
                    handed: Vec::new(),
                    at_once: true,
                });
            }
            if let Some(ms) = o.next_ms {
                sleep = sleep.min(Duration::from_millis(ms.max(1) as u64));
            }
        }
        let next = tokio::time::timeout(sleep, self.pubsub.next()).await;
        match next {
            Ok(Some(msg)) => {
                keep_handoff(&self.handoffs, msg, &mut handed);
                self.read_ready(&mut handed);
                Ok(self.woken(board, who, handed).await)
            }
            Ok(None) => Err(crate::Error::unavailable("redis pub/sub connection closed")),
            Err(_) => Ok(Woken {
                work: sleep < timeout,
                ..Woken::default()
            }),
        }
    }

    /// Ends `who`'s hand-off registrations on `queues`; returns the jobs
    /// handed to it before that, read here or still on their way.
    pub(super) async fn withdraw(
        &mut self,
        board: &RedisBoard,
        queues: &[Arc<QueueKeys>],
        who: &str,
    ) -> Result<Vec<Claimed>> {
        board.unregister_idle(queues, who).await?;
        // Messages come in order on a connection: once the PING's reply is
        // here, so is every hand-off sent before the registrations went
        // (on a cluster, one PING per queue's node).
        for keys in queues {
            self.pubsub.ping(&keys.notify).await?;
            if !keys.sharded {
                break;
            }
        }
        let mut handed = Vec::new();
        self.read_ready(&mut handed);
        Ok(self.woken(board, Some(who), handed).await.handed)
    }

    /// Reads hand-off messages into claimed jobs. One that cannot be read
    /// is logged and left: its lease expires and the job is recovered.
    async fn woken(&self, board: &RedisBoard, who: Option<&str>, handed: Vec<(String, Vec<u8>)>) -> Woken {
        let mut jobs = Vec::new();
        for (channel, bytes) in handed {
            let (Some(keys), Some(who)) = (self.handoffs.get(&channel), who) else {
                continue;
            };
            match board.handed(keys, who, &bytes).await {
                Ok(job) => jobs.extend(job),
                Err(e) => {
                    tracing::warn!(queue = %keys.queue, error = %e, "cannot read a hand-off; its lease will expire")
                }
            }
        }
        Woken {
            work: true,
            handed: jobs,
            at_once: false,
        }
    }
}

/// Keeps `msg` in `handed` when it is a hand-off.
fn keep_handoff(
    handoffs: &HashMap<String, Arc<QueueKeys>>,
    msg: redis::Msg,
    handed: &mut Vec<(String, Vec<u8>)>,
) {
    let channel = msg.get_channel_name();
    if handoffs.contains_key(channel) {
        handed.push((channel.to_owned(), msg.get_payload_bytes().to_vec()));
    }
}
