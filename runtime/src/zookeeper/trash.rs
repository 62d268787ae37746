//! trash: ends a held claim by moving the job to the trash.

use crate::error::Result;
use crate::job::Lease;
use crate::zookeeper::finish::How;
use crate::zookeeper::lease::{trash_name, Ended, TRIES};
use crate::zookeeper::record::Ending;
use crate::zookeeper::ZooKeeperBoard;

impl ZooKeeperBoard {
    /// trash: the posting moves to the trash, with `reason` in the record.
    pub(crate) async fn trash_lease(&self, lease: &Lease, reason: &str) -> Result<()> {
        let paths = self.paths(lease.queue())?;
        let what = format!("cannot trash job {} in queue {}", lease.job(), lease.queue());
        let mut suffix = false;
        for _ in 0..TRIES {
            let held = self.held(&paths, lease).await?;
            let (mut record, record_version) = held.record(self.inner.opts.default_max_attempts);
            let now = self.now_ms();
            record.ending = Ending::Trashed;
            record.finished_ms = Some(now);
            record.fail(reason);
            record.log_outcome(now, record.attempts);
            let how = How::Trash {
                posting: held.posting.clone(),
                trash_name: trash_name(&held, suffix),
            };
            match self
                .end_claim(&paths, &held, record, record_version, &how, &what)
                .await?
            {
                Ended::Done => return Ok(()),
                Ended::TrashTaken => suffix = true,
                Ended::Retry => {}
            }
        }
        Err(self.keeps_changing(&what))
    }
}
