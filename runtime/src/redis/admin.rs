//! The queue registry (every queue jobs were posted to) and what the
//! operator verbs share. The verbs themselves live one concern a file:
//! `priority.rs`, `tag.rs`, `track.rs`, `failed.rs` (retry, purge),
//! `settings.rs` (pause, limit), `history.rs` and `config.rs`. Each change
//! is one script or one atomic command in the queue's slot.

use crate::error::Result;
use crate::job::Page;
use crate::redis::board::RedisBoard;

impl RedisBoard {
    /// Remembers that `queue` exists (for commands over every queue).
    pub(crate) async fn register_queue(&self, queue: &str) -> Result<()> {
        let fresh = self
            .known_queues
            .lock()
            .map(|mut k| !k.contains(queue) && k.insert(queue.to_owned()))
            .unwrap_or(true);
        if fresh {
            let added = self
                .conn
                .query::<()>(redis::cmd("SADD").arg(self.queues_key()).arg(queue))
                .await;
            if added.is_err() {
                // Not remembered: the next call adds it.
                if let Ok(mut known) = self.known_queues.lock() {
                    known.remove(queue);
                }
            }
            added?;
        }
        Ok(())
    }

    /// Every queue jobs were posted to through jobworker, sorted.
    pub async fn queues(&self) -> Result<Vec<String>> {
        let mut queues: Vec<String> = self
            .conn
            .query(redis::cmd("SMEMBERS").arg(self.queues_key()))
            .await?;
        queues.sort();
        Ok(queues)
    }

    fn queues_key(&self) -> String {
        format!("{}:queues", self.options().prefix)
    }
}

/// A `ZRANGE … REV` command for one page of a sorted set, newest first.
pub(super) fn rev_range(key: &str, page: Page) -> redis::Cmd {
    let mut cmd = redis::cmd("ZRANGE");
    cmd.arg(key)
        .arg(page.offset)
        .arg(
            page.offset
                .saturating_add(page.limit)
                .saturating_sub(1)
                .min(i64::MAX as usize) as i64,
        )
        .arg("REV");
    cmd
}
