//! The floor: the least Lua a leased job needs on the taskflow layout.
//!
//! - `post` (a batch per call): `INCR NS:sequence`, `HSETNX NS:listings id
//!   <posting .. sequence>` (the client sends taskflow's msgpack posting
//!   without its last entry; the script appends `sequence`), `ZADD` the
//!   ready index by sequence.
//! - `claim` (k jobs per call): `ZPOPMIN` k from the ready index, `TIME`,
//!   per job `SET NS:<id>.owned owner PX expiry NX`, one `ZADD` of the
//!   lease index and one `HMGET` of the postings (the worker needs them to
//!   run the jobs).
//! - `consume` (a batch per call): one `MGET` of the owner keys (the owner
//!   check), then for the jobs still held one `DEL` of their `.owned` and
//!   `.last_modified`, one `HDEL` of the listings, one `ZREM` of the lease
//!   index.

use redis::aio::MultiplexedConnection;
use redis::Value;

/// `post`: KEYS listings, sequence, ready; ARGV pairs (id, posting head).
/// Returns how many were posted. The sequence is packed by the library's
/// own `mp_uint` (`lua/lib/msgpack.lua`), put in front of this.
const POST: &str = r#"
local n = 0
for i = 1, #ARGV, 2 do
  local seq = redis.call('INCR', KEYS[2])
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1] .. '\168sequence' .. mp_uint(seq)) == 1 then
    redis.call('ZADD', KEYS[3], seq, ARGV[i])
    n = n + 1
  end
end
return n
"#;

/// `claim`: KEYS listings, ready, leases; ARGV NS prefix, owner, expiry
/// ms, count. Returns id, posting, id, posting, …
pub const CLAIM: &str = r#"
local ns, who, ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
local popped = redis.call('ZPOPMIN', KEYS[2], tonumber(ARGV[4]))
if #popped == 0 then return {} end
local t = redis.call('TIME')
local deadline = t[1] * 1000 + math.floor(t[2] / 1000) + ms
local ids, leases = {}, {}
for i = 1, #popped, 2 do
  local id = popped[i]
  if redis.call('SET', ns .. id .. '.owned', who, 'PX', ms, 'NX') then
    ids[#ids + 1] = id
    leases[#leases + 1] = deadline
    leases[#leases + 1] = id
  end
end
if #ids == 0 then return {} end
redis.call('ZADD', KEYS[3], unpack(leases))
local postings = redis.call('HMGET', KEYS[1], unpack(ids))
local out = {}
for i, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = postings[i]
end
return out
"#;

/// `consume`: KEYS listings, leases; ARGV NS prefix, owner, ids. Returns
/// how many were consumed (the others were not held by the owner).
pub const CONSUME: &str = r#"
local ns, who = ARGV[1], ARGV[2]
local owned = {}
for i = 3, #ARGV do owned[#owned + 1] = ns .. ARGV[i] .. '.owned' end
local holders = redis.call('MGET', unpack(owned))
local ids, dels = {}, {}
for i, holder in ipairs(holders) do
  if holder == who then
    local id = ARGV[i + 2]
    ids[#ids + 1] = id
    dels[#dels + 1] = owned[i]
    dels[#dels + 1] = ns .. id .. '.last_modified'
  end
end
if #ids > 0 then
  redis.call('DEL', unpack(dels))
  redis.call('HDEL', KEYS[1], unpack(ids))
  redis.call('ZREM', KEYS[2], unpack(ids))
end
return #ids
"#;

/// `POST` with the library's `mp_uint` in front.
fn post_script() -> String {
    let uint =
        jobworker::redis::lua::function("msgpack", "mp_uint").expect("lua/lib/msgpack.lua has mp_uint");
    format!("{uint}{POST}")
}

/// The three scripts, loaded.
pub struct Floor {
    post: String,
    claim: String,
    consume: String,
}

async fn load(con: &mut MultiplexedConnection, text: &str) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(text)
        .query_async(con)
        .await
        .expect("SCRIPT LOAD of a floor script")
}

/// One queue's keys of the floor.
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// The keys of namespace `floor:{<queue>}`.
    pub fn new(queue: &str) -> Keys {
        Keys {
            prefix: format!("floor:{{{queue}}}:"),
        }
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }
}

impl Floor {
    /// Loads the scripts (SCRIPT LOAD).
    pub async fn load(con: &mut MultiplexedConnection) -> Floor {
        Floor {
            post: load(con, &post_script()).await,
            claim: load(con, CLAIM).await,
            consume: load(con, CONSUME).await,
        }
    }

    /// Posts `jobs` (id, posting head), `batch` per call, one pipeline per
    /// `chunk` jobs. Panics unless every job was posted.
    pub async fn post(
        &self,
        con: &mut MultiplexedConnection,
        keys: &Keys,
        jobs: &[(String, Vec<u8>)],
        batch: usize,
        chunk: usize,
    ) {
        for part in jobs.chunks(chunk) {
            let mut pipe = redis::pipe();
            for calls in part.chunks(batch) {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(&self.post)
                    .arg(3)
                    .arg(keys.key("listings"))
                    .arg(keys.key("sequence"))
                    .arg(keys.key("jw.ready"));
                for (id, head) in calls {
                    cmd.arg(id).arg(head);
                }
                pipe.add_command(cmd);
            }
            let posted: Vec<usize> = pipe.query_async(con).await.expect("floor post");
            assert_eq!(posted.iter().sum::<usize>(), part.len(), "floor post");
        }
    }

    /// Claims up to `count` jobs for `who`: their ids (each with a posting).
    pub async fn claim(
        &self,
        con: &mut MultiplexedConnection,
        keys: &Keys,
        who: &str,
        count: usize,
    ) -> Vec<String> {
        let reply: Vec<Value> = redis::cmd("EVALSHA")
            .arg(&self.claim)
            .arg(3)
            .arg(keys.key("listings"))
            .arg(keys.key("jw.ready"))
            .arg(keys.key("jw.leases"))
            .arg(&keys.prefix)
            .arg(who)
            .arg(30_000)
            .arg(count)
            .query_async(con)
            .await
            .expect("floor claim");
        reply
            .chunks(2)
            .map(|pair| match pair {
                [Value::BulkString(id), Value::BulkString(_posting)] => {
                    String::from_utf8_lossy(id).into_owned()
                }
                other => panic!("floor claim: a job without its posting: {other:?}"),
            })
            .collect()
    }

    /// Consumes `ids` held by `who`; panics unless all were.
    pub async fn consume(&self, con: &mut MultiplexedConnection, keys: &Keys, who: &str, ids: &[String]) {
        let consumed: usize = redis::cmd("EVALSHA")
            .arg(&self.consume)
            .arg(2)
            .arg(keys.key("listings"))
            .arg(keys.key("jw.leases"))
            .arg(&keys.prefix)
            .arg(who)
            .arg(ids)
            .query_async(con)
            .await
            .expect("floor consume");
        assert_eq!(consumed, ids.len(), "floor consume: leases not held");
    }
}
