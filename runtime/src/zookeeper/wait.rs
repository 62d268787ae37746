//! wait: sleeps until a queue may have claimable work, on ZooKeeper
//! watches and timers, never by polling.
//!
//! Each round lists every queue with a one-shot child watch on its jobs
//! path (a post, a released lock or a finished job fires it) and a data
//! watch on its settings (a pause, resume or new limit fires it; a paused
//! queue is not listed, and the ready jobs of a queue at its limit are no
//! work until a lock goes), and returns
//! at once when a job is ready or a lease has expired. Otherwise it sleeps
//! until a watch fires, the earliest delayed job falls due or lease
//! deadline passes, the session reconnects (watch events can be lost in an
//! outage, so it lists again), or the timeout.
//!
//! One-shot watches are re-armed by every listing; the client re-sends
//! them after a reconnect by itself (the zookeeper-client 0.11.2 bug that
//! loses watches on reconnect concerns persistent watches only, which this
//! board does not use).

use std::time::Duration;

use zookeeper_client as zk;

use crate::board::Woken;
use crate::error::Result;
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::ZooKeeperBoard;

/// Extra sleep after a timer's due time, so the round it starts sees the
/// job due.
const TIMER_SLACK: Duration = Duration::from_millis(2);

/// What one round found.
enum Round {
    /// Work may be claimable now.
    Work,
    /// Nothing now: the watches to wait on and the next due time (server
    /// ms) of a delayed job or a lease.
    Idle(Vec<zk::OneshotWatcher>, Option<i64>),
}

impl ZooKeeperBoard {
    /// wait: see the module docs.
    pub(crate) async fn wait_for_work(&self, queues: &[&str], timeout: Duration) -> Result<Woken> {
        let deadline = tokio::time::Instant::now() + timeout;
        let paths: Vec<QueuePaths> = queues.iter().map(|q| self.paths(q)).collect::<Result<_>>()?;
        for round in 0.. {
            let (watchers, next) = match self.round(&paths).await? {
                Round::Work => {
                    return Ok(Woken {
                        work: true,
                        handed: Vec::new(),
                        at_once: round == 0,
                    })
                }
                Round::Idle(watchers, next) => (watchers, next),
            };
            let now = tokio::time::Instant::now();
            if now >= deadline {
                break;
            }
            let until = match next {
                Some(at) => {
                    let wait = Duration::from_millis((at - self.now_ms()).max(0) as u64) + TIMER_SLACK;
                    (now + wait).min(deadline)
                }
                None => deadline,
            };
            let what = format!("cannot wait for work in queues {}", queues.join(", "));
            let mut states = self.client(&what).await?.state_watcher();
            let fired = async {
                if watchers.is_empty() {
                    std::future::pending::<()>().await;
                }
                futures_util::future::select_all(watchers.into_iter().map(|w| Box::pin(w.changed()))).await;
            };
            tokio::select! {
                _ = fired => {}
                _ = tokio::time::sleep_until(until) => {}
                _ = reconnected(&mut states) => {}
            }
        }
        Ok(Woken::default())
    }

    /// Lists every queue once (arming the watches).
    async fn round(&self, queues: &[QueuePaths]) -> Result<Round> {
        let mut watchers = Vec::new();
        let mut next: Option<i64> = None;
        let mut soonest = |at: i64| next = Some(next.map_or(at, |n: i64| n.min(at)));
        for paths in queues {
            // A paused queue's jobs are no work; its resume is.
            let (settings, watcher) = self.stored_settings(paths, true).await?;
            watchers.extend(watcher);
            if settings.paused {
                continue;
            }
            let (snap, watcher) = self.snapshot(paths, true).await?;
            watchers.extend(watcher);
            if snap.jobs.is_empty() {
                continue;
            }
            let now = self.now_ms();
            let known = self.known(paths, &snap).await?;
            // A job whose claim or lease recovery just failed counts again
            // once its backoff ends, so one that cannot be claimed does not
            // make the caller spin.
            let stuck = |znode: &str| {
                let left = self.inner.cache.stuck_for(&paths.queue, znode)?;
                Some(now + left.as_millis() as i64 + 1)
            };
            // At its limit, only a freed (or expired) lease makes room.
            let full = settings.limit.is_some_and(|l| snap.held() >= l as usize);
            for k in known.iter().filter(|k| !full && !snap.locked.contains(&k.znode)) {
                match snap.scheduled_until(&k.uuid, now).or_else(|| stuck(&k.znode)) {
                    None => return Ok(Round::Work),
                    Some(at) => soonest(at),
                }
            }
            let view = self.lock_view(paths, &snap, now, true).await?;
            for (znode, (body, _)) in &view.locks {
                match body.deadline_ms {
                    Some(deadline) if deadline <= now => match stuck(znode) {
                        None => return Ok(Round::Work),
                        Some(at) => soonest(at),
                    },
                    Some(deadline) => soonest(deadline),
                    None => {}
                }
            }
            if let Some(deadline) = self.next_deadline(paths, &snap, now) {
                if deadline <= now {
                    return Ok(Round::Work);
                }
                soonest(deadline);
            }
        }
        Ok(Round::Idle(watchers, next))
    }
}

/// Returns when the session comes back after a disconnection, or ends
/// (watch events may have been lost meanwhile: list again).
pub(crate) async fn reconnected(states: &mut zk::StateWatcher) {
    loop {
        match states.changed().await {
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => return,
            s if s.is_terminated() => return,
            _ => {}
        }
    }
}
