//! Recurring jobs on ZooKeeper: one persistent znode per template,
//! `R/Q/.jw/recurring/<id>` (id percent-encoded), holding the template and
//! its next slot as JSON ([`Template`]).
//!
//! `recur` creates or updates it (an upsert by id at the version read; the
//! next slot is kept unless the rule or offset changed, as on Redis),
//! `unrecur` deletes it, `recurring` lists them by next slot.
//!
//! The recurring maintenance service (on the worker elected to lead the
//! queue, see `leader.rs`) spawns the due slots: the board reads each
//! template and its version, computes the due slots from the rule (at most
//! `backlog` of the latest) and posts one run per slot in **one
//! transaction** with the `set_data` of the template's new next slot at
//! the version read. Of racing spawners one transaction lands and the
//! others fail on the version, posting nothing, so each slot runs once.
//! The runs are posted like `post` does (`post.rs`'s [`Prepared`] staged
//! into the same transaction), ready at once, with the template's name,
//! arguments, priority, attempts and tags.
//!
//! Unlike Redis, an empty claim does not spawn due slots (the no-worker
//! path): without a worker serving the queue, nothing spawns.

use serde::{Deserialize, Serialize};
use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::job::{JobId, NewJob, Priority};
use crate::recurring::{RecurringInfo, RecurringJob};
use crate::schedule::{due_slots, Rule};
use crate::zookeeper::json;
use crate::zookeeper::lease::TRIES;
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::post::{created_jobs, Prepared};
use crate::zookeeper::session::{failed_op, source};
use crate::zookeeper::ZooKeeperBoard;

/// The most bytes of postings one spawn transaction carries (ZooKeeper
/// refuses requests over `jute.maxbuffer`, 1 MiB by default); a larger
/// catch-up is posted in several transactions, each advancing the next
/// slot past its runs.
const SPAWN_BYTES: usize = 256 * 1024;

/// What a template's znode holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Template {
    /// Name of the runs.
    pub name: String,
    /// Arguments of the runs, as Python's `json.dumps` writes them (what
    /// every run's posting carries).
    pub args: String,
    /// The rule ([`Rule::encode`]).
    pub rule: String,
    /// Delay of the first run of an interval rule.
    pub offset_ms: u64,
    /// Priority of the runs.
    pub priority: i32,
    /// Tries of each run.
    pub max_attempts: u32,
    /// Tags of the runs.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Most missed runs posted when catching up.
    pub backlog: u32,
    /// The next slot (ms, server clock).
    pub next_ms: i64,
    /// Runs posted so far.
    #[serde(default)]
    pub runs: u64,
}

impl Template {
    fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A run of the template.
    fn run(&self, args: &rmpv::Value) -> NewJob {
        let mut job = NewJob::new(&self.name)
            .args_value(args.clone())
            .priority(Priority(self.priority))
            .max_attempts(self.max_attempts);
        job.tags = self.tags.clone();
        job
    }

    /// The listing of template `id`.
    fn info(&self, id: String) -> Result<RecurringInfo> {
        Ok(RecurringInfo {
            id,
            name: self.name.clone(),
            rule: Rule::decode(&self.rule)?.to_string(),
            next_ms: self.next_ms,
            runs: self.runs,
            backlog: self.backlog,
            priority: self.priority,
            tags: self.tags.clone(),
        })
    }
}

/// A template read from its znode, with the version read.
struct Read {
    template: Template,
    version: i32,
}

impl ZooKeeperBoard {
    /// Creates a recurring job in `queue`, or updates the one with the same
    /// id (see the module docs); returns the template id.
    pub(crate) async fn recur_template(&self, queue: &str, job: RecurringJob) -> Result<String> {
        job.validate()?;
        let paths = self.paths(queue)?;
        crate::board::check_new_queue(queue)?;
        let id = job.id.clone().unwrap_or_else(|| JobId::random().0);
        let what = format!("cannot save recurring job {id} of queue {queue}");
        // The runs' postings must be writable: check it once here.
        let sample = NewJob::new(&job.name).args_value(job.args.clone());
        self.prepare_post(&paths, sample)?;
        let args = json::dumps(&job.args).map_err(|e| Error::invalid(format!("{what}: {e}")))?;
        self.ensure_queue(&paths).await?;
        self.ensure_parents(&what, std::slice::from_ref(&paths.template(&id)))
            .await?;
        let rule = job.rule.encode();
        let offset_ms = job.offset.as_millis() as u64;
        for _ in 0..TRIES {
            let old = self.read_template(&paths, &id).await?;
            let kept = old
                .as_ref()
                .map(|o| &o.template)
                .filter(|t| t.rule == rule && t.offset_ms == offset_ms);
            let template = Template {
                name: job.name.clone(),
                args: args.clone(),
                rule: rule.clone(),
                offset_ms,
                priority: job.priority.0,
                max_attempts: job.max_attempts,
                tags: job.tags.clone(),
                backlog: job.backlog,
                next_ms: kept.map_or_else(|| first_slot(&job, self.now_ms()), |t| t.next_ms),
                runs: old.as_ref().map_or(0, |o| o.template.runs),
            };
            if self
                .write_template(&what, &paths, &id, &template, old.map(|o| o.version))
                .await?
            {
                return Ok(id);
            }
        }
        Err(Error::unavailable(format!("{what}: it keeps changing")))
    }

