//! Tags on ZooKeeper. A job's record holds its tags (the truth); each tag
//! has an index directory, `R/Q/.jw/tags/<tag>`, with one empty entry per
//! tagged job, created in the same transaction as the record that gains
//! the tag (at post, or by `tag`) and deleted in the one that drops it.
//! When a job is forgotten (retention, purge), its entries go after its
//! record, best effort; readers check each entry against its record, so a
//! leftover is never listed. The tracked jobs (`track.rs`) are indexed
//! alike.

use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::job::{validate_word, JobId, Page};
use crate::zookeeper::lease::TRIES;
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::record::JobRecord;
use crate::zookeeper::session::{failed_op, source};
use crate::zookeeper::ZooKeeperBoard;

/// An index entry that its record confirms: the job, and the entry's
/// creation zxid (the order it was indexed in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Indexed {
    /// The job id.
    pub uuid: String,
    /// When it was indexed (creation zxid).
    pub czxid: i64,
}

impl ZooKeeperBoard {
    /// Makes the directories that `entries` go in (a transaction cannot).
    pub(crate) async fn ensure_parents(&self, what: &str, entries: &[String]) -> Result<()> {
        let persistent = &self.session().access().persistent();
        let mut made: Vec<&str> = Vec::new();
        for entry in entries {
            let dir = paths::parent(entry);
            if made.contains(&dir) {
                continue;
            }
            self.read(what, |client| async move { client.mkdir(dir, persistent).await })
                .await?
                .map_err(|e| self.session().error(what, &e))?;
            made.push(dir);
        }
        Ok(())
    }

    /// Adds (`add`) or removes `tags` of job `job`; returns its tags after.
    /// One transaction writes the record at the version read and creates
    /// or deletes the entries, so the index never claims a tag the record
    /// lacks; an entry left behind by an earlier job of the same id is
    /// replaced in it.
    pub(crate) async fn retag(
        &self,
        queue: &str,
        job: &JobId,
        tags: &[&str],
        add: bool,
    ) -> Result<Vec<String>> {
        tags.iter().try_for_each(|t| validate_word("tag", t))?;
        let paths = self.paths(queue)?;
        let uuid = job.as_str();
        let what = format!("cannot change the tags of job {uuid} in queue {queue}");
        for _ in 0..TRIES {
            let Some((mut record, version)) = self.read_record(&paths, uuid).await? else {
                return Err(Error::not_found(queue, uuid));
            };
            let before = record.tags.clone();
            if add {
                for t in tags {
                    if !record.tags.iter().any(|have| have == t) {
                        record.tags.push((*t).to_owned());
                    }
                }
            } else {
                record.tags.retain(|t| !tags.contains(&t.as_str()));
            }
            let entry = |t: &String| paths.tag_entry(t, uuid);
            let created: Vec<String> = record
                .tags
                .iter()
                .filter(|t| !before.contains(t))
                .map(entry)
                .collect();
            let removed: Vec<String> = before
                .iter()
                .filter(|t| !record.tags.contains(t))
                .map(entry)
                .collect();
            // Entries that exist go in the transaction (created: left by an
            // earlier job of this id; removed: made with the tag).
            let found = self
                .read_many(&what, created.iter().chain(&removed).cloned().collect())
                .await?;
            let existing: Vec<&String> = created
                .iter()
                .chain(&removed)
                .zip(&found)
                .filter_map(|(e, f)| f.as_ref().map(|_| e))
                .collect();
            self.ensure_parents(&what, &created).await?;
            let client = self.client(&what).await?;
            let persistent = &self.session().access().persistent();
            let mut w = client.new_multi_writer();
            let staged = w
                .add_set_data(&paths.record(uuid), &record.to_bytes(), Some(version))
                .and_then(|_| existing.iter().try_for_each(|e| w.add_delete(e, None)))
                .and_then(|_| created.iter().try_for_each(|e| w.add_create(e, b"", persistent)));
            staged.map_err(|e| self.session().error(&what, &e))?;
            match w.commit().await {
                Ok(_) => return Ok(record.tags),
                // The record, or an entry, changed meanwhile: read again.
                Err(e)
                    if matches!(
                        failed_op(&e),
                        Some((
                            _,
                            zk::Error::BadVersion | zk::Error::NoNode | zk::Error::NodeExists
                        ))
                    ) => {}
                Err(e) => return Err(self.session().error(&what, source(&e))),
            }
        }
        Err(self.keeps_changing(&what))
    }

