//! Tags on jobs: the verbs `tag` and `untag` over `tag.lua`, and the
//! reads of tagged jobs and the most used tags.

use crate::error::{Error, Result};
use crate::job::{validate_word, JobId, Page};
use crate::redis::admin::rev_range;
use crate::redis::board::RedisBoard;
use crate::redis::scripts::{self, SCRIPTS};

impl RedisBoard {
    /// Adds tags to a job; returns its tags.
    pub async fn tag(&self, queue: &str, job: &JobId, tags: &[&str]) -> Result<Vec<String>> {
        self.change_tags(queue, job, "add", tags).await
    }

    /// Removes tags from a job; returns its tags.
    pub async fn untag(&self, queue: &str, job: &JobId, tags: &[&str]) -> Result<Vec<String>> {
        self.change_tags(queue, job, "remove", tags).await
    }

    async fn change_tags(&self, queue: &str, job: &JobId, mode: &str, tags: &[&str]) -> Result<Vec<String>> {
        for tag in tags {
            validate_word("tag", tag)?;
        }
        let keys = self.keys(queue)?;
        let mut args = vec![mode, job.as_str()];
        args.extend(tags);
        let reply = scripts::call(&self.conn, &SCRIPTS.tag, &keys, &args).await?;
        let reply = reply.accept(&keys, job.as_str(), "")?;
        serde_json::from_str(&reply.string(1)?).map_err(|e| Error::codec(format!("bad tag list: {e}")))
    }

    /// Jobs carrying `tag`, most recently tagged first.
    pub async fn tagged(&self, queue: &str, tag: &str, page: Page) -> Result<Vec<JobId>> {
        let keys = self.keys(queue)?;
        let ids: Vec<String> = self.conn.query(&rev_range(&keys.tag(tag), page)).await?;
        Ok(ids.into_iter().map(JobId).collect())
    }

    /// The most used tags of `queue` with their job counts.
    pub async fn top_tags(&self, queue: &str, page: Page) -> Result<Vec<(String, u64)>> {
        let keys = self.keys(queue)?;
        let mut cmd = rev_range(keys.tags(), page);
        cmd.arg("WITHSCORES");
        let pairs: Vec<(String, f64)> = self.conn.query(&cmd).await?;
        Ok(pairs.into_iter().map(|(t, n)| (t, n as u64)).collect())
    }
}
