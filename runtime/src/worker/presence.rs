//! The worker registry: each worker records who and where it is, what it
//! runs and when it last beat: in `<prefix>:workers` on Redis (stale
//! entries are dropped when listed), as taskflow's ephemeral conductor
//! entities on ZooKeeper (gone with the worker's session). Beats and
//! liveness are on the server's clock, so hosts whose clocks disagree
//! neither hide live workers nor keep dead ones.

use serde::{Deserialize, Serialize};

use crate::board::AnyBoard;
use crate::error::{Error, Result};
use crate::redis::RedisBoard;

/// One worker's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// The owner string it claims with.
    pub owner: String,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Slot number under its supervisor.
    pub slot: usize,
    /// Queues it serves, in order.
    pub queues: Vec<String>,
    /// Start time (ms since the epoch, server clock; set by the first
    /// beat).
    pub started_ms: u64,
    /// Last heartbeat (ms since the epoch, server clock).
    pub beat_ms: u64,
    /// The entry is stale once `beat_ms + ttl_ms` has passed.
    pub ttl_ms: u64,
    /// Jobs it holds right now.
    pub jobs: Vec<String>,
}

/// Writes (or refreshes) a worker's entry, stamped with the server's time.
pub(crate) async fn record(board: &AnyBoard, info: &mut WorkerInfo) -> Result<()> {
    info.beat_ms = board.server_ms().await?.max(0) as u64;
    if info.started_ms == 0 {
        info.started_ms = info.beat_ms;
    }
    let info = &*info;
    let board = match board {
        AnyBoard::Redis(b) => b,
        AnyBoard::ZooKeeper(zk) => {
            let queues: Vec<&str> = info.queues.iter().map(String::as_str).collect();
            let metadata = serde_json::to_value(info).map_err(|e| Error::codec(e.to_string()))?;
            return zk.register_worker_for(&queues, &info.owner, metadata).await;
        }
    };
    let json = serde_json::to_string(info).map_err(|e| Error::codec(e.to_string()))?;
    board
        .conn
        .query::<()>(
            redis::cmd("HSET")
                .arg(board.options().workers_key())
                .arg(&info.owner)
                .arg(json),
        )
        .await
}

/// Removes a worker's entry.
pub(crate) async fn remove(board: &AnyBoard, owner: &str) -> Result<()> {
    let board = match board {
        AnyBoard::Redis(b) => b,
        AnyBoard::ZooKeeper(zk) => return zk.unregister_worker(owner).await,
    };
    board
        .conn
        .query::<()>(redis::cmd("HDEL").arg(board.options().workers_key()).arg(owner))
        .await
}

/// The live workers, sorted by owner.
pub async fn list_workers(board: &AnyBoard) -> Result<Vec<WorkerInfo>> {
    match board {
        AnyBoard::Redis(b) => list_redis_workers(b).await,
        AnyBoard::ZooKeeper(zk) => {
            let mut live: Vec<WorkerInfo> = zk
                .list_workers()
                .await?
                .into_iter()
                .filter_map(|entity| serde_json::from_value(entity["metadata"].clone()).ok())
                .collect();
            live.sort_by(|a, b| a.owner.cmp(&b.owner));
            Ok(live)
        }
    }
}

/// The live workers on Redis, sorted by owner; stale entries are deleted.
async fn list_redis_workers(board: &RedisBoard) -> Result<Vec<WorkerInfo>> {
    let key = board.options().workers_key();
    let all: Vec<(String, String)> = board.conn.query(redis::cmd("HGETALL").arg(&key)).await?;
    let now = board.server_ms().await?.max(0) as u64;
    let mut live = Vec::new();
    for (owner, json) in all {
        match serde_json::from_str::<WorkerInfo>(&json) {
            Ok(info) if info.beat_ms + info.ttl_ms >= now => live.push(info),
            _ => {
                board
                    .conn
                    .query::<()>(redis::cmd("HDEL").arg(&key).arg(&owner))
                    .await?
            }
        }
    }
    live.sort_by(|a, b| a.owner.cmp(&b.owner));
    Ok(live)
}
