//! The Lua scripts (`lua/*.lua`) and their Rust twins: each twin builds the
//! invocation with the queue keys and reads the reply.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{Script, ScriptInvocation};

use crate::error::Result;
use crate::redis::connect::{retry_once, Connection};
use crate::redis::keys::QueueKeys;
use crate::redis::reply::Reply;

const PRELUDE: &str = include_str!("../../../lua/prelude.lua");

/// Every verb's script, each sent as the prelude followed by its file.
pub(crate) struct Scripts {
    pub post: Script,
    pub claim: Script,
    pub claim_job: Script,
    pub extend: Script,
    pub consume: Script,
    pub abandon: Script,
    pub trash: Script,
    pub reap: Script,
    pub index: Script,
    pub quarantine: Script,
    pub recover_owner: Script,
    pub cancel: Script,
    pub priority: Script,
    pub resolve: Script,
    pub depend: Script,
    pub retry: Script,
    pub purge: Script,
    pub tag: Script,
    pub track: Script,
    pub recur_spawn: Script,
}

impl Scripts {
    /// All scripts, to load them once at connect.
    pub fn all(&self) -> [&Script; 20] {
        [
            &self.post,
            &self.claim,
            &self.claim_job,
            &self.extend,
            &self.consume,
            &self.abandon,
            &self.trash,
            &self.reap,
            &self.index,
            &self.quarantine,
            &self.recover_owner,
            &self.cancel,
            &self.priority,
            &self.resolve,
            &self.depend,
            &self.retry,
            &self.purge,
            &self.tag,
            &self.track,
            &self.recur_spawn,
        ]
    }
}

fn script(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}\n{body}"))
}

/// The scripts, built once per process.
pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    post: script(include_str!("../../../lua/post.lua")),
    claim: script(include_str!("../../../lua/claim.lua")),
    claim_job: script(include_str!("../../../lua/claim_job.lua")),
    extend: script(include_str!("../../../lua/extend.lua")),
    consume: script(include_str!("../../../lua/consume.lua")),
    abandon: script(include_str!("../../../lua/abandon.lua")),
    trash: script(include_str!("../../../lua/trash.lua")),
    reap: script(include_str!("../../../lua/reap.lua")),
    index: script(include_str!("../../../lua/index.lua")),
    quarantine: script(include_str!("../../../lua/quarantine.lua")),
    recover_owner: script(include_str!("../../../lua/recover_owner.lua")),
    cancel: script(include_str!("../../../lua/cancel.lua")),
    priority: script(include_str!("../../../lua/priority.lua")),
    resolve: script(include_str!("../../../lua/resolve.lua")),
    depend: script(include_str!("../../../lua/depend.lua")),
    retry: script(include_str!("../../../lua/retry.lua")),
    purge: script(include_str!("../../../lua/purge.lua")),
    tag: script(include_str!("../../../lua/tag.lua")),
    track: script(include_str!("../../../lua/track.lua")),
    recur_spawn: script(include_str!("../../../lua/recur_spawn.lua")),
});

/// Loads every script into the server's cache (EVALSHA afterwards). One
/// at a time: a single pipeline of all of them is a half-megabyte buffer
/// that the allocator keeps in every process.
pub(crate) async fn load_all(conn: &Connection) -> Result<()> {
    for s in SCRIPTS.all() {
        let mut pipe = redis::pipe();
        pipe.load_script(s);
        conn.query_pipe::<Vec<String>>(&pipe).await?;
    }
    Ok(())
}

/// Starts an invocation of `script` with the queue keys and `NS:` prefix.
pub(crate) fn invocation<'a>(script: &'a Script, keys: &QueueKeys) -> ScriptInvocation<'a> {
    let mut inv = script.prepare_invoke();
    for key in &keys.keys {
        inv.key(key);
    }
    inv.arg(keys.prefix()).arg(&keys.queue).arg(&keys.events);
    inv
}

