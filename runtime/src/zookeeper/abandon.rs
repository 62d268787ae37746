//! abandon: gives a held claim up, releasing, retrying later or (attempts
//! used up) trashing the job.

use crate::error::Result;
use crate::job::{Abandon, JobState, Lease};
use crate::zookeeper::finish::How;
use crate::zookeeper::lease::{trash_name, Ended, TRIES};
use crate::zookeeper::record::Ending;
use crate::zookeeper::ZooKeeperBoard;

impl ZooKeeperBoard {
    /// abandon: the lock goes; a counted retry updates the record and
    /// schedules the job, or trashes it once its attempts are used up.
    pub(crate) async fn abandon_lease(&self, lease: &Lease, how: Abandon) -> Result<JobState> {
        let paths = self.paths(lease.queue())?;
        let what = format!("cannot abandon job {} in queue {}", lease.job(), lease.queue());
        let mut trash_suffix = false;
        for _ in 0..TRIES {
            let held = self.held(&paths, lease).await?;
            let (mut record, record_version) = held.record(self.inner.opts.default_max_attempts);
            let now = self.now_ms();
            let (ending, state) = match &how {
                Abandon::Release => {
                    // Claimable at once: a retry time left from an earlier
                    // try must not make it show as scheduled.
                    record.run_at_ms = 0;
                    record.log(now, "abandoned", serde_json::json!({ "worker": lease.owner() }));
                    (How::release(None), JobState::Ready)
                }
                Abandon::Retry { delay, error } => {
                    record.attempts += 1;
                    record.fail(error);
                    let max = match record.max_attempts {
                        0 => self.inner.opts.default_max_attempts,
                        n => n,
                    };
                    record.log_failed(now, error);
                    if record.attempts >= max {
                        record.ending = Ending::Trashed;
                        record.finished_ms = Some(now);
                        record.fail(&format!(
                            "{error} (attempts exhausted: {} of {max})",
                            record.attempts
                        ));
                    }
                    record.log_outcome(now, record.attempts);
                    if record.ending == Ending::Trashed {
                        let trash_name = trash_name(&held, trash_suffix);
                        (
                            How::Trash {
                                posting: held.posting.clone(),
                                trash_name,
                            },
                            JobState::Trashed,
                        )
                    } else if delay.is_zero() {
                        record.run_at_ms = 0;
                        (How::release(None), JobState::Ready)
                    } else {
                        let at = now + (delay.as_millis() as i64).max(1);
                        record.run_at_ms = at;
                        (How::release(Some(at)), JobState::Scheduled)
                    }
                }
            };
            match self
                .end_claim(&paths, &held, record, record_version, &ending, &what)
                .await?
            {
                Ended::Done => return Ok(state),
                Ended::TrashTaken => trash_suffix = true,
                Ended::Retry => {}
            }
        }
        Err(self.keeps_changing(&what))
    }
}
