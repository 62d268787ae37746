//! The floor of a post and of a hand-off on the taskflow layout, measured
//! in the same run as ours: scripts that do the least such a call needs,
//! so that one-by-one posts and pickup latency can be read against what
//! this machine allows, not only against the peers.
//!
//! - a *floor post* writes a valid taskflow listing (the client sends the
//!   posting's bytes around the sequence, with its `created_on` already
//!   in: ours takes it from the server's clock) after an `INCR` of the
//!   sequence, and adds the job to the ready index: no job hash, no
//!   events, no statistics, no hand-off;
//! - a *floor hand-off* does that with the lease instead of the index
//!   (`SET <id>.owned owner PX expiry NX` and the lease index), finds its
//!   worker in an idle hash (`HGETALL`) and `PUBLISH`es the id, the posting
//!   and the post's time on that worker's channel. The worker is a thread
//!   of this process with its own single-threaded runtime, as a worker's
//!   loop is, which reads when the job reached it. It runs no handler.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::bench::handler::{now_us, NAME};
use crate::codec::{details_of, posting_parts, OsloDateTime};
use crate::error::{Error, Result};
use crate::job::{JobId, Priority};
use crate::redis::{QueueKeys, RedisBoard};

/// `mp_uint` of `lua/lib/msgpack.lua` (the sequence as msgpack-python
/// packs it), taken from the module's text so both write the same bytes.
fn mp_uint() -> Result<&'static str> {
    crate::redis::lua::function("msgpack", "mp_uint")
        .ok_or_else(|| Error::invalid("lua/lib/msgpack.lua has no mp_uint to measure the floor with"))
}

/// `KEYS`: sequence, listings, ready index. `ARGV`: id, the posting up to
/// its sequence.
const POST: &str = r"local seq = redis.call('INCR', KEYS[1])
redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2] .. mp_uint(seq))
redis.call('ZADD', KEYS[3], seq, ARGV[1])
return seq";

/// `KEYS`: sequence, listings, lease index, idle workers, the job's owner
/// key. `ARGV`: id, the posting up to its sequence, expiry ms, the post's
/// time (µs). Takes the first idle worker's entry, as a hand-off does.
/// Returns 0 when no worker is idle.
const HAND_OFF: &str = r"local idle = redis.call('HGETALL', KEYS[4])
if #idle == 0 then return 0 end
redis.call('HDEL', KEYS[4], idle[1])
local seq = redis.call('INCR', KEYS[1])
local posting = ARGV[2] .. mp_uint(seq)
redis.call('HSETNX', KEYS[2], ARGV[1], posting)
redis.call('SET', KEYS[5], idle[1], 'PX', ARGV[3], 'NX')
local t = redis.call('TIME')
redis.call('ZADD', KEYS[3], t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[3]), ARGV[1])
redis.call('PUBLISH', idle[2], ARGV[4] .. ' ' .. ARGV[1] .. '\n' .. posting)
return 1";

/// The floor's lease, ms.
const EXPIRY_MS: u64 = 60_000;

/// The floor worker's name in the idle hash.
const WORKER: &str = "floor";

/// How long the floor's worker may take to subscribe, and to get each
/// hand-off.
const LISTEN_LIMIT: Duration = Duration::from_secs(10);

/// A fresh id and the posting ours would write, up to its sequence (its
/// `created_on` now, on this host's clock).
fn fresh() -> (JobId, Vec<u8>) {
    let id = JobId::random();
    let parts = posting_parts(
        id.as_str(),
        NAME,
        Priority::NORMAL,
        &details_of(&rmpv::Value::Nil),
        None,
    );
    let mut posting = parts.head;
    posting.extend(OsloDateTime::from_unix_micros(now_us() as i64).encode_ext());
    posting.extend(parts.tail);
    (id, posting)
}