async fn run(conn: &Connection, inv: &ScriptInvocation<'_>) -> Result<Reply> {
    let value = retry_once(|| {
        let mut con = conn.manager.clone();
        async move { inv.invoke_async::<redis::Value>(&mut con).await }
    })
    .await?;
    Reply::from_value(value)
}

fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// Arguments of one post (see `lua/post.lua`).
pub(crate) struct PostArgs<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub head: &'a [u8],
    pub tail: &'a [u8],
    pub priority: i32,
    pub max_attempts: u32,
    /// How long after the post (server clock) it becomes claimable.
    pub delay: Duration,
    /// Tags, tracking, unique key and dependencies as JSON ('' for none).
    pub extra: &'a str,
}

/// Twin of `post.lua`: posts `jobs` (at most [`POST_BATCH`] of one queue)
/// in one call. One reply per job: `[status, sequence]`.
pub(crate) async fn post(conn: &Connection, keys: &QueueKeys, jobs: &[PostArgs<'_>]) -> Result<Vec<Reply>> {
    let reply = run(conn, &post_invocation(keys, jobs)).await?;
    Ok(split_pairs(&reply, jobs.len()))
}

/// One `[status, value]` reply per job from `{'ok', status, value, …}`
/// (a trailing value, like consume's outbox count, is ignored).
fn split_pairs(reply: &Reply, jobs: usize) -> Vec<Reply> {
    (0..jobs)
        .map(|k| {
            Reply(vec![
                reply.0.get(1 + 2 * k).cloned().unwrap_or_default(),
                reply.0.get(2 + 2 * k).cloned().unwrap_or_default(),
            ])
        })
        .collect()
}

/// Jobs per `post.lua` call in a bulk post.
pub(crate) const POST_BATCH: usize = 100;

fn post_invocation<'s>(keys: &QueueKeys, jobs: &[PostArgs<'_>]) -> ScriptInvocation<'s> {
    let mut inv = invocation(&SCRIPTS.post, keys);
    inv.arg(&keys.notify);
    for a in jobs {
        inv.arg(a.id)
            .arg(a.head)
            .arg(a.tail)
            .arg(a.priority)
            .arg(a.max_attempts)
            .arg(millis(a.delay))
            .arg(a.name)
            .arg(a.extra);
    }
    inv
}

/// Several `post.lua` calls in one pipeline (one round trip); loads the
/// scripts again if the server lost them (restart, SCRIPT FLUSH).
pub(crate) async fn post_batches(
    conn: &Connection,
    keys: &QueueKeys,
    batches: &[&[PostArgs<'_>]],
) -> Result<Vec<Vec<Reply>>> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for batch in batches {
        pipe.invoke_script(&post_invocation(keys, batch));
    }
    // Not retried after a dropped connection: batches that ran would
    // report their own jobs as already existing.
    let results: Vec<redis::RedisResult<redis::Value>> = pipe.query_async(&mut conn.manager.clone()).await?;
    let mut replies = Vec::with_capacity(batches.len());
    for (result, batch) in results.into_iter().zip(batches) {
        let value = match result {
            Ok(v) => v,
            Err(e) if is_noscript(&e) => {
                load_all(conn).await?;
                post_invocation(keys, batch)
                    .invoke_async(&mut conn.manager.clone())
                    .await?
            }
            Err(e) => return Err(e.into()),
        };
        replies.push(split_pairs(&Reply::from_value(value)?, batch.len()));
    }
    Ok(replies)
}

/// Arguments of one claim (see `lua/claim.lua`).
pub(crate) struct ClaimArgs<'a> {
    pub who: &'a str,
    pub expiry: Duration,
    pub count: usize,
    pub idle: bool,
    pub history: (usize, Duration),
    /// The trash's retention: count and age.
    pub trash: (usize, Duration),
}