    /// Writes a template: creates it (`version` None) or rewrites it at
    /// `version`; false when someone else wrote it first.
    async fn write_template(
        &self,
        what: &str,
        paths: &QueuePaths,
        id: &str,
        template: &Template,
        version: Option<i32>,
    ) -> Result<bool> {
        let (path, data) = (&paths.template(id), &template.to_bytes());
        let persistent = &self.session().access().persistent();
        let client = self.client(what).await?;
        let written = match version {
            Some(v) => client.set_data(path, data, Some(v)).await.map(drop),
            None => client.create(path, data, persistent).await.map(drop),
        };
        match written {
            Ok(()) => Ok(true),
            Err(zk::Error::NodeExists | zk::Error::BadVersion | zk::Error::NoNode) => Ok(false),
            Err(e) => Err(self.session().error(what, &e)),
        }
    }

    /// The template `id` of a queue and its version; `None` when there is
    /// none. An unreadable one counts as none (a `recur` rewrites it).
    async fn read_template(&self, paths: &QueuePaths, id: &str) -> Result<Option<Read>> {
        let what = format!("cannot read recurring job {id} of queue {}", paths.queue);
        let found = self
            .read_many(&what, vec![paths.template(id)])
            .await?
            .pop()
            .flatten();
        Ok(found.and_then(|(data, stat)| parse(&data, stat.version, &paths.queue, id)))
    }

    /// Deletes a recurring job (runs already posted stay).
    pub(crate) async fn unrecur_template(&self, queue: &str, id: &str) -> Result<()> {
        let paths = self.paths(queue)?;
        let what = format!("cannot delete recurring job {id} of queue {queue}");
        let path = &paths.template(id);
        let deleted = self
            .read(&what, |client| async move { client.delete(path, None).await })
            .await?;
        match deleted {
            Ok(()) => Ok(()),
            Err(zk::Error::NoNode) => Err(Error::recurring_not_found(queue, id)),
            Err(e) => Err(self.session().error(&what, &e)),
        }
    }

    /// Every template of `queue` with its id and version.
    async fn templates(&self, paths: &QueuePaths) -> Result<Vec<(String, Read)>> {
        let what = format!("cannot list the recurring jobs of queue {}", paths.queue);
        let dir = &paths.recurring;
        let names = self
            .read(&what, |client| async move {
                match client.list_children(dir).await {
                    Err(zk::Error::NoNode) => Ok(Vec::new()),
                    other => other,
                }
            })
            .await?
            .map_err(|e| self.session().error(&what, &e))?;
        let ids: Vec<String> = names.iter().filter_map(|n| paths::decode_word(n)).collect();
        let found = self
            .read_many(&what, ids.iter().map(|id| paths.template(id)).collect())
            .await?;
        Ok(ids
            .into_iter()
            .zip(found)
            .filter_map(|(id, f)| {
                let (data, stat) = f?;
                let read = parse(&data, stat.version, &paths.queue, &id)?;
                Some((id, read))
            })
            .collect())
    }

