//! Read-only views of a queue: one job's state and details, pages of
//! listings, and whether taskflow posted jobs the index lacks.

use std::collections::HashMap;

use crate::codec::args_of;
use crate::codec::{decode_posting, value_to_json, CreatedOn, OsloDateTime, Posting};
use crate::error::{Error, Result};
use crate::job::{JobInfo, JobState, ListFilter, Page, DEFAULT_MAX_ATTEMPTS};
use crate::redis::board::RedisBoard;
use crate::redis::keys::QueueKeys;

/// Raw facts about one job, read in one MULTI.
type Facts = (
    Option<Vec<u8>>,          // listing
    Option<Vec<u8>>,          // owner
    HashMap<String, Vec<u8>>, // job hash (its `posting` is binary)
    Option<Vec<u8>>,          // trash copy
    Option<Vec<u8>>,          // quarantined bytes
    Option<String>,           // quarantine reason
    Option<f64>,              // scheduled run-at
    Option<Vec<u8>>,          // taskflow's last_modified (oslo datetime)
    i64,                      // PTTL of the owner key (the lease left)
    Option<f64>,              // ready index score
);

/// Reads and interprets jobs `ids` (missing ones are left out, or an error
/// for a single `show`).
async fn fetch(
    board: &RedisBoard,
    keys: &QueueKeys,
    ids: &[String],
) -> Result<Vec<(String, Option<JobInfo>)>> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for id in ids {
        pipe.hget(keys.listings(), id)
            .get(keys.owned(id))
            .hgetall(keys.job(id))
            .hget(keys.trash(), id)
            .hget(keys.quarantine(), id)
            .hget(keys.quarantine_reason(), id)
            .zscore(keys.scheduled(), id)
            .get(keys.last_modified(id))
            .pttl(keys.owned(id))
            .zscore(keys.ready(), id);
    }
    let values: Vec<redis::Value> = board.conn.query_pipe(&pipe).await?;
    let mut out = Vec::with_capacity(ids.len());
    for (id, chunk) in ids.iter().zip(values.chunks(10)) {
        let facts: Facts = redis::FromRedisValue::from_redis_value(redis::Value::Array(chunk.to_vec()))
            .map_err(|e| Error::codec(format!("unexpected reply reading job {id}: {e}")))?;
        out.push((id.clone(), interpret(keys, id, facts)));
    }
    Ok(out)
}

fn interpret(keys: &QueueKeys, id: &str, facts: Facts) -> Option<JobInfo> {
    let (listing, owner, mut job, trashed, quarantined, qreason, run_at, modified, pttl, ready) = facts;
    let held = job.remove("posting");
    let job: HashMap<String, String> = job
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
        .collect();
    let recorded = job.get("state").map(String::as_str);
    let state = if listing.is_some() {
        if owner.is_some() {
            JobState::Claimed
        } else if run_at.is_some() {
            JobState::Scheduled
        } else {
            JobState::Ready
        }
    } else if quarantined.is_some() {
        JobState::Quarantined
    } else if trashed.is_some() {
        JobState::Trashed
    } else if let Some(state @ ("completed" | "cancelled" | "waiting")) = recorded {
        JobState::parse(state).ok()?
    } else if !job.is_empty() || ready.is_some() {
        // Known to jobworker, gone from the listings and not in the trash:
        // consumed, by jobworker (whose consume records no state in the
        // hash: the job's entry in the history index says it) or by
        // taskflow (taskflow itself says COMPLETE; the next claim or reap
        // moves it to the history, and it reads completed before that
        // too, as on ZooKeeper; a lean job, lua/lib/lean.lua, has no hash
        // then, only its place in the ready index).
        JobState::Completed
    } else {
        return None;
    };
    let owner = owner.map(|o| String::from_utf8_lossy(&o).into_owned());
    let mut info = recorded_info(keys, id, &job, state, owner, run_at, pttl);
    if job.is_empty() && ready.is_none() {
        // taskflow's, not indexed yet: no limit of ours.
        info.max_attempts = 0;
    }
    let modified = modified.and_then(|m| OsloDateTime::decode_ext(&m).ok());
    let bytes = listing.or(held).or(trashed).or(quarantined);
    match bytes.as_deref().map(decode_posting) {
        Some(Ok(p)) => with_posting(&mut info, p, modified.as_ref(), job.contains_key("prio")),
        Some(Err(reason)) => info.reason = Some(qreason.unwrap_or(reason)),
        None => {}
    }
    Some(info)
}

/// A job's info from what jobworker recorded in its hash (`job`), before
/// its posting is read.
fn recorded_info(
    keys: &QueueKeys,
    id: &str,
    job: &HashMap<String, String>,
    state: JobState,
    owner: Option<String>,
    run_at: Option<f64>,
    pttl: i64,
) -> JobInfo {
    let num = |k: &str| job.get(k).and_then(|v| v.parse::<i64>().ok());
    JobInfo {
        id: id.to_owned(),
        queue: keys.queue.clone(),
        name: job.get("name").cloned().unwrap_or_default(),
        state,
        priority: num("prio").unwrap_or(0) as i32,
        owner,
        attempts: num("attempts").unwrap_or(0) as u32,
        // (No `max`: a lean job's default attempts, lua/lib/lean.lua.)
        max_attempts: num("max").map_or(DEFAULT_MAX_ATTEMPTS, |m| m as u32),
        token: num("token").unwrap_or(0) as u64,
        expires_in_ms: (state == JobState::Claimed && pttl >= 0).then_some(pttl),
        run_at_ms: run_at.map(|t| t as i64),
        sequence: num("seq"),
        created_on: None,
        last_modified: None,
        reason: job.get("reason").cloned(),
        group: job.get("group").cloned(),
        tags: job
            .get("tags")
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default(),
        args: serde_json::Value::Null,
        details: serde_json::Value::Null,
        book: None,
    }
}

