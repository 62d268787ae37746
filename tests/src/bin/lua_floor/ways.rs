//! The three ways one round runs N jobs through: the floor scripts, the
//! real board (`RedisBoard`: `post_many`, `claim` of 50, `consume_many` of
//! 50) and plain commands without Lua (Sidekiq-like: `RPUSH` in bulk,
//! `LPOP` with a count, nothing to consume).

use std::time::Duration;

use jobworker::job::NewJob;
use jobworker::redis::RedisBoard;
use jobworker::Board;
use redis::aio::MultiplexedConnection;
use rmpv::Value;

use crate::floor::{Floor, Keys};
use crate::meter::{finish, start, Figures, SCRIPT_CALLS};

/// A way of running jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// The least Lua on the taskflow layout.
    Floor,
    /// jobworker's scripts through its `RedisBoard`.
    Ours,
    /// `RPUSH` / `LPOP`, no Lua, no lease.
    Plain,
}

impl Way {
    /// All three, in the order of the first round.
    pub const ALL: [Way; 3] = [Way::Floor, Way::Ours, Way::Plain];

    /// A short name for tables and queue names.
    pub fn label(self) -> &'static str {
        match self {
            Way::Floor => "floor",
            Way::Ours => "ours",
            Way::Plain => "plain",
        }
    }
}

/// The phases measured, in the order of a job's life.
pub const PHASES: [&str; 3] = ["post", "claim", "consume"];

/// How one round runs.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Jobs per way and round.
    pub jobs: usize,
    /// Jobs per post pipeline (`post_many` call, or `RPUSH`).
    pub chunk: usize,
    /// Jobs per claim call, and per consume call.
    pub batch: usize,
    /// Jobs per post script call (the board's `POST_BATCH`).
    pub post_batch: usize,
}

/// Everything a round needs: the meter's connection, the floor's, the
/// board, the loaded floor scripts.
pub struct Bench {
    /// The connection that reads INFO.
    pub meter: MultiplexedConnection,
    /// The floor's and the plain way's connection.
    pub con: MultiplexedConnection,
    /// jobworker's board on the same server.
    pub board: RedisBoard,
    /// The floor scripts.
    pub floor: Floor,
}

/// A uuid-shaped id (36 characters, like taskflow's).
fn uuid(way: Way, round: usize, k: usize) -> String {
    let w = Way::ALL.iter().position(|x| *x == way).unwrap_or(0);
    format!("{w:08x}-{round:04x}-4000-8000-{k:012x}")
}

/// taskflow's msgpack posting of `id` without its last entry
/// (`sequence`): the map header says 6 entries, 5 follow.
pub fn posting_head(id: &str) -> Vec<u8> {
    let s = |t: &str| Value::from(t);
    let when: Vec<(Value, Value)> = [
        ("day", 24),
        ("month", 11),
        ("year", 2026),
        ("hour", 8),
        ("minute", 30),
        ("second", 15),
        ("microsecond", 123_456),
    ]
    .into_iter()
    .map(|(k, v)| (s(k), Value::from(v)))
    .collect();
    let mut ext = Vec::new();
    rmpv::encode::write_value(&mut ext, &Value::Map(when)).expect("encode a datetime");
    let posting = Value::Map(vec![
        (s("uuid"), s(id)),
        (s("name"), s("bench")),
        (s("priority"), s("NORMAL")),
        (s("created_on"), Value::Ext(1, ext)),
        (s("details"), Value::Map(Vec::new())),
    ]);
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, &posting).expect("encode a posting");
    assert_eq!(out[0], 0x85, "a five-entry fixmap");
    out[0] = 0x86;
    out
}

impl Bench {
    /// One round of `way`: the figures of each phase, in [`PHASES`] order.
    pub async fn round(&mut self, way: Way, round: usize, shape: Shape) -> [Figures; 3] {
        match way {
            Way::Floor => self.floor_round(round, shape).await,
            Way::Ours => self.ours_round(round, shape).await,
            Way::Plain => self.plain_round(round, shape).await,
        }
    }