/// The floor scripts, loaded on a board's server, writing under a scratch
/// queue's keys.
pub(crate) struct Floor<'b> {
    board: &'b RedisBoard,
    post: redis::Script,
    hand_off: redis::Script,
    keys: Arc<QueueKeys>,
}

impl<'b> Floor<'b> {
    /// Loads both scripts on `board`'s server; their keys are `queue`'s
    /// (dropped with the queue).
    pub(crate) async fn load(board: &'b RedisBoard, queue: &str) -> Result<Floor<'b>> {
        let uint = mp_uint()?;
        let post = redis::Script::new(&format!("{uint}{POST}"));
        let hand_off = redis::Script::new(&format!("{uint}{HAND_OFF}"));
        let mut con = board.connection();
        for script in [&post, &hand_off] {
            script.prepare_invoke().load_async(&mut con).await?;
        }
        Ok(Floor {
            board,
            post,
            hand_off,
            keys: board.keys(queue)?,
        })
    }

    /// The channel the floor's worker listens on.
    fn channel(&self) -> String {
        self.keys.handoff(WORKER)
    }

    /// Registers the floor's worker as idle (its channel in the idle hash).
    pub(crate) async fn register(&self) -> Result<()> {
        let cmd = redis::cmd("HSET")
            .arg(self.keys.idle())
            .arg(WORKER)
            .arg(self.channel())
            .clone();
        self.board.conn.query(&cmd).await
    }

    /// How long `n` floor posts take, one round trip each.
    pub(crate) async fn time_posts(&self, n: usize) -> Result<Duration> {
        let mut con = self.board.connection();
        let k = &self.keys;
        let start = Instant::now();
        for _ in 0..n {
            let (id, posting) = fresh();
            self.post
                .key(k.sequence())
                .key(k.listings())
                .key(k.ready())
                .arg(id.as_str())
                .arg(posting)
                .invoke_async::<i64>(&mut con)
                .await?;
        }
        Ok(start.elapsed())
    }

    /// Posts one job handed to the floor's worker; fails when it is not
    /// registered.
    pub(crate) async fn hand_off(&self) -> Result<()> {
        let posted = now_us();
        let (id, posting) = fresh();
        let k = &self.keys;
        let handed: i64 = self
            .hand_off
            .key(k.sequence())
            .key(k.listings())
            .key(k.leases())
            .key(k.idle())
            .key(k.owned(id.as_str()))
            .arg(id.as_str())
            .arg(posting)
            .arg(EXPIRY_MS)
            .arg(posted)
            .invoke_async(&mut self.board.connection())
            .await?;
        match handed {
            1 => Ok(()),
            _ => Err(Error::unavailable("the floor's worker is not registered")),
        }
    }
}

/// The floor's worker: a thread that registers in the floor's idle hash,
/// reads `expected` hand-offs and returns how long each took from its
/// post, µs.
pub(crate) struct Listener {
    waits: oneshot::Receiver<Result<Vec<u64>>>,
}

impl Listener {
    /// Starts the thread; once this returns it is subscribed and
    /// registered in `floor`'s idle hash (each hand-off takes the entry:
    /// [`Floor::register`] again after each, as a worker's claim does
    /// after its job).
    pub(crate) async fn start(floor: &Floor<'_>, expected: usize) -> Result<Listener> {
        let (board, channel) = (floor.board.clone(), floor.channel());
        let (ready_tx, ready) = oneshot::channel();
        let (waits_tx, mut waits) = oneshot::channel();
        std::thread::Builder::new()
            .name("jobworker-bench-floor".into())
            .spawn(move || drop(waits_tx.send(listen(board, &channel, expected, ready_tx))))
            .map_err(|e| Error::io("cannot start the floor's worker", e))?;
        if ready.await.is_err() {
            // It ended before it subscribed: its result says why.
            return Err(match (&mut waits).await {
                Ok(Err(e)) => e,
                _ => Error::unavailable("the floor's worker ended"),
            });
        }
        floor.register().await?;
        Ok(Listener { waits })
    }

