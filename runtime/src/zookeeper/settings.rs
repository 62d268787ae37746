//! pause, resume and the concurrency limit on ZooKeeper: the queue's
//! settings znode, `R/Q/.jw/settings`, JSON `{"paused": true|false,
//! "limit": n}` (no `limit`: none), written at the version read. Claims
//! read it and hand out nothing while the queue is paused, and no more
//! than the limit allows (`limit.rs`); `wait` watches it, so a resume or a
//! raised limit wakes the idle workers at once and a paused queue's jobs
//! do not wake them at all. A claim of a named job (taskflow's) is not held
//! back: it asks for that very job.

use serde::{Deserialize, Serialize};
use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::zookeeper::lease::TRIES;
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::ZooKeeperBoard;

/// What the settings znode holds (a missing znode: the defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Stored {
    /// Claims hand out nothing while paused.
    pub paused: bool,
    /// At most this many jobs of the queue held at once (`None`: no limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

impl Stored {
    /// The settings in `data`; unreadable ones (written by hand, say) count
    /// as the defaults, with a warning, so they block neither the queue
    /// nor the pause or resume that writes them anew.
    pub(crate) fn parse(data: &[u8], queue: &str) -> Stored {
        serde_json::from_slice(data).unwrap_or_else(|e| {
            tracing::warn!(queue, error = %e, "the queue's settings are not readable; taking the defaults");
            Stored::default()
        })
    }
}

impl ZooKeeperBoard {
    /// The queue's settings and, with `watch`, a watch that fires when they
    /// change (or are first written).
    pub(crate) async fn stored_settings(
        &self,
        paths: &QueuePaths,
        watch: bool,
    ) -> Result<(Stored, Option<zk::OneshotWatcher>)> {
        let what = format!("cannot read the settings of queue {}", paths.queue);
        let read = self
            .read(&what, |client| {
                let path = paths.settings.clone();
                async move {
                    if !watch {
                        return match client.get_data(&path).await {
                            Ok((data, _)) => Ok((Some(data), None)),
                            Err(zk::Error::NoNode) => Ok((None, None)),
                            Err(e) => Err(e),
                        };
                    }
                    match client.get_and_watch_data(&path).await {
                        Ok((data, _, w)) => Ok((Some(data), Some(w))),
                        Err(zk::Error::NoNode) => {
                            let (_, w) = client.check_and_watch_stat(&path).await?;
                            Ok((None, Some(w)))
                        }
                        Err(e) => Err(e),
                    }
                }
            })
            .await?
            .map_err(|e| self.session().error(&what, &e))?;
        let stored = match read.0 {
            Some(data) => Stored::parse(&data, &paths.queue),
            None => Stored::default(),
        };
        Ok((stored, read.1))
    }

    /// pause (`true`) or resume (`false`) a queue.
    pub(crate) async fn set_paused(&self, queue: &str, paused: bool) -> Result<()> {
        self.update_settings(queue, |s| s.paused = paused).await
    }

    /// Sets (or with `None` removes) the queue's concurrency limit; the
    /// claim gate it needs is made first (see `limit.rs`).
    pub(crate) async fn set_queue_limit(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        if limit == Some(0) {
            return Err(Error::invalid("a concurrency limit must be at least 1"));
        }
        if limit.is_some() {
            self.ensure_claim_gate(&self.paths(queue)?).await?;
        }
        self.update_settings(queue, |s| s.limit = limit).await
    }

    /// Rewrites the queue's settings with `change`, at the version read.
    async fn update_settings(&self, queue: &str, change: impl Fn(&mut Stored)) -> Result<()> {
        let paths = self.paths(queue)?;
        self.ensure_queue(&paths).await?;
        let what = format!("cannot change the settings of queue {queue}");
        for _ in 0..TRIES {
            let client = self.client(&what).await?;
            let written = match client.get_data(&paths.settings).await {
                Ok((data, stat)) => {
                    let mut stored = Stored::parse(&data, queue);
                    change(&mut stored);
                    let bytes = serde_json::to_vec(&stored).map_err(|e| Error::codec(e.to_string()))?;
                    client
                        .set_data(&paths.settings, &bytes, Some(stat.version))
                        .await
                        .map(drop)
                }
                Err(zk::Error::NoNode) => {
                    let mut stored = Stored::default();
                    change(&mut stored);
                    let bytes = serde_json::to_vec(&stored).map_err(|e| Error::codec(e.to_string()))?;
                    let persistent = &self.session().access().persistent();
                    client.create(&paths.settings, &bytes, persistent).await.map(drop)
                }
                Err(e) => Err(e),
            };
            match written {
                Ok(()) => return Ok(()),
                // Changed or made meanwhile: read again.
                Err(zk::Error::BadVersion | zk::Error::NodeExists) => {}
                Err(e) => return Err(self.session().error(&what, &e)),
            }
        }
        Err(self.keeps_changing(&what))
    }
}
