//! extend: moves a held lease's deadline in the lock body.

use std::time::Duration;

use zookeeper_client as zk;

use crate::error::Result;
use crate::job::Lease;
use crate::zookeeper::lease::{Held, TRIES};
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::record::LockBody;
use crate::zookeeper::session::{is_definite, local_ms};
use crate::zookeeper::ZooKeeperBoard;

impl ZooKeeperBoard {
    /// extend: moves the lease deadline in the lock body (version-checked).
    pub(crate) async fn extend_lease(&self, lease: &Lease, expiry: Duration) -> Result<()> {
        let paths = self.paths(lease.queue())?;
        let what = format!(
            "cannot extend the lease on job {} in queue {}",
            lease.job(),
            lease.queue()
        );
        for _ in 0..TRIES {
            let held = self.held(&paths, lease).await?;
            let lease_ms = (expiry.as_millis() as i64).max(1);
            let mut body = held.lock.clone();
            body.deadline_ms = Some(self.now_ms() + lease_ms);
            body.lease_ms = Some(lease_ms);
            let client = self.client(&what).await?;
            let sent = local_ms();
            match self.set_lock(&client, &paths, &held, &body).await {
                Ok(mtime) => {
                    self.session().clock.sample(mtime, sent, local_ms());
                    self.inner
                        .cache
                        .saw_lock(&paths.queue, &held.znode, body.deadline_ms);
                    return Ok(());
                }
                // Changed meanwhile: the next check tells whether it is ours.
                Err(zk::Error::BadVersion | zk::Error::NoNode) => continue,
                Err(e) if is_definite(&e) => return Err(self.session().error(&what, &e)),
                // Unknown outcome: check and extend again (idempotent).
                Err(e) => {
                    tracing::warn!(job = %lease.job(), queue = %lease.queue(), error = %e, "extend outcome unknown")
                }
            }
        }
        Err(self.keeps_changing(&what))
    }

    /// Writes `body` to the lock of `held`, at the lock's version read and,
    /// when the job has a record, only if the record is unchanged too: a
    /// recovery of the lease rewrites the record, and a lock made again
    /// since has the same version as the one read. Returns the write's
    /// server time (ms; 0 when unknown).
    async fn set_lock(
        &self,
        client: &zk::Client,
        paths: &QueuePaths,
        held: &Held,
        body: &LockBody,
    ) -> Result<i64, zk::Error> {
        let lock = paths.lock(&held.znode);
        let version = Some(held.lock_stat.version);
        let Some((_, record_version)) = &held.record else {
            return client
                .set_data(&lock, &body.to_bytes(), version)
                .await
                .map(|s| s.mtime);
        };
        let mut w = client.new_check_writer(&paths.record(&held.uuid), Some(*record_version))?;
        w.add_set_data(&lock, &body.to_bytes(), version)?;
        match w.commit().await {
            Ok(results) => Ok(match results.first() {
                Some(zk::MultiWriteResult::SetData { stat }) => stat.mtime,
                _ => 0,
            }),
            Err(zk::CheckWriteError::CheckFailed { .. }) => Err(zk::Error::BadVersion),
            Err(zk::CheckWriteError::OperationFailed { source, .. }) => Err(source),
            Err(zk::CheckWriteError::RequestFailed { source }) => Err(source),
        }
    }
}
