//! Jobs waiting for dependencies: their postings are under
//! `R/Q/.jw/waiting`, off the jobs path (`deps.rs`).

use super::Facts;
use crate::error::Result;
use crate::job::{JobInfo, JobState, Page};
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::posting;
use crate::zookeeper::record::JobRecord;
use crate::zookeeper::ZooKeeperBoard;

impl ZooKeeperBoard {
    /// show of job `uuid` when it waits for dependencies (`Ok`), else its
    /// record as it is now (`Err`; `None` when it has none).
    pub(super) async fn waiting_or_record(
        &self,
        paths: &QueuePaths,
        uuid: &str,
    ) -> Result<std::result::Result<JobInfo, Option<JobRecord>>> {
        let record = self.read_record(paths, uuid).await?.map(|(r, _)| r);
        if !record.as_ref().is_some_and(JobRecord::is_waiting) {
            return Ok(Err(record));
        }
        if let Some(info) = self.show_waiting(paths, uuid).await? {
            return Ok(Ok(info));
        }
        // Released or cancelled meanwhile: the record as it is now.
        Ok(Err(self.read_record(paths, uuid).await?.map(|(r, _)| r)))
    }

    /// show of job `uuid` while it waits for dependencies; `None` when it
    /// does not (it was released or cancelled meanwhile).
    async fn show_waiting(&self, paths: &QueuePaths, uuid: &str) -> Result<Option<JobInfo>> {
        let what = format!("cannot read job {uuid} of queue {}", paths.queue);
        let reads = vec![paths.waiting_entry(uuid), paths.record(uuid)];
        let mut reads = self.read_many(&what, reads).await?.into_iter();
        let (waiting, record) = (reads.next().flatten(), reads.next().flatten());
        let record = record.and_then(|(data, _)| JobRecord::from_bytes(&data));
        match (waiting, record) {
            (Some((posting, stat)), Some(record)) if record.is_waiting() => {
                Ok(Some(self.waiting_info(paths, uuid, &posting, stat.ctime, record)))
            }
            _ => Ok(None),
        }
    }

    /// A page of the jobs waiting for dependencies, oldest post first.
    /// Reads every waiting job's posting to order them.
    pub(super) async fn list_waiting(&self, paths: &QueuePaths, page: Page) -> Result<Vec<JobInfo>> {
        let what = format!("cannot list the waiting jobs of queue {}", paths.queue);
        let uuids = self.children(&what, &paths.waiting).await?;
        let postings = self
            .read_many(&what, uuids.iter().map(|u| paths.waiting_entry(u)).collect())
            .await?;
        let mut waiting: Vec<(i64, String, Vec<u8>)> = uuids
            .into_iter()
            .zip(postings)
            .filter_map(|(uuid, found)| found.map(|(data, stat)| (stat.ctime, uuid, data)))
            .collect();
        waiting.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let waiting: Vec<_> = waiting.into_iter().skip(page.offset).take(page.limit).collect();
        let records = self
            .read_many(&what, waiting.iter().map(|(_, u, _)| paths.record(u)).collect())
            .await?;
        Ok(waiting
            .into_iter()
            .zip(records)
            .filter_map(|((ctime, uuid, posting), record)| {
                let record = record.and_then(|(data, _)| JobRecord::from_bytes(&data))?;
                Some(self.waiting_info(paths, &uuid, &posting, ctime, record))
            })
            .collect())
    }

    /// How many jobs of the queue wait for dependencies.
    pub(super) async fn count_waiting(&self, paths: &QueuePaths) -> Result<u64> {
        let what = format!("cannot count the waiting jobs of queue {}", paths.queue);
        Ok(self.children(&what, &paths.waiting).await?.len() as u64)
    }

    fn waiting_info(
        &self,
        paths: &QueuePaths,
        uuid: &str,
        posting: &[u8],
        ctime: i64,
        record: JobRecord,
    ) -> JobInfo {
        let mut facts = Facts {
            uuid: uuid.to_owned(),
            ctime_ms: Some(ctime),
            run_at_ms: Some(record.run_at_ms).filter(|at| *at > 0),
            record: Some(record),
            ..Facts::default()
        };
        if let Ok(p) = posting::decode(posting) {
            facts.posting(p);
        }
        self.info(&paths.queue, JobState::Waiting, facts)
    }
}
