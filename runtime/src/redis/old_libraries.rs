//! The Functions libraries of older builds. Each build loads its own
//! library (`jobworker_<16 hex>`, about 320 KB of server memory), and a
//! library stays on the server until it is deleted. A board notes in
//! [`LOADS`] when it loaded its library (at connect, and when it loads it
//! again after "Function not found"); at connect it deletes the noted
//! libraries other than the [`KEEP`] noted last, once noted more than
//! [`MIN_AGE_MS`] ago. A build still running whose library was deleted
//! loads it again at its next call (that call did not run) and is noted
//! anew. The age keeps the libraries of builds that run side by side
//! (workers, the web app, an application's posters, operators' CLIs of
//! other versions): they are not deleted in turn at each other's
//! connects, each deletion costing the next call a load. Libraries never
//! noted (loaded by a build before this one, or noted in another database:
//! libraries are global to the server, the set is not) are left alone.
//! Best effort: a server that refuses a step (an ACL, `maxmemory`, a
//! durability short of replicas) keeps its libraries.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::Result;
use crate::redis::connect::Connection;
use crate::redis::lua::library::PREFIX;
use crate::redis::scripts::LIBRARY;

/// The sorted set of our libraries, scored by when a board last loaded
/// each (ms since the epoch, the board's clock). Not under a queue prefix:
/// libraries are shared by every prefix on the server.
pub(crate) const LOADS: &str = "jobworker:libraries";

/// How many noted libraries stay: the ones noted last (a rolling upgrade
/// runs two builds at once).
pub(crate) const KEEP: isize = 3;

/// How long ago a library beyond the [`KEEP`] noted last must have been
/// noted to be deleted: a day, in ms.
pub(crate) const MIN_AGE_MS: u64 = 24 * 3_600_000;

/// Notes that this build's library was loaded now (best effort).
pub(crate) async fn note(conn: &Connection) {
    if let Err(e) = try_note(conn).await {
        tracing::debug!(error = %e, "the functions library's load not noted");
    }
}

async fn try_note(conn: &Connection) -> Result<()> {
    conn.query(redis::cmd("ZADD").arg(LOADS).arg(now_ms()).arg(&LIBRARY.name))
        .await
}

/// Now, in ms since the epoch (the board's clock).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Notes this build's library and deletes the noted libraries other than
/// the [`KEEP`] noted last that are older than [`MIN_AGE_MS`], logging a
/// refusal at debug.
pub(crate) async fn prune(conn: &Connection) {
    let pruned = async {
        try_note(conn).await?;
        delete_old(conn).await
    };
    match pruned.await {
        Ok(0) => {}
        Ok(n) => tracing::info!(deleted = n, "deleted the functions libraries of older builds"),
        Err(e) => tracing::debug!(error = %e, "old functions libraries not deleted"),
    }
}

/// Deletes the noted libraries other than the [`KEEP`] noted last that
/// were noted more than [`MIN_AGE_MS`] ago (never this build's); the count
/// deleted.
async fn delete_old(conn: &Connection) -> Result<usize> {
    let beyond: Vec<(String, f64)> = conn
        .query(
            redis::cmd("ZRANGE")
                .arg(LOADS)
                .arg(0)
                .arg(-KEEP - 1)
                .arg("WITHSCORES"),
        )
        .await?;
    let before = now_ms().saturating_sub(MIN_AGE_MS) as f64;
    let mut deleted = 0;
    for (name, _) in beyond
        .iter()
        .filter(|(n, at)| *at < before && n.starts_with(PREFIX) && *n != LIBRARY.name)
    {
        match conn
            .query::<()>(redis::cmd("FUNCTION").arg("DELETE").arg(name))
            .await
        {
            Ok(()) => deleted += 1,
            // Deleted already (by another board, or by hand).
            Err(e) if e.to_string().contains("Library not found") => {}
            Err(e) => return Err(e),
        }
        conn.query::<()>(redis::cmd("ZREM").arg(LOADS).arg(name)).await?;
    }
    Ok(deleted)
}
