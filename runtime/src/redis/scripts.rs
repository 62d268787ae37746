//! The Lua scripts (`lua/*.lua`): the registry that loads them and the
//! helpers their Rust twins share. Each verb's twin, which builds the
//! invocation with the queue keys and reads the reply, lives in the verb's
//! own file (`post.rs` for `post.lua`, …); the operator verbs go through
//! [`call`].

use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

use redis::{Script, ScriptInvocation};

use crate::error::Result;
use crate::job::Lease;
use crate::redis::connect::{retry_once, Connection};
use crate::redis::keys::QueueKeys;
use crate::redis::lua;
use crate::redis::reply::Reply;

/// A verb's script and the queue keys it takes (indexes into
/// `QueueKeys::keys`, in the order of its header's `-- KEYS:` line).
pub(crate) struct LuaScript {
    /// The verb's file.
    text: &'static str,
    /// The composed script for one server (see [`lua::compose_for`]).
    plain: Script,
    /// The composed script for a cluster (sharded channels), made when a
    /// cluster board first needs it.
    cluster: OnceLock<Script>,
    /// The queue keys it takes, in KEYS order.
    pub keys: Vec<usize>,
}

impl LuaScript {
    /// The script for a board on a cluster or not.
    pub(super) fn script(&self, cluster: bool) -> &Script {
        if !cluster {
            return &self.plain;
        }
        self.cluster
            .get_or_init(|| Script::new(&lua::compose_for(self.text, true)))
    }
}

/// Every verb's script, each sent as the shared modules it includes
/// followed by its file (see [`lua`]).
pub(crate) struct Scripts {
    pub post: LuaScript,
    pub claim: LuaScript,
    pub claim_job: LuaScript,
    pub extend: LuaScript,
    pub consume: LuaScript,
    pub abandon: LuaScript,
    pub trash: LuaScript,
    pub reap: LuaScript,
    pub index: LuaScript,
    pub quarantine: LuaScript,
    pub recover_owner: LuaScript,
    pub cancel: LuaScript,
    pub priority: LuaScript,
    pub resolve: LuaScript,
    pub depend: LuaScript,
    pub retry: LuaScript,
    pub purge: LuaScript,
    pub tag: LuaScript,
    pub track: LuaScript,
    pub recur_spawn: LuaScript,
    pub overview: LuaScript,
}

impl Scripts {
    /// All scripts, to load them once at connect.
    pub(super) fn all(&self) -> [&LuaScript; 21] {
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
            &self.overview,
        ]
    }
}

fn script(verb: &str) -> LuaScript {
    let text = lua::verb(verb).unwrap_or_else(|| panic!("no lua/{verb}.lua"));
    LuaScript {
        text,
        plain: Script::new(&lua::compose_for(text, false)),
        cluster: OnceLock::new(),
        keys: lua::keys(text),
    }
}

/// The scripts, built once per process.
pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    post: script("post"),
    claim: script("claim"),
    claim_job: script("claim_job"),
    extend: script("extend"),
    consume: script("consume"),
    abandon: script("abandon"),
    trash: script("trash"),
    reap: script("reap"),
    index: script("index"),
    quarantine: script("quarantine"),
    recover_owner: script("recover_owner"),
    cancel: script("cancel"),
    priority: script("priority"),
    resolve: script("resolve"),
    depend: script("depend"),
    retry: script("retry"),
    purge: script("purge"),
    tag: script("tag"),
    track: script("track"),
    recur_spawn: script("recur_spawn"),
    overview: script("overview"),
});

/// Loads every script into the server's cache (EVALSHA afterwards). One
/// at a time: a single pipeline of all of them is a half-megabyte buffer
/// that the allocator keeps in every process.
pub(crate) async fn load_all(conn: &Connection) -> Result<()> {
    for s in SCRIPTS.all() {
        let mut pipe = redis::pipe();
        pipe.load_script(s.script(conn.is_cluster()));
        conn.query_pipe::<Vec<String>>(&pipe).await?;
    }
    Ok(())
}

/// Starts an invocation of `script` with the queue keys it takes and the
/// `NS:` prefix (on a cluster: the cluster's script, and the queue's fence
/// key after its keys).
pub(crate) fn invocation<'a>(script: &'a LuaScript, keys: &QueueKeys) -> ScriptInvocation<'a> {
    let mut inv = script.script(keys.sharded).prepare_invoke();
    for k in &script.keys {
        inv.key(&keys.keys[*k]);
    }
    if keys.sharded {
        inv.key(keys.fence());
    }
    inv.arg(keys.prefix()).arg(&keys.queue).arg(&keys.events);
    inv
}

/// Starts an invocation of a lease verb's script (extend, abandon,
/// trash): the queue keys, then the lease's job, owner and fencing token.
pub(crate) fn lease_invocation<'a>(
    script: &'a LuaScript,
    keys: &QueueKeys,
    lease: &Lease,
) -> ScriptInvocation<'a> {
    let mut inv = invocation(script, keys);
    inv.arg(lease.job().as_str())
        .arg(lease.owner())
        .arg(lease.token());
    inv
}

/// Runs a lease verb's invocation and accepts its reply for `lease` (a
/// stale lease is refused with `is_not_owner`).
pub(crate) async fn run_on_lease(
    conn: &Connection,
    keys: &QueueKeys,
    lease: &Lease,
    inv: &ScriptInvocation<'_>,
) -> Result<Reply> {
    run(conn, inv)
        .await?
        .accept(keys, lease.job().as_str(), lease.owner())
}

/// Runs an invocation, retried once after a dropped connection.
pub(crate) async fn run(conn: &Connection, inv: &ScriptInvocation<'_>) -> Result<Reply> {
    let value = retry_once(|| {
        let mut con = conn.link.clone();
        async move { inv.invoke_async::<redis::Value>(&mut con).await }
    })
    .await?;
    Reply::from_value(value)
}

/// A duration as whole milliseconds, the unit the scripts take.
pub(crate) fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// One `[status, value]` reply per job from `{'ok', status, value, …}`
/// (a trailing value, like consume's outbox count, is ignored).
pub(crate) fn split_pairs(reply: &Reply, jobs: usize) -> Vec<Reply> {
    (0..jobs)
        .map(|k| {
            Reply(vec![
                reply.0.get(1 + 2 * k).cloned().unwrap_or_default(),
                reply.0.get(2 + 2 * k).cloned().unwrap_or_default(),
            ])
        })
        .collect()
}

/// The server lost the script (restart, SCRIPT FLUSH).
pub(crate) fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// Runs `script` on `keys`' queue with `args` after the common ones (for
/// the operator verbs: cancel, priority, resolve, depend, retry, purge,
/// tag, track, recur_spawn).
pub(crate) async fn call<A: redis::ToRedisArgs>(
    conn: &Connection,
    script: &LuaScript,
    keys: &QueueKeys,
    args: &[A],
) -> Result<Reply> {
    let mut inv = invocation(script, keys);
    for a in args {
        inv.arg(a);
    }
    run(conn, &inv).await
}
