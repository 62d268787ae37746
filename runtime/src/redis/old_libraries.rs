//! The Functions libraries of older builds. Each build loads its own
//! library (`jobworker_<16 hex>`, about 320 KB of server memory), and a
//! library stays on the server until it is deleted. At connect, a board
//! notes in [`LOADS`] when its library was loaded, and deletes our
//! libraries other than the [`KEEP`] loaded most recently. A build still
//! running whose library was deleted loads it again at its next call (its
//! "Function not found" call did not run), and its workers' next connects
//! make it recent again. Best effort: a server that refuses any step (an
//! ACL, `maxmemory`, a durability short of replicas) keeps its libraries.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::Result;
use crate::redis::connect::Connection;
use crate::redis::lua::library::PREFIX;
use crate::redis::scripts::LIBRARY;

/// The server-wide sorted set of our libraries, scored by when a board
/// last connected with each (ms since the epoch). Libraries are global to
/// a server, so this key has no queue prefix.
pub(crate) const LOADS: &str = "jobworker:libraries";

/// How many of our libraries stay: this build's and the ones loaded most
/// recently before it (a rolling upgrade runs two builds at once).
pub(crate) const KEEP: isize = 3;

/// Deletes the libraries of older builds, logging a refusal at debug.
pub(crate) async fn prune(conn: &Connection) {
    match delete_old(conn).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(deleted = n, "deleted the functions libraries of older builds"),
        Err(e) => tracing::debug!(error = %e, "old functions libraries not deleted"),
    }
}

/// Notes this build's load and deletes our libraries outside the
/// [`KEEP`] most recent; the count deleted.
async fn delete_old(conn: &Connection) -> Result<usize> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    conn.query::<()>(redis::cmd("ZADD").arg(LOADS).arg(now).arg(&LIBRARY.name))
        .await?;
    let recent: Vec<String> = conn
        .query(redis::cmd("ZRANGE").arg(LOADS).arg(0).arg(KEEP - 1).arg("REV"))
        .await?;
    let listed: Vec<HashMap<String, redis::Value>> = conn
        .query(
            redis::cmd("FUNCTION")
                .arg("LIST")
                .arg("LIBRARYNAME")
                .arg(format!("{PREFIX}*")),
        )
        .await?;
    let old = listed
        .iter()
        .filter_map(|library| library.get("library_name"))
        .filter_map(|name| redis::from_redis_value_ref::<String>(name).ok())
        .filter(|name| name.starts_with(PREFIX) && !recent.contains(name));
    let mut deleted = 0;
    for name in old {
        match conn
            .query::<()>(redis::cmd("FUNCTION").arg("DELETE").arg(&name))
            .await
        {
            Ok(()) => deleted += 1,
            // Another board deleted it first.
            Err(e) if e.to_string().contains("Library not found") => {}
            Err(e) => return Err(e),
        }
    }
    conn.query::<()>(redis::cmd("ZREMRANGEBYRANK").arg(LOADS).arg(0).arg(-KEEP - 1))
        .await?;
    Ok(deleted)
}
