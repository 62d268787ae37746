//! Failure groups on ZooKeeper (trashed jobs by the kind of their
//! failure), and the verbs `retry` and `purge` (`failed/settle.rs`), one by one or
//! a group at a time.
//!
//! A job is in a failure group when taskflow's trash (`R/Q/.trash`) holds
//! its copy and jobworker's record (`R/Q/.jw/ids/<uuid>`) says jobworker
//! trashed it: the record's `group` names the group and its `job` the job
//! znode the copy is named after. A job trashed by taskflow keeps a live
//! record (or has none): it is in no group, and retry and purge answer not
//! found for it, as on Redis.
//!
//! There is no index of the groups: `failed`, `failed_jobs` and
//! `settle_failed` list the trash and read every copy and record, in
//! batched multi-reads. Retention keeps the trash to `trash_count` jobs and
//! `trash_age` (`retention.rs`), so the scan is bounded.

mod settle;

use std::collections::BTreeMap;

use zookeeper_client as zk;

use crate::board::FailureGroup;
use crate::error::Result;
use crate::job::{failure_group, JobId, Page};
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::posting;
use crate::zookeeper::record::{Ending, JobRecord};
use crate::zookeeper::ZooKeeperBoard;

use settle::Settle;

/// A trashed job of a failure group, as read.
struct Failure {
    /// The trash copy's name.
    name: String,
    /// The posting's bytes (the trash copy's).
    posting: Vec<u8>,
    /// The trash copy's stat.
    copy: zk::Stat,
    /// The job id.
    uuid: String,
    /// The job's record, which says trashed.
    record: JobRecord,
    /// The record's version.
    record_version: i32,
}

impl Failure {
    /// The failure group the job is in.
    fn group(&self) -> String {
        self.record
            .group
            .clone()
            .unwrap_or_else(|| failure_group(self.record.reason.as_deref().unwrap_or("")))
    }
}

/// True when the trash copy `name` is the one `record` (of the same job)
/// tells of: jobworker trashed the job, and the copy is named after its
/// znode (with `-<zxid>` when that name was taken, see `lease.rs`).
fn trashed_by_us(name: &str, record: &JobRecord) -> bool {
    let Some(job) = record.job.as_deref().filter(|_| record.ending == Ending::Trashed) else {
        return false;
    };
    name.strip_prefix(job)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
}

impl ZooKeeperBoard {
    /// The failure groups of `queue`, largest first (then by name): a scan
    /// of the trash (see the module docs).
    pub(crate) async fn failure_groups(&self, queue: &str) -> Result<Vec<FailureGroup>> {
        let paths = self.paths(queue)?;
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for f in self.failures(&paths).await? {
            *counts.entry(f.group()).or_default() += 1;
        }
        let mut groups: Vec<FailureGroup> = counts
            .into_iter()
            .map(|(group, count)| FailureGroup {
                queue: queue.to_owned(),
                group,
                count,
            })
            .collect();
        groups.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.group.cmp(&b.group)));
        Ok(groups)
    }

    /// A page of the jobs of failure group `group`, most recently trashed
    /// first (then by trash copy name): a scan of the trash.
    pub(crate) async fn failed_in_group(&self, queue: &str, group: &str, page: Page) -> Result<Vec<JobId>> {
        let paths = self.paths(queue)?;
        let mut jobs: Vec<Failure> = self
            .failures(&paths)
            .await?
            .into_iter()
            .filter(|f| f.group() == group)
            .collect();
        jobs.sort_by(|a, b| (b.record.finished_ms, &b.name).cmp(&(a.record.finished_ms, &a.name)));
        Ok(jobs
            .into_iter()
            .skip(page.offset)
            .take(page.limit)
            .map(|f| JobId(f.uuid))
            .collect())
    }

    /// Retries (or, with `purge`, deletes) every job of failure group
    /// `group`, or of every group; returns how many. The first error other
    /// than a job gone meanwhile is returned instead.
    pub(crate) async fn settle_trashed(
        &self,
        queue: &str,
        group: Option<&str>,
        purge: bool,
    ) -> Result<usize> {
        let paths = self.paths(queue)?;
        let ids: Vec<JobId> = self
            .failures(&paths)
            .await?
            .into_iter()
            .filter(|f| group.is_none_or(|g| f.group() == g))
            .map(|f| JobId(f.uuid))
            .collect();
        let how = if purge { Settle::Purge } else { Settle::Retry };
        let mut done = 0;
        for result in self.settle_each(queue, &ids, how).await? {
            match result {
                Ok(()) => done += 1,
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// Every trashed job in a failure group: the trash listed, its copies
    /// and their records read in batches; one copy per job (the latest,
    /// should the job have two).
    async fn failures(&self, paths: &QueuePaths) -> Result<Vec<Failure>> {
        let what = format!("cannot read the failure groups of queue {}", paths.queue);
        let names = self.children(&what, &paths.trash).await?;
        let copies = self
            .read_many(&what, names.iter().map(|n| paths.trashed(n)).collect())
            .await?;
        let found: Vec<(String, Vec<u8>, zk::Stat, String)> = names
            .into_iter()
            .zip(copies)
            .filter_map(|(name, copy)| {
                let (data, stat) = copy?;
                let uuid = posting::decode(&data).ok()?.uuid;
                Some((name, data, stat, uuid))
            })
            .collect();
        let records = self
            .read_many(&what, found.iter().map(|f| paths.record(&f.3)).collect())
            .await?;
        let mut out: Vec<Failure> = found
            .into_iter()
            .zip(records)
            .filter_map(|((name, posting, copy, uuid), record)| {
                let (data, stat) = record?;
                let record = JobRecord::from_bytes(&data).filter(|r| trashed_by_us(&name, r))?;
                Some(Failure {
                    name,
                    posting,
                    copy,
                    uuid,
                    record,
                    record_version: stat.version,
                })
            })
            .collect();
        out.sort_by(|a, b| a.uuid.cmp(&b.uuid).then(b.copy.ctime.cmp(&a.copy.ctime)));
        out.dedup_by(|later, first| later.uuid == first.uuid);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_ours_when_named_after_the_trashed_record_s_znode() {
        let mut r = JobRecord {
            job: Some("job0000000001".into()),
            ending: Ending::Trashed,
            ..JobRecord::default()
        };
        assert!(trashed_by_us("job0000000001", &r));
        assert!(trashed_by_us("job0000000001-4294967302", &r));
        assert!(!trashed_by_us("job00000000010", &r));
        assert!(!trashed_by_us("job0000000002", &r));
        r.ending = Ending::Live;
        assert!(!trashed_by_us("job0000000001", &r), "taskflow trashed it");
    }
}