/// Fills in what the job's decoded posting tells: name, sequence,
/// priority (unless jobworker recorded one, `has_prio`), taskflow's dates,
/// arguments and details.
fn with_posting(info: &mut JobInfo, p: Posting, modified: Option<&OsloDateTime>, has_prio: bool) {
    info.name = p.name;
    info.sequence = p.sequence.or(info.sequence);
    if !has_prio {
        info.priority = p.priority.0;
    }
    // taskflow's last_modified: the later of the key and created_on.
    info.last_modified = match (&p.created_on, modified) {
        (CreatedOn::DateTime(c), Some(m)) => Some(
            if m.to_unix_micros() > c.to_unix_micros() {
                m
            } else {
                c
            }
            .iso(),
        ),
        (CreatedOn::DateTime(c), None) => Some(c.iso()),
        (CreatedOn::Other(_), m) => m.map(OsloDateTime::iso),
    };
    info.created_on = Some(match &p.created_on {
        CreatedOn::DateTime(dt) => dt.iso(),
        CreatedOn::Other(v) => value_to_json(v).to_string(),
    });
    info.args = value_to_json(&args_of(&p.details));
    info.details = value_to_json(&p.details);
    info.book = p.book;
}

/// Everything about one job.
pub(crate) async fn show(board: &RedisBoard, keys: &QueueKeys, id: &str) -> Result<JobInfo> {
    fetch(board, keys, &[id.to_owned()])
        .await?
        .pop()
        .and_then(|(_, info)| info)
        .ok_or_else(|| Error::not_found(&keys.queue, id))
}

/// True when the listings hold jobs the index does not (posted by taskflow).
pub(crate) async fn has_unindexed(board: &RedisBoard, keys: &QueueKeys) -> Result<bool> {
    let mut pipe = redis::pipe();
    pipe.hlen(keys.listings())
        .zcard(keys.ready())
        .zcard(keys.scheduled())
        .zcard(keys.leases());
    let (listed, ready, scheduled, leased): (usize, usize, usize, usize) =
        board.conn.query_pipe(&pipe).await?;
    Ok(listed > ready + scheduled + leased)
}

/// Ids of a page over several sorted sets read one after the other.
async fn zset_page(board: &RedisBoard, sets: &[&str], page: Page, reverse: bool) -> Result<Vec<String>> {
    let mut skip = page.offset;
    let mut ids = Vec::new();
    for set in sets {
        let want = page.limit - ids.len();
        if want == 0 {
            break;
        }
        let card: usize = board.conn.query(redis::cmd("ZCARD").arg(*set)).await?;
        if skip >= card {
            skip -= card;
            continue;
        }
        let mut cmd = redis::cmd("ZRANGE");
        cmd.arg(*set).arg(skip).arg(skip + want - 1);
        if reverse {
            cmd.arg("REV");
        }
        let part: Vec<String> = board.conn.query(&cmd).await?;
        ids.extend(part);
        skip = 0;
    }
    Ok(ids)
}

/// A page of a hash's fields, sorted.
async fn hash_page(board: &RedisBoard, hash: &str, page: Page) -> Result<Vec<String>> {
    let mut fields: Vec<String> = board.conn.query(redis::cmd("HKEYS").arg(hash)).await?;
    fields.sort();
    Ok(fields.into_iter().skip(page.offset).take(page.limit).collect())
}

/// A page of the queue's jobs matching `filter`.
pub(crate) async fn list(
    board: &RedisBoard,
    keys: &QueueKeys,
    filter: ListFilter,
    page: Page,
) -> Result<Vec<JobInfo>> {
    if page.limit == 0 {
        return Ok(Vec::new());
    }
    let ids = match filter {
        ListFilter::Live => {
            zset_page(
                board,
                &[keys.ready(), keys.scheduled(), keys.leases()],
                page,
                false,
            )
            .await?
        }
        ListFilter::State(JobState::Ready) => zset_page(board, &[keys.ready()], page, false).await?,
        ListFilter::State(JobState::Scheduled) => zset_page(board, &[keys.scheduled()], page, false).await?,
        ListFilter::State(JobState::Claimed) => zset_page(board, &[keys.leases()], page, false).await?,
        ListFilter::State(JobState::Trashed) => zset_page(board, &[keys.trashed()], page, true).await?,
        ListFilter::State(JobState::Quarantined) => hash_page(board, keys.quarantine(), page).await?,
        ListFilter::State(JobState::Waiting) => zset_page(board, &[keys.waiting()], page, false).await?,
        ListFilter::State(JobState::Completed) => zset_page(board, &[keys.completed()], page, true).await?,
        ListFilter::State(JobState::Cancelled) => zset_page(board, &[keys.cancelled()], page, true).await?,
    };
    Ok(fetch(board, keys, &ids)
        .await?
        .into_iter()
        .filter_map(|(_, info)| info)
        .collect())
}
