//! post: one transaction creates jobworker's record of the job (which
//! refuses a duplicate id), its delayed entry when it runs later, its tag
//! and tracking entries (`tags.rs`, `track.rs`), takes its unique key
//! (`unique.rs`), ties it to the dependencies it waits for (`deps.rs`),
//! and creates the persistent sequential job znode with taskflow's JSON
//! posting (or, while it waits for dependencies, its waiting entry).

use zookeeper_client as zk;

use crate::codec::details_of;
use crate::error::{Error, ErrorKind, Result};
use crate::job::{JobId, NewJob};
mod prepared;

use prepared::Entries;
pub(crate) use prepared::Prepared;

use crate::zookeeper::cache::Known;
use crate::zookeeper::events;
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::posting;
use crate::zookeeper::record::JobRecord;
use crate::zookeeper::session::{failed_op, is_definite, source};
use crate::zookeeper::ZooKeeperBoard;

/// Tries of one post (a retry only follows a post known not to have landed).
const POST_TRIES: usize = 3;

impl ZooKeeperBoard {
    /// Posts `job` to `queue` (see the module docs).
    pub(crate) async fn post_job(&self, queue: &str, job: NewJob) -> Result<JobId> {
        let paths = self.paths(queue)?;
        crate::board::check_new_queue(queue)?;
        let mut post = self.prepare_post(&paths, job)?;
        self.ensure_queue(&paths).await?;
        // A delay counts from the post's transaction, not from before the
        // queue's directories were made.
        post.stamp(&paths, self.now_ms());
        for _ in 0..POST_TRIES {
            if let Some((key, ttl)) = &post.job.unique {
                match self
                    .unique_key(&paths, key, post.id.as_str(), ttl.as_millis() as i64)
                    .await?
                {
                    Ok(holder) => return Ok(holder),
                    Err(take) => post.entries.unique = Some(take),
                }
            }
            if !post.job.depends.is_empty() {
                self.link_dependencies(&paths, &mut post).await?;
            }
            match self.post_once(&paths, &mut post).await? {
                Posted::Done(znode) => {
                    if let Some(znode) = znode {
                        self.posted(&paths, &post, &znode).await;
                    } else if post.is_waiting() {
                        let posted = events::posted(&post.job.name, post.record.posted_ms);
                        self.emit(&paths.queue, post.id.as_str(), &[posted]);
                    }
                    return Ok(post.id);
                }
                Posted::Retry => continue,
            }
        }
        Err(Error::unavailable(format!(
            "cannot post job {} to queue {queue}: zookeeper at {} keeps failing",
            post.id,
            self.session().hosts()
        )))
    }

    /// Checks `job` and makes what its transaction writes (see
    /// [`Prepared`]); nothing is written here. The unique key, which needs
    /// a read, is taken by the caller.
    pub(crate) fn prepare_post(&self, paths: &QueuePaths, job: NewJob) -> Result<Prepared> {
        job.validate()?;
        let queue = &paths.queue;
        let id = job.id.clone().unwrap_or_else(JobId::random);
        paths::validate_job_id(id.as_str())?;
        let details = details_of(&job.args);
        let bytes = posting::encode(id.as_str(), &job.name, job.priority, &details, job.book.as_ref())
            .map_err(|e| {
                Error::invalid(format!(
                    "cannot post job {id} to queue {queue}: its arguments cannot be written as json \
                 (zookeeper stores taskflow's json postings): {e}"
                ))
            })?;
        let record = JobRecord {
            name: job.name.clone(),
            priority: job.priority.0,
            max_attempts: job.max_attempts,
            tags: job.tags.clone(),
            nonce: JobId::random().0,
            ..JobRecord::default()
        };
        // One entry per tag, however often the job names it.
        let mut index: Vec<String> = Vec::new();
        for entry in job.tags.iter().map(|t| paths.tag_entry(t, id.as_str())) {
            if !index.contains(&entry) {
                index.push(entry);
            }
        }
        if job.track {
            index.push(paths.tracked_entry(id.as_str()));
        }
        let mut post = Prepared {
            id,
            job,
            details,
            bytes,
            record,
            delayed: None,
            entries: Entries {
                index,
                leftovers: Vec::new(),
                unique: None,
                links: Vec::new(),
            },
        };
        post.stamp(paths, self.now_ms());
        Ok(post)
    }