fn claim_invocation<'s>(keys: &QueueKeys, a: &ClaimArgs<'_>) -> ScriptInvocation<'s> {
    let mut inv = invocation(&SCRIPTS.claim, keys);
    inv.arg(a.who)
        .arg(millis(a.expiry))
        .arg(a.count)
        .arg(if a.idle { "1" } else { "0" });
    inv.arg(a.history.0).arg(millis(a.history.1));
    inv.arg(a.trash.0).arg(millis(a.trash.1));
    inv
}

/// Twin of `claim.lua`. Not retried after a dropped connection: a claim
/// whose reply was lost must not take more jobs (its leases expire).
pub(crate) async fn claim(conn: &Connection, keys: &QueueKeys, a: &ClaimArgs<'_>) -> Result<Reply> {
    let value = claim_invocation(keys, a)
        .invoke_async::<redis::Value>(&mut conn.manager.clone())
        .await?;
    Reply::from_value(value)
}

/// `consume.lua` for each batch, then `claim.lua`, in one pipeline (one
/// round trip): a worker settles what finished and takes what is next.
/// Not retried after a dropped connection (see [`claim`]).
pub(crate) async fn consume_then_claim(
    conn: &Connection,
    batches: &[(QueueKeys, Vec<&crate::job::Lease>)],
    keep: usize,
    claim_keys: &QueueKeys,
    claim: &ClaimArgs<'_>,
) -> Result<(Vec<Consumed>, Reply)> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for (keys, leases) in batches {
        pipe.invoke_script(&consume_invocation(keys, leases, keep));
    }
    pipe.invoke_script(&claim_invocation(claim_keys, claim));
    let mut results: Vec<redis::RedisResult<redis::Value>> =
        pipe.query_async(&mut conn.manager.clone()).await?;
    // A script the server lost (restart, SCRIPT FLUSH) did not run: load
    // them all and run just that one again. Everything else ran once.
    let claimed = match results.pop() {
        Some(Ok(v)) => v,
        Some(Err(e)) if is_noscript(&e) => {
            load_all(conn).await?;
            claim_invocation(claim_keys, claim)
                .invoke_async(&mut conn.manager.clone())
                .await?
        }
        Some(Err(e)) => return Err(e.into()),
        None => return Err(crate::error::Error::codec("empty pipeline reply")),
    };
    let mut consumed = Vec::with_capacity(batches.len());
    for (result, (keys, leases)) in results.into_iter().zip(batches) {
        let value = match result {
            Ok(v) => v,
            Err(e) if is_noscript(&e) => {
                load_all(conn).await?;
                return_value(run(conn, &consume_invocation(keys, leases, keep)).await?)
            }
            Err(e) => return Err(e.into()),
        };
        consumed.push(consume_reply(&Reply::from_value(value)?, leases.len()));
    }
    Ok((consumed, Reply::from_value(claimed)?))
}

fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

fn return_value(reply: Reply) -> redis::Value {
    redis::Value::Array(reply.0)
}

/// Twin of `claim_job.lua`; `index` = (priority, sequence, max attempts)
/// used only for a job that was never indexed; an expiry of `None` holds
/// the claim until it is released.
pub(crate) async fn claim_job(
    conn: &Connection,
    keys: &QueueKeys,
    id: &str,
    who: &str,
    expiry: Option<Duration>,
    index: (i32, i64, u32),
) -> Result<Reply> {
    let mut inv = invocation(&SCRIPTS.claim_job, keys);
    inv.arg(id)
        .arg(who)
        .arg(expiry.map_or(0, millis))
        .arg(index.0)
        .arg(index.1)
        .arg(index.2);
    run(conn, &inv).await
}

/// Twin of `extend.lua`.
pub(crate) async fn extend(
    conn: &Connection,
    keys: &QueueKeys,
    id: &str,
    who: &str,
    token: u64,
    expiry: Duration,
) -> Result<Reply> {
    let mut inv = invocation(&SCRIPTS.extend, keys);
    inv.arg(id).arg(who).arg(token).arg(millis(expiry));
    run(conn, &inv).await
}

