//! Dependencies between jobs, across queues, and cancelling.
//!
//! A job posted with unmet dependencies waits (its posting is kept out of
//! the listings). Within one queue, `post.lua` and `consume.lua` link and
//! release dependents atomically. Across queues each step touches one
//! queue's slot: the dependent is posted first, then registered with its
//! dependencies' queue (`depend.lua`); a consumed job's dependents in other
//! queues go to its queue's outbox, and the client resolves them in their
//! queue (`resolve.lua`) before removing the outbox entry — so a crash in
//! between leaves the entry, and the queue's outbox maintenance service
//! (`maintenance/outbox.rs`), the next consume, or an empty claim of that
//! queue resolves it again (resolving is idempotent). The consume resolves
//! its own releases at once, so a dependent is ready when `consume`
//! returns; claims that get jobs leave the outbox alone.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};
use crate::job::{JobId, NewJob};
use crate::redis::board::RedisBoard;
use crate::redis::connect::{again_window, send_again_if_lost};
use crate::redis::invocation::Invocation;
use crate::redis::keys::QueueKeys;
use crate::redis::reply::Reply;
use crate::redis::scripts::{self, millis, SCRIPTS};
use crate::redis::subscribe::every_queue;

/// Outbox entries settled per call.
const OUTBOX_BATCH: usize = 500;

/// `queue\nid`: how scripts name a job of any queue.
fn job_ref(queue: &str, id: &str) -> String {
    format!("{queue}\n{id}")
}

impl RedisBoard {
    /// Registers a just-posted waiting job with its dependencies in other
    /// queues. Dependencies already consumed are resolved at once; when one
    /// does not exist the job is cancelled and the post fails.
    pub(crate) async fn link_dependencies(&self, keys: &QueueKeys, id: &JobId, job: &NewJob) -> Result<()> {
        let mut by_queue: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for d in &job.depends {
            if let Some(q) = d.queue.as_deref().filter(|q| *q != keys.queue) {
                by_queue.entry(q).or_default().push(d.job.as_str());
            }
        }
        let me = job_ref(&keys.queue, id.as_str());
        let mut done = Vec::new();
        for (queue, deps) in by_queue {
            let dep_keys = self.keys(queue)?;
            let mut args = vec![me.as_str()];
            args.extend(&deps);
            let reply = scripts::call(&self.conn, &SCRIPTS.depend, &dep_keys, &args).await?;
            for (k, dep) in deps.iter().enumerate() {
                match reply.string(1 + k)?.as_str() {
                    "done" => done.push(job_ref(queue, dep)),
                    "missing" => {
                        self.cancel_in(keys, &[id.as_str()], true).await?;
                        return Err(Error::new(
                            ErrorKind::NotFound,
                            format!(
                                "job {id} cannot depend on job {dep} of queue {queue}: it is not on the \
                                 board, or was cancelled (job {id} was cancelled)"
                            ),
                        ));
                    }
                    _ => {}
                }
            }
        }
        if !done.is_empty() {
            let mut args = Vec::new();
            for d in &done {
                args.push(id.as_str());
                args.push(d.as_str());
            }
            scripts::call(&self.conn, &SCRIPTS.resolve, keys, &args).await?;
        }
        Ok(())
    }

    /// Resolves the dependency releases `queue` owes other queues (left by
    /// `consume.lua`); returns how many entries were settled.
    pub async fn flush_outbox(&self, queue: &str) -> Result<usize> {
        let keys = self.keys(queue)?;
        let entries: Vec<String> = self
            .conn
            .query(redis::cmd("SRANDMEMBER").arg(keys.outbox()).arg(OUTBOX_BATCH))
            .await?;
        let mut by_queue: BTreeMap<&str, Vec<(&str, String, &String)>> = BTreeMap::new();
        for entry in &entries {
            let mut parts = entry.splitn(3, '\n');
            let (Some(q), Some(id), Some(dep)) = (parts.next(), parts.next(), parts.next()) else {
                tracing::warn!(queue, entry, "dropping a malformed outbox entry");
                self.conn
                    .query::<()>(redis::cmd("SREM").arg(keys.outbox()).arg(entry))
                    .await?;
                continue;
            };
            by_queue.entry(q).or_default().push((id, dep.to_owned(), entry));
        }
        let mut settled = 0;
        for (target, items) in by_queue {
            let target_keys = self.keys(target)?;
            let mut args = Vec::with_capacity(items.len() * 2);
            for (id, dep, _) in &items {
                args.push(*id);
                args.push(dep.as_str());
            }
            scripts::call(&self.conn, &SCRIPTS.resolve, &target_keys, &args).await?;
            let mut srem = redis::cmd("SREM");
            srem.arg(keys.outbox());
            for (_, _, entry) in &items {
                srem.arg(entry.as_str());
            }
            self.conn.query::<()>(&srem).await?;
            settled += items.len();
        }
        Ok(settled)
    }