    /// One try of the post transaction.
    async fn post_once(&self, paths: &QueuePaths, post: &mut Prepared) -> Result<Posted> {
        let id = post.id.as_str();
        let what = format!("cannot post job {id} to queue {}", paths.queue);
        self.ensure_parents(&what, &post.entries.index).await?;
        // A link's directory holds its entry (made now, or there already).
        let linked: Vec<String> = post
            .entries
            .links
            .iter()
            .filter_map(|l| l.entry.clone())
            .collect();
        self.ensure_parents(&what, &linked).await?;
        let client = self.client(&what).await?;
        let mut w = client.new_multi_writer();
        post.stage(&mut w, paths, self.session().access())
            .map_err(|e| self.session().error(&what, &e))?;
        let waiting = post.is_waiting();
        let (record, delayed, entries) = (&post.record, &post.delayed, &mut post.entries);
        match w.commit().await {
            Ok(_) if waiting => Ok(Posted::Done(None)),
            Ok(results) => Ok(Posted::Done(created_job(results))),
            Err(e) => match failed_op(&e) {
                Some((0, zk::Error::NodeExists)) => self.landed_or_exists(paths, id, record).await,
                // A dependency changed since it was read: read it again.
                Some((i, zk::Error::NoNode | zk::Error::NodeExists | zk::Error::BadVersion))
                    if entries.is_link(i, delayed.is_some()) =>
                {
                    Ok(Posted::Retry)
                }
                // A waiting posting of this id without a record: a leftover.
                Some((i, zk::Error::NodeExists)) if waiting && entries.is_last(i, delayed.is_some()) => {
                    let _ = client.delete(&paths.waiting_entry(id), None).await;
                    Ok(Posted::Retry)
                }
                // Entries an earlier job of this id left: replace them.
                // Another post took the unique key first: read it again.
                Some((i, zk::Error::NodeExists | zk::Error::BadVersion))
                    if entries.is_unique(i, delayed.is_some()) =>
                {
                    Ok(Posted::Retry)
                }
                Some((i, zk::Error::NodeExists)) if entries.is_entry(i, delayed.is_some()) => {
                    let found = self.read_many(&what, entries.index.clone()).await?;
                    entries.leftovers = (entries.index.iter().zip(found))
                        .filter(|(_, f)| f.is_some())
                        .map(|(e, _)| e.clone())
                        .collect();
                    Ok(Posted::Retry)
                }
                Some((1, zk::Error::NodeExists)) if delayed.is_some() => {
                    // A stale entry of an earlier job with this id.
                    if let Some(entry) = &delayed {
                        let _ = client.delete(entry, None).await;
                    }
                    Ok(Posted::Retry)
                }
                Some((_, zk::Error::NoNode)) => {
                    // The queue's directories (or a leftover) were removed
                    // meanwhile.
                    entries.leftovers.clear();
                    self.unmade(&paths.queue);
                    self.ensure_queue(paths).await?;
                    Ok(Posted::Retry)
                }
                _ if is_definite(source(&e)) => Err(self.session().error(&what, source(&e))),
                // The outcome is unknown: the transaction is atomic, so the
                // record tells whether it landed.
                _ => {
                    tracing::warn!(job = id, queue = %paths.queue, error = %e, "post outcome unknown; checking");
                    match self.read_record(paths, id).await? {
                        Some(_) => self.landed_or_exists(paths, id, record).await,
                        None => Ok(Posted::Retry),
                    }
                }
            },
        }
    }

    /// The record of `id` exists: our own post (whose reply was lost) or
    /// another job with the same id.
    async fn landed_or_exists(&self, paths: &QueuePaths, id: &str, record: &JobRecord) -> Result<Posted> {
        match self.read_record(paths, id).await? {
            Some((found, _)) if found.nonce == record.nonce => Ok(Posted::Done(found.job)),
            Some(_) => Err(Error::new(
                ErrorKind::Exists,
                format!("job {id} already exists in queue {}", paths.queue),
            )),
            None => Ok(Posted::Retry),
        }
    }

    /// Caches the posted job and records its znode name in its record
    /// before the post returns (so that a short-lived posting process leaves
    /// a whole record behind). A lost update only costs a later lookup a
    /// scan; one that finds the record rewritten (a worker already ended a
    /// claim, which names the znode too) changes nothing.
    pub(crate) async fn posted(&self, paths: &QueuePaths, post: &Prepared, znode: &str) {
        let (id, job, record) = (post.id.as_str(), &post.job, &post.record);
        self.emit(&paths.queue, id, &[events::posted(&job.name, record.posted_ms)]);
        self.inner.cache.insert_posted(
            &paths.queue,
            Known {
                znode: znode.to_owned(),
                uuid: id.to_owned(),
                name: job.name.clone(),
                priority: job.priority,
                seq: paths::sequence_of(znode).unwrap_or(0),
                version: 0,
                ctime_ms: record.posted_ms,
                details: post.details.clone(),
                book: job.book.clone(),
            },
        );
        let mut named = record.clone();
        named.job = Some(znode.to_owned());
        let Some(client) = self.session().current() else {
            return;
        };
        if let Err(e) = client
            .set_data(&paths.record(id), &named.to_bytes(), Some(0))
            .await
        {
            tracing::debug!(job = id, queue = %paths.queue, error = %e, "cannot record the job's znode name");
        }
    }
}

/// The job znode a transaction created: its last create of a job name
/// (the job znode is created last, after entries whose job id may look
/// like one).
pub(crate) fn created_job(results: Vec<zk::MultiWriteResult>) -> Option<String> {
    created_jobs(results).pop()
}

/// The job znodes a transaction created, in order (the creates of job
/// names: each post creates its job znode after entries whose job id may
/// look like one, so a job's own create comes last among its ops).
pub(crate) fn created_jobs(results: Vec<zk::MultiWriteResult>) -> Vec<String> {
    results
        .into_iter()
        .filter_map(|r| match r {
            zk::MultiWriteResult::Create { path, .. } => path.rsplit('/').next().map(str::to_owned),
            _ => None,
        })
        .filter(|n| paths::is_job_name(n))
        .collect()
}

/// What one try of a post did.
enum Posted {
    /// Posted (the znode name when known).
    Done(Option<String>),
    /// Did not land; try again.
    Retry,
}
