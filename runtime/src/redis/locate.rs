//! Which queue holds a job: for commands given a job id without its queue.
//! The queues looked in are those jobworker posted to or claimed from on
//! this board (`<prefix>:queues`) and those mapped to a namespace; one
//! pipelined round trip checks each for the job's state, listing, trash
//! copy or quarantine entry. Nothing is written at post for this: the cost
//! is paid by the lookup, not by every post.

use crate::error::Result;
use crate::job::JobId;
use crate::redis::board::RedisBoard;

impl RedisBoard {
    /// The queues that hold job `id` (usually one; a pipeline step keeps
    /// its id in the next queue), sorted.
    pub async fn queues_of(&self, id: &JobId) -> Result<Vec<String>> {
        let mut queues = self.queues().await?;
        queues.extend(self.options().namespaces.keys().cloned());
        queues.sort();
        queues.dedup();
        let mut pipe = redis::pipe();
        let mut checked = Vec::with_capacity(queues.len());
        for queue in queues {
            let Ok(keys) = self.keys(&queue) else { continue };
            let id = id.as_str();
            pipe.exists(keys.job(id))
                .hexists(keys.listings(), id)
                .hexists(keys.trash(), id)
                .hexists(keys.quarantine(), id)
                .cmd("ZSCORE")
                .arg(keys.ready())
                .arg(id);
            checked.push(queue);
        }
        if checked.is_empty() {
            return Ok(Vec::new());
        }
        // (The ready index's score: a lean job, lua/lib/lean.lua, taken by
        // taskflow has neither a hash nor a listing.)
        let found: Vec<redis::Value> = self.conn.query_pipe(&pipe).await?;
        let hit = |v: &redis::Value| !matches!(v, redis::Value::Nil | redis::Value::Int(0));
        Ok(checked
            .into_iter()
            .zip(found.chunks(5))
            .filter(|(_, hits)| hits.iter().any(hit))
            .map(|(queue, _)| queue)
            .collect())
    }
}
