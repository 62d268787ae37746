//! The worker registry on Redis: one JSON entry per worker in
//! `<prefix>:workers`; entries whose beat is older than their TTL (on the
//! server's clock) are dropped when listed.

use crate::board::{Presence, WorkerInfo};
use crate::error::{Error, Result};
use crate::redis::board::RedisBoard;

impl Presence for RedisBoard {
    async fn record_worker(&self, info: &WorkerInfo) -> Result<()> {
        let json = serde_json::to_string(info).map_err(|e| Error::codec(e.to_string()))?;
        let key = self.options().workers_key();
        self.conn
            .query::<()>(redis::cmd("HSET").arg(key).arg(&info.owner).arg(json))
            .await
    }

    async fn remove_worker(&self, owner: &str) -> Result<()> {
        let key = self.options().workers_key();
        self.conn
            .query::<()>(redis::cmd("HDEL").arg(key).arg(owner))
            .await
    }

    async fn live_workers(&self) -> Result<Vec<WorkerInfo>> {
        let key = self.options().workers_key();
        let all: Vec<(String, String)> = self.conn.query(redis::cmd("HGETALL").arg(&key)).await?;
        let now = self.server_ms().await?.max(0) as u64;
        let mut live = Vec::new();
        for (owner, json) in all {
            match serde_json::from_str::<WorkerInfo>(&json) {
                Ok(info) if info.beat_ms + info.ttl_ms >= now => live.push(info),
                _ => self.remove_worker(&owner).await?,
            }
        }
        live.sort_by(|a, b| a.owner.cmp(&b.owner));
        Ok(live)
    }
}
