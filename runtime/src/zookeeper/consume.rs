//! consume: ends a held claim with the job done, keeping it in the history,
//! then releases the jobs that waited for it (`deps.rs`).

use crate::error::Result;
use crate::job::Lease;
use crate::zookeeper::finish::{Failed, Finish, How};
use crate::zookeeper::lease::TRIES;
use crate::zookeeper::record::Ending;
use crate::zookeeper::retention::hour_of;
use crate::zookeeper::tally::{Counted, Tally};
use crate::zookeeper::ZooKeeperBoard;

impl ZooKeeperBoard {
    /// consume: deletes lock and job; the record says completed (with a
    /// history entry) or goes when no history is kept.
    pub(crate) async fn consume_lease(&self, lease: &Lease) -> Result<()> {
        let paths = self.paths(lease.queue())?;
        let what = format!("cannot consume job {} in queue {}", lease.job(), lease.queue());
        let keep = self.inner.opts.history_count > 0;
        let mut history = keep;
        for _ in 0..TRIES {
            let held = self.held(&paths, lease).await?;
            let (mut record, record_version) = held.record(self.inner.opts.default_max_attempts);
            let now = self.now_ms();
            record.ending = Ending::Completed;
            record.finished_ms = Some(now);
            record.log(now, "consumed", serde_json::json!({ "worker": lease.owner() }));
            record.run_at_ms = 0;
            let hour = hour_of(now);
            let owed = record.dependents;
            let finish = Finish {
                paths: &paths,
                znode: &held.znode,
                uuid: lease.job().as_str(),
                lock_version: held.lock_stat.version,
                job_version: held.job_stat.version,
                record,
                record_version,
                drop_record: !keep,
                tally: Tally::ended(held.ready_ms(), held.lock_stat.ctime, now, Counted::Completed),
            };
            let how = How::Consume {
                history: history.then_some(hour),
                owed,
            };
            let client = self.client(&what).await?;
            match self.finish(&client, &finish, &how).await {
                Ok(()) => {
                    self.inner.cache.forget(&paths.queue, &held.znode);
                    self.drop_stale_delay(&paths, &held, None);
                    if history {
                        self.count_consumed(&paths.queue);
                    }
                    if !keep {
                        // The record went: so do its index entries.
                        let uuid = lease.job().as_str();
                        self.drop_index_entries(&paths, uuid, &finish.record.tags).await;
                    }
                    if owed {
                        self.settle_owed(&paths, lease.job().as_str()).await;
                    }
                    return Ok(());
                }
                // An earlier job of this id still owes releases: settle them.
                Err(Failed::OwedTaken) => self.settle_owed(&paths, lease.job().as_str()).await,
                Err(Failed::NoBucket) => {
                    let bucket = paths.history_bucket(hour);
                    if let Err(e) = client.mkdir(&bucket, &self.session().access().persistent()).await {
                        return Err(self.session().error(&what, &e));
                    }
                }
                // The id was consumed before within the hour (posted again).
                Err(Failed::HistoryTaken) => history = false,
                Err(Failed::NoParent) => self.remake(&paths).await?,
                Err(Failed::Refused(e)) => return Err(self.session().error(&what, &e)),
                Err(Failed::Unknown(e)) => {
                    tracing::warn!(job = %lease.job(), queue = %lease.queue(), error = %e, "consume outcome unknown; checking");
                    if self.landed(&finish, &held, &how).await? {
                        self.inner.cache.forget(&paths.queue, &held.znode);
                        if owed {
                            self.settle_owed(&paths, lease.job().as_str()).await;
                        }
                        return Ok(());
                    }
                }
                // Raced: the next check tells.
                Err(_) => {}
            }
        }
        Err(self.keeps_changing(&what))
    }
}