    /// The waits, µs, one per hand-off, once all came (the thread gives up
    /// when one does not come within [`LISTEN_LIMIT`]).
    pub(crate) async fn waits(self) -> Result<Vec<u64>> {
        self.waits
            .await
            .map_err(|_| Error::unavailable("the floor's worker ended"))?
    }
}

/// The floor worker's thread: subscribes to `channel` (then says so on
/// `ready`) and reads `expected` hand-offs on a runtime of its own.
fn listen(board: RedisBoard, channel: &str, expected: usize, ready: oneshot::Sender<()>) -> Result<Vec<u64>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the floor's worker", e))?;
    runtime.block_on(async move {
        let subscribed = async {
            let mut sub = board.conn.pubsub().await?;
            sub.subscribe(channel).await?;
            Ok::<_, Error>(sub)
        };
        let mut sub = tokio::time::timeout(LISTEN_LIMIT, subscribed)
            .await
            .map_err(|_| Error::unavailable("the floor's worker did not subscribe"))??;
        let _ = ready.send(());
        let mut waits = Vec::with_capacity(expected);
        while waits.len() < expected {
            let msg = tokio::time::timeout(LISTEN_LIMIT, sub.next())
                .await
                .ok()
                .flatten()
                .ok_or_else(|| Error::unavailable("the floor's worker got no hand-off"))?;
            let picked = now_us();
            let posted = sent_at(msg.get_payload_bytes())
                .ok_or_else(|| Error::unavailable("the floor's worker got a message it cannot read"))?;
            waits.push(picked.saturating_sub(posted));
        }
        Ok(waits)
    })
}

/// The post's time at the head of a floor hand-off's message.
fn sent_at(message: &[u8]) -> Option<u64> {
    let head = message.split(|&b| b == b' ').next()?;
    std::str::from_utf8(head).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{sent_at, Floor};
    use crate::codec::{decode_posting, encode_posting};
    use crate::embedded::{RedisServer, ServerOptions};
    use crate::redis::RedisBoard;

    /// The floor's listings are taskflow's bytes, the sequence packed as
    /// msgpack-python packs it at every width.
    #[tokio::test]
    async fn the_floor_post_writes_taskflow_listings_byte_for_byte() {
        let server = RedisServer::start(ServerOptions::default()).unwrap();
        let board = RedisBoard::connect(&server.url()).await.unwrap();
        let floor = Floor::load(&board, "floor-test").await.unwrap();
        let keys = board.keys("floor-test").unwrap();
        let mut con = board.connection();
        for before in [126i64, 254, 65_534, 4_294_967_294] {
            let set = redis::cmd("SET").arg(keys.sequence()).arg(before).clone();
            set.query_async::<()>(&mut con).await.unwrap();
            floor.time_posts(3).await.unwrap();
        }
        let listings: HashMap<String, Vec<u8>> = redis::cmd("HGETALL")
            .arg(keys.listings())
            .query_async(&mut con)
            .await
            .unwrap();
        let mut sequences = Vec::new();
        for (id, bytes) in listings {
            let posting = decode_posting(&bytes).unwrap();
            assert_eq!(posting.uuid, id);
            assert_eq!(encode_posting(&posting), bytes, "{id}");
            sequences.push(posting.sequence.unwrap());
        }
        sequences.sort_unstable();
        let want: Vec<i64> = [127, 255, 65_535, 4_294_967_295]
            .iter()
            .flat_map(|&first| first..first + 3)
            .collect();
        assert_eq!(sequences, want);
    }

    #[test]
    fn a_hand_off_message_starts_with_the_time_of_its_post() {
        assert_eq!(
            sent_at(b"1764500000123456 id\n\x86posting"),
            Some(1_764_500_000_123_456)
        );
        assert_eq!(sent_at(b"not-a-time id\nposting"), None);
        assert_eq!(sent_at(b""), None);
    }
}