    /// Cancels jobs of `queue` that have not finished. A job that other
    /// jobs depend on is refused (`is_invalid`, naming them) unless
    /// `with_dependents`, which cancels every job that depends on it,
    /// directly or not, in any queue. Returns the cancelled jobs as
    /// `(queue, id)`.
    pub async fn cancel(
        &self,
        queue: &str,
        jobs: &[JobId],
        with_dependents: bool,
    ) -> Result<Vec<(String, JobId)>> {
        let mut order: Vec<(String, String)> = jobs.iter().map(|j| (queue.to_owned(), j.0.clone())).collect();
        if with_dependents {
            order = self.dependents_closure(order).await?;
        }
        // Dependents first, so that no cancelled job leaves a live one behind.
        let mut cancelled = Vec::new();
        for (q, id) in order.iter().rev() {
            let keys = self.keys(q)?;
            match self.cancel_in(&keys, &[id.as_str()], with_dependents).await {
                Ok(()) => cancelled.push((q.clone(), JobId(id.clone()))),
                Err(e) if with_dependents && e.is_finished() && !jobs.iter().any(|j| &j.0 == id) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(cancelled)
    }

    /// Every job reachable from `roots` through dependents, roots first,
    /// each once.
    async fn dependents_closure(&self, roots: Vec<(String, String)>) -> Result<Vec<(String, String)>> {
        let mut seen: BTreeSet<(String, String)> = roots.iter().cloned().collect();
        let mut order = roots.clone();
        let mut at = 0;
        while at < order.len() {
            let (q, id) = order[at].clone();
            at += 1;
            let keys = self.keys(&q)?;
            let refs: Vec<String> = self
                .conn
                .query(redis::cmd("SMEMBERS").arg(keys.dependents(&id)))
                .await?;
            for r in refs {
                if let Some((dq, did)) = r.split_once('\n') {
                    let item = (dq.to_owned(), did.to_owned());
                    if seen.insert(item.clone()) {
                        order.push(item);
                    }
                }
            }
        }
        Ok(order)
    }

    /// Runs `cancel.lua` on one queue, then removes the cancelled jobs from
    /// their dependencies' sets in other queues. A call whose connection
    /// dropped is sent once more saying since when: a job cancelled in that
    /// time is taken as the first sending's, not "already finished", and
    /// its dependencies in other queues are named again.
    pub(crate) async fn cancel_in(&self, keys: &QueueKeys, ids: &[&str], force: bool) -> Result<()> {
        let call = |again: Option<Duration>| {
            let mut inv = Invocation::new(&SCRIPTS.cancel, keys);
            let force = if force { "1" } else { "0" };
            match again {
                None => inv.arg(force),
                Some(window) => inv.arg(format!("{force} again {}", millis(window))),
            };
            inv.arg(self.opts.history_count)
                .arg(self.opts.history_age.as_millis() as u64);
            for id in ids {
                inv.arg(*id);
            }
            inv
        };
        let first = Instant::now();
        let value = send_again_if_lost(
            call(None).invoke(&self.conn),
            || async move { call(Some(again_window(first))).invoke(&self.conn).await },
            "cancelling",
        )
        .await?;
        let reply = Reply::from_value(value)?;
        match reply.status().as_str() {
            "ok" => {}
            "not_found" => return Err(Error::not_found(&keys.queue, &reply.string(1)?)),
            "finished" => return Err(Error::finished(&keys.queue, &reply.string(1)?, &reply.string(2)?)),
            "has_dependents" => {
                let id = reply.string(1)?;
                let names: Vec<String> = (2..reply.0.len())
                    .filter_map(|i| reply.string(i).ok())
                    .map(|r| r.replace('\n', "/"))
                    .collect();
                return Err(Error::invalid(format!(
                    "job {id} in queue {} has live dependents ({}); cancel them with it \
                     (--with-dependents) or first",
                    keys.queue,
                    names.join(", ")
                )));
            }
            other => return Err(Error::codec(format!("unexpected cancel reply {other:?}"))),
        }
        for i in 1..reply.0.len() {
            let entry = reply.string(i)?;
            let mut parts = entry.splitn(3, '\n');
            if let (Some(q), Some(dep), Some(id)) = (parts.next(), parts.next(), parts.next()) {
                let dep_keys = self.keys(q)?;
                let me = job_ref(&keys.queue, id);
                self.conn
                    .query::<()>(redis::cmd("SREM").arg(dep_keys.dependents(dep)).arg(me))
                    .await?;
            }
        }
        Ok(())
    }

    /// The ids of jobs held by `owner` that get cancelled, as `cancel`
    /// announces them (so a worker can stop their handlers at once rather
    /// than at its next heartbeat); on a cluster, on every queue's channel.
    pub async fn cancels_of(&self, owner: &str) -> Result<impl futures_util::Stream<Item = String> + Unpin> {
        use futures_util::StreamExt;
        let messages = if self.conn.is_cluster() {
            let owner = owner.to_owned();
            every_queue(self, move |keys| format!("{}:cancel:{owner}", keys.events))
                .await?
                .boxed()
        } else {
            let mut pubsub = self.conn.pubsub().await?;
            pubsub
                .subscribe(&format!("{}:cancel:{owner}", self.options().prefix))
                .await?;
            pubsub.into_stream().boxed()
        };
        Ok(messages.filter_map(|msg| std::future::ready(msg.get_payload::<String>().ok())))
    }
}