    /// The jobs tagged `tag`, most recently tagged first.
    pub(crate) async fn tagged_jobs(&self, queue: &str, tag: &str, page: Page) -> Result<Vec<JobId>> {
        let paths = self.paths(queue)?;
        let mut jobs = self
            .confirmed(&paths, &paths.tag_dir(tag), |r| r.tags.iter().any(|t| t == tag))
            .await?;
        jobs.sort_by_key(|j| std::cmp::Reverse(j.czxid));
        Ok(jobs
            .into_iter()
            .skip(page.offset)
            .take(page.limit)
            .map(|j| JobId(j.uuid))
            .collect())
    }

    /// The queue's tags with how many jobs carry each, most used first
    /// (ties in reverse name order, as Redis' reverse range gives them). Reads every entry and its record: a scan bounded by
    /// the jobs retention keeps.
    pub(crate) async fn tag_counts(&self, queue: &str, page: Page) -> Result<Vec<(String, u64)>> {
        let paths = self.paths(queue)?;
        let what = format!("cannot count the tags of queue {queue}");
        let mut counts = Vec::new();
        for name in self.children(&what, &paths.tags).await? {
            let Some(tag) = paths::decode_word(&name) else {
                continue;
            };
            let n = self
                .confirmed(&paths, &paths.tag_dir(&tag), |r| r.tags.contains(&tag))
                .await?
                .len();
            if n > 0 {
                counts.push((tag, n as u64));
            }
        }
        counts.sort_by(|a, b| (&b.1, &b.0).cmp(&(&a.1, &a.0)));
        Ok(counts.into_iter().skip(page.offset).take(page.limit).collect())
    }

    /// The entries of index directory `dir` whose job's record exists and
    /// passes `keep`. The others are stale (their job was forgotten, and
    /// the best-effort removal after it did not happen): skipped, not
    /// removed here, since an entry of the same name may be made anew at
    /// any time.
    pub(crate) async fn confirmed(
        &self,
        paths: &QueuePaths,
        dir: &str,
        keep: impl Fn(&JobRecord) -> bool,
    ) -> Result<Vec<Indexed>> {
        let what = format!("cannot read the index {dir}");
        let uuids = self.children(&what, dir).await?;
        let entries = self
            .read_many(&what, uuids.iter().map(|u| format!("{dir}/{u}")).collect())
            .await?;
        let records = self
            .read_many(&what, uuids.iter().map(|u| paths.record(u)).collect())
            .await?;
        let mut out = Vec::new();
        for ((uuid, entry), record) in uuids.into_iter().zip(entries).zip(records) {
            let Some((_, stat)) = entry else { continue };
            let live = record.and_then(|(data, _)| JobRecord::from_bytes(&data));
            if live.as_ref().is_some_and(&keep) {
                out.push(Indexed {
                    uuid,
                    czxid: stat.czxid,
                });
            }
        }
        Ok(out)
    }

    /// Removes the index entries of a job that was forgotten (its record
    /// deleted), best effort: a leftover is skipped by readers and replaced
    /// when the id is used again.
    pub(crate) async fn drop_index_entries(&self, paths: &QueuePaths, uuid: &str, tags: &[String]) {
        let Some(client) = self.session().current() else {
            return;
        };
        let entries = tags.iter().map(|t| paths.tag_entry(t, uuid));
        for entry in entries.chain([paths.tracked_entry(uuid)]) {
            let _ = client.delete(&entry, None).await;
        }
    }
}