    /// The recurring jobs of `queue`, by next slot.
    pub(crate) async fn recurring_of(&self, queue: &str) -> Result<Vec<RecurringInfo>> {
        let paths = self.paths(queue)?;
        let mut out = self
            .templates(&paths)
            .await?
            .into_iter()
            .map(|(id, r)| r.template.info(id))
            .collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| (a.next_ms, &a.id).cmp(&(b.next_ms, &b.id)));
        Ok(out)
    }

    /// Posts the runs of `queue`'s recurring jobs that are due; returns how
    /// many were posted. Racing callers post each slot once (see the
    /// module docs).
    pub(crate) async fn spawn_due(&self, queue: &str) -> Result<usize> {
        let paths = self.paths(queue)?;
        let now = self.now_ms();
        let due: Vec<(String, Read)> = self
            .templates(&paths)
            .await?
            .into_iter()
            .filter(|(_, r)| r.template.next_ms <= now)
            .collect();
        if due.is_empty() {
            return Ok(0);
        }
        self.ensure_queue(&paths).await?;
        // A template that fails does not hold up the others; the first
        // failure is returned after them.
        let (mut posted, mut failed) = (0, None);
        for (id, read) in due {
            match self.spawn_template(&paths, &id, read, now).await {
                Ok(n) => posted += n,
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        failed.map_or(Ok(posted), Err)
    }

    /// Posts the due slots of one template (read at `read.version`) as of
    /// `now`: chunks of runs, each in one transaction with the template's
    /// new next slot written at the version it expects. Stops at the first
    /// chunk another spawner beat it to.
    async fn spawn_template(&self, paths: &QueuePaths, id: &str, read: Read, now: i64) -> Result<usize> {
        let Read {
            mut template,
            mut version,
        } = read;
        let what = format!("cannot spawn recurring job {id} of queue {}", paths.queue);
        let rule = Rule::decode(&template.rule)?;
        let (slots, new_next) = due_slots(&rule, template.next_ms, now, template.backlog);
        let args = json::loads(template.args.as_bytes())
            .map_err(|e| Error::codec(format!("{what}: bad arguments: {e}")))?;
        let mut runs = Vec::with_capacity(slots.len());
        for _ in &slots {
            runs.push(self.prepare_post(paths, template.run(&args))?);
        }
        let mut posted = 0;
        loop {
            let end = posted + chunk_len(&runs[posted..]);
            template.next_ms = slots.get(end).copied().unwrap_or(new_next);
            template.runs += (end - posted) as u64;
            if !self
                .spawn_chunk(&what, paths, id, &template, version, &runs[posted..end])
                .await?
            {
                break;
            }
            // A `set_data` adds one to the version.
            version += 1;
            posted = end;
            if posted >= runs.len() {
                break;
            }
        }
        Ok(posted)
    }

    /// One spawn transaction: the template's `set_data` at `version` (the
    /// check that makes racing spawners post a slot once) and the posts of
    /// `runs`. False when the template changed or went meanwhile.
    async fn spawn_chunk(
        &self,
        what: &str,
        paths: &QueuePaths,
        id: &str,
        template: &Template,
        version: i32,
        runs: &[Prepared],
    ) -> Result<bool> {
        let index: Vec<String> = runs.iter().flat_map(|r| r.index().iter().cloned()).collect();
        self.ensure_parents(what, &index).await?;
        let client = self.client(what).await?;
        let mut w = client.new_multi_writer();
        let access = self.session().access();
        let staged = w
            .add_set_data(&paths.template(id), &template.to_bytes(), Some(version))
            .and_then(|()| runs.iter().try_for_each(|r| r.stage(&mut w, paths, access)));
        staged.map_err(|e| self.session().error(what, &e))?;
        match w.commit().await {
            Ok(results) => {
                let znodes = created_jobs(results);
                let posted = runs.iter().zip(&znodes).map(|(r, z)| self.posted(paths, r, z));
                futures_util::future::join_all(posted).await;
                Ok(true)
            }
            // Another spawner posted these slots first, or the template
            // was deleted: nothing was posted.
            Err(e)
                if matches!(
                    failed_op(&e),
                    Some((0, zk::Error::BadVersion | zk::Error::NoNode))
                ) =>
            {
                Ok(false)
            }
            Err(e) if matches!(failed_op(&e), Some((_, zk::Error::NoNode))) => {
                // The queue's directories went meanwhile: the next pass
                // makes them again.
                self.unmade(&paths.queue);
                Ok(false)
            }
            // A definite refusal, or an unknown outcome: either way the
            // next pass reads the template's version again, so a run that
            // did land is not posted twice.
            Err(e) => Err(self.session().error(what, source(&e))),
        }
    }
}

/// The first slot of a new (or changed) template as of `now`.
fn first_slot(job: &RecurringJob, now: i64) -> i64 {
    match &job.rule {
        Rule::Every { .. } => now.saturating_add(job.offset.as_millis() as i64),
        rule => rule.next_after(now).unwrap_or(i64::MAX),
    }
}

/// How many of `runs` fit in one spawn transaction (at least one, unless
/// there are none).
fn chunk_len(runs: &[Prepared]) -> usize {
    let mut bytes = 0;
    let fit = runs
        .iter()
        .take_while(|r| {
            bytes += r.size();
            bytes <= SPAWN_BYTES
        })
        .count();
    fit.max(1).min(runs.len())
}

/// A template's znode content; `None` (with a warning) when unreadable.
fn parse(data: &[u8], version: i32, queue: &str, id: &str) -> Option<Read> {
    match serde_json::from_slice(data) {
        Ok(template) => Some(Read { template, version }),
        Err(e) => {
            tracing::warn!(queue, template = id, error = %e, "unreadable recurring template; skipped");
            None
        }
    }
}