fn consume_invocation<'s>(
    keys: &QueueKeys,
    leases: &[&crate::job::Lease],
    keep: usize,
) -> ScriptInvocation<'s> {
    let mut inv = invocation(&SCRIPTS.consume, keys);
    inv.arg(keep);
    for l in leases {
        inv.arg(l.job.as_str()).arg(&l.owner).arg(l.token);
    }
    inv
}

/// A `consume.lua` reply: one `[status, owner]` per lease, and the
/// number of dependency releases the queue owes other queues.
pub(crate) struct Consumed {
    pub replies: Vec<Reply>,
    pub outbox: i64,
}

fn consume_reply(reply: &Reply, leases: usize) -> Consumed {
    Consumed {
        replies: split_pairs(reply, leases),
        outbox: reply.int(1 + 2 * leases).unwrap_or(0),
    }
}

/// Twin of `consume.lua`: consumes `leases` (all of `keys`' queue, at most
/// [`MAX_CLAIM_COUNT`](crate::redis::MAX_CLAIM_COUNT)) in one call; `keep`
/// is the history count limit.
pub(crate) async fn consume(
    conn: &Connection,
    keys: &QueueKeys,
    leases: &[&crate::job::Lease],
    keep: usize,
) -> Result<Consumed> {
    let reply = run(conn, &consume_invocation(keys, leases, keep)).await?;
    Ok(consume_reply(&reply, leases.len()))
}

/// What abandon does with the job (see `lua/abandon.lua`).
pub(crate) enum AbandonMode<'a> {
    Release,
    Retry { delay: Duration, error: &'a str },
}

/// Twin of `abandon.lua`.
pub(crate) async fn abandon(
    conn: &Connection,
    keys: &QueueKeys,
    id: &str,
    who: &str,
    token: u64,
    mode: AbandonMode<'_>,
) -> Result<Reply> {
    let mut inv = invocation(&SCRIPTS.abandon, keys);
    inv.arg(id).arg(who).arg(token);
    match mode {
        AbandonMode::Release => inv.arg("release").arg(0).arg(""),
        AbandonMode::Retry { delay, error } => inv.arg("retry").arg(millis(delay)).arg(error),
    };
    inv.arg(&keys.notify);
    run(conn, &inv).await
}

/// Twin of `trash.lua`.
pub(crate) async fn trash(
    conn: &Connection,
    keys: &QueueKeys,
    id: &str,
    who: &str,
    token: u64,
    reason: &str,
) -> Result<Reply> {
    let mut inv = invocation(&SCRIPTS.trash, keys);
    inv.arg(id).arg(who).arg(token).arg(reason);
    run(conn, &inv).await
}

/// Twin of `reap.lua`.
pub(crate) async fn reap(conn: &Connection, keys: &QueueKeys) -> Result<Reply> {
    run(conn, &invocation(&SCRIPTS.reap, keys)).await
}

/// Twin of `index.lua`: `jobs` = (id, priority, sequence).
pub(crate) async fn index(
    conn: &Connection,
    keys: &QueueKeys,
    max_attempts: u32,
    jobs: &[(String, i32, i64)],
) -> Result<Reply> {
    let mut inv = invocation(&SCRIPTS.index, keys);
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
    let mut inv = invocation(&SCRIPTS.quarantine, keys);
    inv.arg(field).arg(bytes).arg(reason);
    run(conn, &inv).await
}

/// Runs `script` on `keys`' queue with `args` after the common ones (for
/// the operator verbs: cancel, priority, resolve, depend, retry, purge,
/// tag, track, recur_spawn).
pub(crate) async fn call<A: redis::ToRedisArgs>(
    conn: &Connection,
    script: &Script,
    keys: &QueueKeys,
    args: &[A],
) -> Result<Reply> {
    let mut inv = invocation(script, keys);
    for a in args {
        inv.arg(a);
    }
    run(conn, &inv).await
}
