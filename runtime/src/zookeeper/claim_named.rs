//! claim_job on ZooKeeper: taskflow's claim of one job by name, whatever
//! its place in the order (`claim.rs` has the claim transaction), and the
//! lookup of one job znode's posting it needs.

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::job::Claimed;
use crate::zookeeper::cache::Known;
use crate::zookeeper::claim::{Attempt, Claimer};
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::posting;
use crate::zookeeper::record::LockBody;
use crate::zookeeper::ZooKeeperBoard;

impl ZooKeeperBoard {
    /// Claims job `uuid` by name (taskflow's claim), whatever its place in
    /// the order; an expired lease on it is recovered first. Without an
    /// expiry the lock has no deadline: like taskflow's claims, it lasts as
    /// long as this board's session (or until released).
    pub(crate) async fn claim_named(
        &self,
        queue: &str,
        uuid: &str,
        who: &str,
        expiry: Option<Duration>,
    ) -> Result<Claimed> {
        let paths = self.paths(queue)?;
        let not_found = || Error::not_found(queue, uuid);
        for _ in 0..3 {
            let znode = self.locate(&paths, uuid).await?.ok_or_else(not_found)?;
            let known = self.known_one(&paths, &znode).await?.ok_or_else(not_found)?;
            let claimer = Claimer {
                who,
                expiry,
                suspect: false,
                due_only: false,
            };
            match self.try_claim(&paths, &known, &claimer, None).await? {
                Attempt::Claimed(c) => return Ok(*c),
                Attempt::Gone | Attempt::Contended => self.inner.cache.forget(queue, &znode),
                Attempt::Taken => {
                    let what = format!("cannot claim job {uuid} in queue {queue}");
                    let lock = paths.lock(&znode);
                    let read = self
                        .read(&what, |client| {
                            let lock = lock.clone();
                            async move { client.get_data(&lock).await }
                        })
                        .await?;
                    let (data, stat) = match read {
                        Ok(found) => found,
                        // Released meanwhile: try again.
                        Err(zk::Error::NoNode) => continue,
                        Err(e) => return Err(self.session().error(&what, &e)),
                    };
                    let body = LockBody::parse(&data);
                    if body.deadline_ms.is_some_and(|d| d <= self.now_ms()) {
                        self.stall(&paths, &known, &body, &stat).await?;
                        continue;
                    }
                    let owner = body.owner.unwrap_or_else(|| "an unnamed owner".into());
                    return Err(Error::already_claimed(queue, uuid, &owner));
                }
            }
        }
        Err(Error::unavailable(format!(
            "cannot claim job {uuid} in queue {queue}: it keeps changing under us"
        )))
    }

    /// The posting of znode `znode`, from the cache or read now; `None`
    /// when it is gone or cannot be run by jobworker.
    pub(crate) async fn known_one(&self, paths: &QueuePaths, znode: &str) -> Result<Option<Arc<Known>>> {
        if let Some(k) = self.inner.cache.known(&paths.queue, znode) {
            return Ok(Some(k));
        }
        let what = format!("cannot read job {znode} of queue {}", paths.queue);
        let read = self.read_many(&what, vec![paths.job(znode)]).await?;
        let Some(Some((data, stat))) = read.into_iter().next() else {
            return Ok(None);
        };
        let Ok(p) = posting::decode(&data) else {
            return Ok(None);
        };
        let mut priority = p.priority;
        if let Some((record, _)) = self.read_record(paths, &p.uuid).await? {
            priority = crate::job::Priority(record.priority);
        }
        let known = Known {
            znode: znode.to_owned(),
            uuid: p.uuid,
            name: p.name,
            priority,
            seq: paths::sequence_of(znode).unwrap_or(0),
            version: stat.version,
            ctime_ms: stat.ctime,
            details: p.details,
            book: p.book,
        };
        self.inner.cache.insert(&paths.queue, known);
        Ok(self.inner.cache.known(&paths.queue, znode))
    }
}