    async fn floor_round(&mut self, round: usize, shape: Shape) -> [Figures; 3] {
        let keys = Keys::new(&format!("floor-{round}"));
        let jobs: Vec<(String, Vec<u8>)> = (0..shape.jobs)
            .map(|k| {
                let id = uuid(Way::Floor, round, k);
                let head = posting_head(&id);
                (id, head)
            })
            .collect();
        let sent = ["evalsha"];
        let mark = start(&mut self.meter).await;
        let con = &mut self.con;
        self.floor
            .post(con, &keys, &jobs, shape.post_batch, shape.chunk)
            .await;
        let post = finish(&mut self.meter, mark, shape.jobs, &sent).await;
        let mark = start(&mut self.meter).await;
        let (mut held, mut claimed) = (Vec::new(), 0);
        while claimed < shape.jobs {
            let got = self.floor.claim(&mut self.con, &keys, "w", shape.batch).await;
            assert!(
                !got.is_empty(),
                "floor claim: {claimed} of {} claimed",
                shape.jobs
            );
            claimed += got.len();
            held.push(got);
        }
        let claim = finish(&mut self.meter, mark, shape.jobs, &sent).await;
        let mark = start(&mut self.meter).await;
        for ids in &held {
            self.floor.consume(&mut self.con, &keys, "w", ids).await;
        }
        let consume = finish(&mut self.meter, mark, shape.jobs, &sent).await;
        [post, claim, consume]
    }

    async fn ours_round(&mut self, round: usize, shape: Shape) -> [Figures; 3] {
        let queue = format!("ours-{round}");
        let jobs: Vec<NewJob> = (0..shape.jobs)
            .map(|k| NewJob::new("bench").id(uuid(Way::Ours, round, k)))
            .collect();
        let sent = SCRIPT_CALLS;
        let mark = start(&mut self.meter).await;
        for part in jobs.chunks(shape.chunk) {
            for r in self.board.post_many(&queue, part).await.expect("post_many") {
                r.expect("a post");
            }
        }
        let post = finish(&mut self.meter, mark, shape.jobs, &sent).await;
        let mark = start(&mut self.meter).await;
        let mut held = Vec::with_capacity(shape.jobs);
        let expiry = Duration::from_secs(30);
        while held.len() < shape.jobs {
            let got = Board::claim(&self.board, &[&queue], "w", expiry, shape.batch)
                .await
                .expect("claim");
            assert!(!got.is_empty(), "claim: {} of {} claimed", held.len(), shape.jobs);
            held.extend(got.into_iter().map(|c| c.lease));
        }
        let claim = finish(&mut self.meter, mark, shape.jobs, &sent).await;
        let mark = start(&mut self.meter).await;
        while !held.is_empty() {
            let rest = held.split_off(held.len().min(shape.batch));
            for r in Board::consume_many(&self.board, held).await {
                r.expect("consume");
            }
            held = rest;
        }
        let consume = finish(&mut self.meter, mark, shape.jobs, &sent).await;
        [post, claim, consume]
    }

    async fn plain_round(&mut self, round: usize, shape: Shape) -> [Figures; 3] {
        let list = format!("plain:{{plain-{round}}}:queue");
        let payloads: Vec<Vec<u8>> = (0..shape.jobs)
            .map(|k| posting_head(&uuid(Way::Plain, round, k)))
            .collect();
        let mark = start(&mut self.meter).await;
        for part in payloads.chunks(shape.chunk) {
            let _: usize = redis::cmd("RPUSH")
                .arg(&list)
                .arg(part)
                .query_async(&mut self.con)
                .await
                .expect("RPUSH");
        }
        let post = finish(&mut self.meter, mark, shape.jobs, &["rpush"]).await;
        let mark = start(&mut self.meter).await;
        let mut taken = 0;
        while taken < shape.jobs {
            let got: Vec<Vec<u8>> = redis::cmd("LPOP")
                .arg(&list)
                .arg(shape.batch)
                .query_async(&mut self.con)
                .await
                .expect("LPOP");
            assert!(!got.is_empty(), "LPOP: {taken} of {} taken", shape.jobs);
            taken += got.len();
        }
        let claim = finish(&mut self.meter, mark, shape.jobs, &["lpop"]).await;
        [post, claim, Figures::default()]
    }
}
