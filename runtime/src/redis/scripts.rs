//! The Lua scripts (`lua/*.lua`): the registry that loads them and the
//! helpers their Rust twins share. Each verb's twin, which builds the
//! invocation with the queue keys and reads the reply, lives in the verb's
//! own file (`post.rs` for `post.lua`, …); the operator verbs go through
//! [`call`].

use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

use redis::Script;

use crate::error::Result;
use crate::job::Lease;
use crate::redis::connect::{retry_once, Connection};
use crate::redis::durability;
use crate::redis::invocation::Invocation;
use crate::redis::keys::QueueKeys;
use crate::redis::lua;
use crate::redis::lua::library::Library;
use crate::redis::old_libraries;
use crate::redis::reply::Reply;

/// A verb's script and the queue keys it takes (indexes into
/// `QueueKeys::keys`, in the order of its header's `-- KEYS:` line).
pub(crate) struct LuaScript {
    /// The verb (its function in the library).
    pub verb: &'static str,
    /// The verb's file.
    text: &'static str,
    /// The composed script for one server (see [`lua::compose_for`]), made
    /// when a board without the library first needs it.
    plain: OnceLock<Script>,
    /// The composed script for a cluster (sharded channels), made when a
    /// cluster board first needs it.
    cluster: OnceLock<Script>,
    /// The queue keys it takes, in KEYS order.
    pub keys: Vec<usize>,
}

impl LuaScript {
    /// The script for a board on a cluster or not.
    pub(super) fn script(&self, cluster: bool) -> &Script {
        let composed = if cluster { &self.cluster } else { &self.plain };
        composed.get_or_init(|| Script::new(&lua::compose_for(self.text, cluster)))
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
    pub consume_then_claim: LuaScript,
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
    pub(super) fn all(&self) -> [&LuaScript; 22] {
        [
            &self.post,
            &self.claim,
            &self.claim_job,
            &self.extend,
            &self.consume,
            &self.consume_then_claim,
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

fn script(verb: &'static str) -> LuaScript {
    let text = lua::verb(verb).unwrap_or_else(|| panic!("no lua/{verb}.lua"));
    LuaScript {
        verb,
        text,
        plain: OnceLock::new(),
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
    consume_then_claim: script("consume_then_claim"),
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

/// The board's Functions library, built once per process when a board
/// uses it.
pub(crate) static LIBRARY: LazyLock<Library> = LazyLock::new(Library::new);

/// Loads the board's Lua into the server: the Functions library, or every
/// script into the script cache (EVALSHA afterwards). The scripts go one
/// command at a time: a single pipeline of all of them is a half-megabyte
/// buffer that the allocator keeps in every process, and on a cluster a
/// lone SCRIPT LOAD reaches every master (a pipeline goes to one node).
pub(crate) async fn load_all(conn: &Connection) -> Result<()> {
    if conn.functions {
        return Ok(reload_library(conn).await?);
    }
    for s in SCRIPTS.all() {
        load_script(conn, s.script(conn.is_cluster())).await?;
    }
    Ok(())
}

/// SCRIPT LOAD of one script (on a cluster, into every master).
pub(crate) async fn load_script(conn: &Connection, script: &Script) -> redis::RedisResult<()> {
    script.load_async(&mut conn.link.clone()).await.map(drop)
}

/// FUNCTION LOAD of the library; one already there (another worker of
/// this build loaded it) is fine, and so is one the master loaded but too
/// few replicas acknowledged (a durability): a master that lost it in a
/// failover answers "Function not found", and it is loaded again. A full
/// server (past `maxmemory`, no eviction) refuses any FUNCTION LOAD: the
/// library is then looked for, and used if another worker loaded it.
/// True when the server took the load in full (not short of replicas,
/// not full), so that it can be noted (`old_libraries.rs`).
pub(crate) async fn load_library(conn: &Connection) -> redis::RedisResult<bool> {
    let mut load = redis::cmd("FUNCTION");
    load.arg("LOAD").arg(&LIBRARY.text);
    match load.query_async::<String>(&mut conn.link.clone()).await {
        Ok(_) => Ok(true),
        Err(e) if e.code() == Some("OOM") => match library_loaded(conn).await {
            Ok(true) => Ok(false),
            _ => Err(e),
        },
        Err(e) if durability::is_short(&e) => Ok(false),
        Err(e) if e.detail().is_some_and(|d| d.contains("already exists")) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Loads the library again (the server answered "Function not found":
/// a restart, a flush, or another build deleted it) and notes the load.
pub(crate) async fn reload_library(conn: &Connection) -> redis::RedisResult<()> {
    if load_library(conn).await? {
        old_libraries::note(conn).await;
    }
    Ok(())
}

/// Whether the server has this build's library (FUNCTION LIST reads, so a
/// full server answers it; on a cluster, the node the client picks).
async fn library_loaded(conn: &Connection) -> redis::RedisResult<bool> {
    let mut list = redis::cmd("FUNCTION");
    list.arg("LIST").arg("LIBRARYNAME").arg(&LIBRARY.name);
    let found: Vec<redis::Value> = list.query_async(&mut conn.link.clone()).await?;
    Ok(!found.is_empty())
}

/// Loads the board's Lua at connect, and deletes the libraries of older
/// builds (`old_libraries.rs`). A server that refuses the library (an ACL
/// without FUNCTION, a managed service that disables it) gets the scripts
/// instead, with a warning.
pub(crate) async fn prepare(conn: &mut Connection) -> Result<()> {
    if conn.functions {
        match load_library(conn).await {
            Ok(in_full) => {
                if in_full {
                    old_libraries::prune(conn).await;
                }
                return Ok(());
            }
            Err(e) if e.is_io_error() || e.is_connection_dropped() => return Err(e.into()),
            Err(e) => {
                tracing::warn!(error = %e, "redis refused the functions library; using EVALSHA scripts");
                conn.functions = false;
            }
        }
    }
    load_all(conn).await
}

/// Starts a lease verb's invocation (extend, abandon, trash): the queue
/// keys, then the lease's job, owner and fencing token.
pub(crate) fn lease_invocation<'k>(
    script: &'static LuaScript,
    keys: &'k QueueKeys,
    lease: &Lease,
) -> Invocation<'k> {
    let mut inv = Invocation::new(script, keys);
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
    inv: &Invocation<'_>,
) -> Result<Reply> {
    run(conn, inv)
        .await?
        .accept(keys, lease.job().as_str(), lease.owner())
}

/// Runs an invocation, retried once after a dropped connection.
pub(crate) async fn run(conn: &Connection, inv: &Invocation<'_>) -> Result<Reply> {
    let value = retry_once(|| inv.invoke(conn)).await?;
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

/// Runs `script` on `keys`' queue with `args` after the common ones (for
/// the operator verbs: cancel, priority, resolve, depend, retry, purge,
/// tag, track, recur_spawn).
pub(crate) async fn call<A: redis::ToRedisArgs>(
    conn: &Connection,
    script: &'static LuaScript,
    keys: &QueueKeys,
    args: &[A],
) -> Result<Reply> {
    let mut inv = Invocation::new(script, keys);
    for a in args {
        inv.arg(a);
    }
    run(conn, &inv).await
}
