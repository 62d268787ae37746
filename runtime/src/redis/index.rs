//! Indexing jobs taskflow posted: the Rust twins of `index.lua` and
//! `quarantine.lua`, and the scan that feeds them.

use crate::codec::{decode_posting, Posting};
use crate::error::Result;
use crate::redis::board::RedisBoard;
use crate::redis::connect::Connection;
use crate::redis::invocation::Invocation;
use crate::redis::keys::QueueKeys;
use crate::redis::reply::Reply;
use crate::redis::scripts::{run, SCRIPTS};

/// Listing entries examined per call when looking for jobs posted by
/// taskflow that are not indexed yet.
const INDEX_SCAN_BUDGET: usize = 2000;

impl RedisBoard {
    /// Decodes a claimed posting, or quarantines it when it cannot be
    /// decoded (then `None`).
    pub(super) async fn decode_or_quarantine(
        &self,
        keys: &QueueKeys,
        id: &str,
        bytes: &[u8],
    ) -> Result<Option<Posting>> {
        match decode_posting(bytes) {
            Ok(p) => Ok(Some(p)),
            Err(reason) => {
                tracing::warn!(job = id, queue = %keys.queue, %reason, "quarantining undecodable posting");
                quarantine(&self.conn, keys, id.as_bytes(), bytes, &reason).await?;
                Ok(None)
            }
        }
    }

    /// Indexes jobs in the listings that jobworker has not seen (posted by
    /// taskflow), quarantining postings that cannot be decoded. Scans at
    /// most `INDEX_SCAN_BUDGET` entries, resuming where the last call
    /// stopped; returns how many jobs it indexed.
    pub async fn index_foreign(&self, queue: &str) -> Result<usize> {
        let keys = self.keys(queue)?;
        let mut cursor = self
            .scan_cursors
            .lock()
            .map(|c| c.get(queue).copied().unwrap_or(0))
            .unwrap_or(0);
        let mut seen = 0;
        let mut indexed = 0;
        loop {
            let mut scan = redis::cmd("HSCAN");
            scan.arg(keys.listings()).arg(cursor).arg("COUNT").arg(500);
            let (next, flat): (u64, Vec<Vec<u8>>) = self.conn.query(&scan).await?;
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = flat
                .chunks_exact(2)
                .map(|c| (c[0].clone(), c[1].clone()))
                .collect();
            seen += pairs.len();
            indexed += self.index_batch(&keys, &pairs).await?;
            cursor = next;
            if cursor == 0 || seen >= INDEX_SCAN_BUDGET {
                break;
            }
        }
        if let Ok(mut c) = self.scan_cursors.lock() {
            c.insert(queue.to_owned(), cursor);
        }
        Ok(indexed)
    }

    async fn index_batch(&self, keys: &QueueKeys, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<usize> {
        if pairs.is_empty() {
            return Ok(0);
        }
        // Ours: a job hash, or a place in the ready index (a lean job,
        // lib/lean.lua, has no hash before its first claim).
        let mut pipe = redis::pipe();
        for (field, _) in pairs {
            let id = String::from_utf8_lossy(field);
            pipe.exists(keys.job(&id)).zscore(keys.ready(), id.as_ref());
        }
        let known: Vec<(bool, Option<f64>)> = self.conn.query_pipe(&pipe).await?;
        let mut fresh = Vec::new();
        for ((field, bytes), (hashed, ready)) in pairs.iter().zip(known) {
            if hashed || ready.is_some() {
                continue;
            }
            let reason = match String::from_utf8(field.clone()) {
                Err(_) => Err("hash field is not utf-8".to_owned()),
                Ok(id) => decode_posting(bytes).map(|p| (id, p)),
            };
            match reason {
                Ok((id, p)) => fresh.push((id, p.priority.0, p.sequence.unwrap_or(0))),
                Err(reason) => {
                    tracing::warn!(queue = %keys.queue, field = %String::from_utf8_lossy(field), %reason, "quarantining undecodable posting");
                    quarantine(&self.conn, keys, field, bytes, &reason).await?;
                }
            }
        }
        if fresh.is_empty() {
            return Ok(0);
        }
        let reply = index(&self.conn, keys, self.opts.default_max_attempts, &fresh).await?;
        Ok(reply.int(1)? as usize)
    }
}

/// Twin of `index.lua`: `jobs` = (id, priority, sequence).
pub(crate) async fn index(
    conn: &Connection,
    keys: &QueueKeys,
    max_attempts: u32,
    jobs: &[(String, i32, i64)],
) -> Result<Reply> {
    let mut inv = Invocation::new(&SCRIPTS.index, keys);
    inv.arg(max_attempts);
    for (id, priority, sequence) in jobs {
        inv.arg(id).arg(priority).arg(sequence);
    }
    run(conn, &inv).await
}

/// Twin of `quarantine.lua`.
pub(crate) async fn quarantine(
    conn: &Connection,
    keys: &QueueKeys,
    field: &[u8],
    bytes: &[u8],
    reason: &str,
) -> Result<Reply> {
    let mut inv = Invocation::new(&SCRIPTS.quarantine, keys);
    inv.arg(field).arg(bytes).arg(reason);
    run(conn, &inv).await
}
