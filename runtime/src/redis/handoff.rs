//! Hand-offs: jobs a post took the lease on for an idle worker and sent on
//! its channel (`lua/lib/handoff.lua`), read back into claimed jobs; and
//! ending a worker's registrations.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::job::{Abandon, Claimed};
use crate::redis::board::RedisBoard;
use crate::redis::claim::LeaseFields;
use crate::redis::keys::QueueKeys;

/// The start of this process's clock for hand-offs.
fn clock_start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

/// This process's clock for hand-offs, in ms: a claim that registers
/// sends it, the hand-off echoes it to the same process (monotonic; each
/// process starts its own at its first use).
pub(crate) fn clock_ms() -> u64 {
    clock_start().elapsed().as_millis() as u64
}

/// One hand-off message: `'<token> <attempts> <max> <prio> <lease ms>
/// <tag> <id length>\n'`, the job id, then its posting.
struct Message<'a> {
    id: String,
    posting: &'a [u8],
    fields: LeaseFields,
    /// The lease's length.
    lease_ms: u64,
    /// [`clock_ms`] when the registering claim was sent.
    tag: u64,
}

impl Message<'_> {
    /// Whether the lease surely has half its time left: it began after
    /// the claim that registered was sent, `tag` by this clock (a tag
    /// ahead of the clock is not this process's: not trusted).
    fn fresh(&self, now_ms: u64) -> bool {
        self.tag <= now_ms && now_ms - self.tag < self.lease_ms / 2
    }
}

fn parse(bytes: &[u8]) -> Option<Message<'_>> {
    let end = bytes.iter().position(|&b| b == b'\n')?;
    let head = std::str::from_utf8(&bytes[..end]).ok()?;
    let n: Vec<i64> = head.split(' ').map(str::parse).collect::<Result<_, _>>().ok()?;
    let [token, attempts, max, prio, lease_ms, tag, id_len] = n[..] else {
        return None;
    };
    let rest = &bytes[end + 1..];
    let id_len = usize::try_from(id_len).ok().filter(|&l| l <= rest.len())?;
    Some(Message {
        id: String::from_utf8(rest[..id_len].to_vec()).ok()?,
        posting: &rest[id_len..],
        fields: LeaseFields {
            token: u64::try_from(token).ok()?,
            attempts: u32::try_from(attempts).ok()?,
            max_attempts: u32::try_from(max).ok()?,
            priority: i32::try_from(prio).ok()?,
            suspect: false,
        },
        lease_ms: u64::try_from(lease_ms).ok()?,
        tag: u64::try_from(tag).ok()?,
    })
}

impl RedisBoard {
    /// The job a hand-off message on `keys`' queue carries for `who`;
    /// `None` when its posting cannot be decoded (it was quarantined) or
    /// it was read too late to be sure of its lease (then it is given
    /// back; were the lease over, someone else may be running the job).
    pub(super) async fn handed(&self, keys: &QueueKeys, who: &str, bytes: &[u8]) -> Result<Option<Claimed>> {
        let m = parse(bytes).ok_or_else(|| {
            Error::codec(format!(
                "queue {}: unreadable hand-off message ({} bytes)",
                keys.queue,
                bytes.len()
            ))
        })?;
        let fresh = m.fresh(clock_ms());
        let Some(job) = self.claimed(keys, who, m.id, m.posting, m.fields).await? else {
            return Ok(None);
        };
        if fresh {
            let registered = (clock_start() + Duration::from_millis(m.tag)).min(Instant::now());
            let lease = job.lease.began_after(registered);
            return Ok(Some(Claimed { lease, ..job }));
        }
        let id = job.lease.job().clone();
        match self.abandon(&job.lease, Abandon::Release).await {
            Ok(_) => {
                tracing::info!(job = %id, queue = %keys.queue, "hand-off read too late to trust its lease; given back")
            }
            Err(e) => {
                tracing::info!(job = %id, queue = %keys.queue, error = %e, "hand-off read after its lease; left to its lease")
            }
        }
        Ok(None)
    }

    /// Drops `who`'s hand-off registrations on `keys`' queues: no post
    /// hands it a job after this returns. One call per queue (each queue
    /// is its own cluster slot).
    pub(super) async fn unregister_idle(&self, keys: &[Arc<QueueKeys>], who: &str) -> Result<()> {
        for k in keys {
            self.conn
                .query::<()>(redis::cmd("HDEL").arg(k.idle()).arg(who))
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reads_back() {
        let m = parse(b"7 2 5 -3 30000 1200 4\nabcd\x82posting\nwith newline").unwrap();
        assert_eq!(m.id, "abcd");
        assert_eq!(m.posting, b"\x82posting\nwith newline");
        assert_eq!((m.lease_ms, m.tag), (30000, 1200));
        assert!(m.fresh(1200) && m.fresh(16199) && !m.fresh(16200) && !m.fresh(90000));
        assert!(!m.fresh(1199), "a tag ahead of this clock is not trusted");
        let f = m.fields;
        assert_eq!(
            (f.token, f.attempts, f.max_attempts, f.priority, f.suspect),
            (7, 2, 5, -3, false)
        );
    }

    #[test]
    fn broken_messages_are_refused() {
        for bad in [
            &b""[..],
            b"7 2 5 -3 1 1\nabcd",
            b"7 2 5 -3 1 1 9\nabcd",
            b"x 2 5 -3 1 1 4\nabcd",
            b"-7 2 5 -3 1 1 4\nabcd",
            b"7 2 5 -3 -1 1 4\nabcd",
            b"7 2 5 -3 1 1 4 abcd",
        ] {
            assert!(parse(bad).is_none(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
