//! On a Redis Cluster the cluster client sends a call whose connection
//! dropped again by itself, as it was (the board never hears of the
//! drop). A post of a generated id sent again that way must not post its
//! job a second time, and a claim must get back the jobs its first sending
//! took (see `redis_lost_reply.rs` for one server, where the board sends
//! the call again itself).
//!
//! The cluster has one master, which announces a [`CuttingProxy`]'s port
//! as its own (`cluster-announce-port`): every connection of the cluster
//! client goes through the proxy, and so does every connection of the
//! board the test checks the node with, made before the cut: the proxy
//! holds only the connections made after it.

use std::future::Future;
use std::time::Duration;

use jobworker::board::Admin;
use jobworker::redis::RedisBoard;
use jobworker::{Board, Claimed, JobId, JobState, NewJob};
use jobworker_tests::{copy_of, settle_and_take, unique_queue, CuttingProxy, RedisCluster};

const LONG: Duration = Duration::from_secs(300);

/// A one-master cluster, a board on it through the proxy (the client under
/// test) and one on it directly.
struct Setup {
    proxy: CuttingProxy,
    client: RedisBoard,
    board: RedisBoard,
    queue: String,
    // Dropped last: stops the node.
    _cluster: RedisCluster,
}

impl Setup {
    async fn start(name: &str) -> Setup {
        let cluster = RedisCluster::start(1);
        let port = cluster.ports()[0];
        let proxy = CuttingProxy::start(&format!("127.0.0.1:{port}"));
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-announce-port")
            .arg(proxy.port())
            .query::<()>(&mut cluster.node(port))
            .expect("announce the proxy's port");
        let client = RedisBoard::connect(&format!("redis+cluster://127.0.0.1:{}", proxy.port()))
            .await
            .unwrap();
        // Through the proxy too (the node announces its port), connected
        // before any cut, so that it goes on while the client is held.
        proxy.hold_new_connections_only();
        let board = RedisBoard::connect(&cluster.url()).await.unwrap();
        let queue = unique_queue(name);
        board.counts(std::slice::from_ref(&queue)).await.unwrap();
        // The client's connections and its scripts are set up before the cut.
        let warm = client.post(&queue, NewJob::new("warm-up")).await.unwrap();
        let claimed = client.claim(&[&queue], "client", LONG, 1).await.unwrap();
        assert_eq!(*claimed[0].lease.job(), warm);
        client.consume(copy_of(&claimed[0].lease)).await.unwrap();
        Setup {
            proxy,
            client,
            board,
            queue,
            _cluster: cluster,
        }
    }

    /// Runs `call` on the client with the connection of its reply cut;
    /// `meanwhile` runs on the board (directly) after the cut and before
    /// the cluster client's retry gets through.
    async fn reply_cut<T, C, CF, M, MF>(&self, call: C, meanwhile: M) -> T
    where
        C: FnOnce(RedisBoard, String) -> CF,
        CF: Future<Output = T> + Send + 'static,
        T: Send + 'static,
        M: FnOnce() -> MF,
        MF: Future<Output = ()>,
    {
        let call = call(self.client.clone(), self.queue.clone());
        self.proxy
            .through_a_cut(CuttingProxy::cut_next_reply, call, meanwhile)
            .await
    }

    async fn counts(&self) -> jobworker::board::QueueCounts {
        Admin::counts(&self.board, std::slice::from_ref(&self.queue))
            .await
            .unwrap()
    }

    /// Posts `n` jobs on the board, returning their ids in claim order.
    async fn post_jobs(&self, n: usize) -> Vec<JobId> {
        let mut ids = Vec::new();
        for i in 0..n {
            let job = NewJob::new("job").id(format!("job-{i}"));
            ids.push(self.board.post(&self.queue, job).await.unwrap());
        }
        ids
    }

    /// Claims the one ready job on the board and consumes it.
    async fn run_one(&self) -> JobId {
        let claimed = self.board.claim(&[&self.queue], "board", LONG, 1).await.unwrap();
        assert_eq!(claimed.len(), 1, "one job is ready");
        self.board.consume(copy_of(&claimed[0].lease)).await.unwrap();
        claimed[0].lease.job().clone()
    }
}

fn ids_of(claimed: &[Claimed]) -> Vec<JobId> {
    claimed.iter().map(|c| c.lease.job().clone()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_generated_id_consumed_before_the_cluster_retry_is_not_posted_again() {
    let s = Setup::start("cluster-lost-post").await;
    let mut ran = None;
    let posted = s
        .reply_cut(
            |client, q| async move { client.post(&q, NewJob::new("once")).await },
            || async {
                assert_eq!(
                    s.counts().await.listed,
                    1,
                    "the post ran before its reply was cut"
                );
                ran = Some(s.run_one().await);
            },
        )
        .await
        .unwrap();
    assert_eq!(Some(&posted), ran.as_ref(), "the post returns the id it posted");
    let counts = s.counts().await;
    assert_eq!(counts.listed, 0, "the job was not posted again after it ran");
    assert_eq!(counts.completed, 2, "the warm-up and the job, once each");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_whose_reply_was_lost_on_a_cluster_gets_back_what_it_took() {
    let s = Setup::start("cluster-lost-claim").await;
    let ids = s.post_jobs(3).await;
    let claimed = s
        .reply_cut(
            |client, q| async move { client.claim(&[&q], "client", LONG, 2).await },
            || async {
                assert_eq!(
                    s.counts().await.claimed,
                    2,
                    "the claim ran before its reply was cut"
                );
            },
        )
        .await
        .unwrap();
    assert_eq!(ids_of(&claimed), ids[..2], "the jobs the first sending took");
    assert_eq!(
        s.counts().await.claimed,
        2,
        "no job was taken twice or left behind"
    );
    for c in &claimed {
        s.client.consume(copy_of(&c.lease)).await.unwrap();
    }
    assert_eq!(s.run_one().await, ids[2]);
    for id in &ids {
        let info = s.board.show(&s.queue, id).await.unwrap();
        assert_eq!((info.state, info.attempts), (JobState::Completed, 0), "{id}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_settle_and_take_whose_reply_was_lost_on_a_cluster_gets_back_what_it_took() {
    let s = Setup::start("cluster-lost-cycle").await;
    let ids = s.post_jobs(3).await;
    let first = s.client.claim(&[&s.queue], "client", LONG, 1).await.unwrap();
    assert_eq!(ids_of(&first), ids[..1]);
    let done = copy_of(&first[0].lease);
    let (settled, claimed) = s
        .reply_cut(
            |client, q| settle_and_take(client, q, "client", done),
            || async {
                let counts = s.counts().await;
                assert_eq!(
                    (counts.completed, counts.claimed),
                    (2, 1),
                    "the call ran before its reply was cut"
                );
            },
        )
        .await;
    // The consume, sent again as it was, is refused: its job is gone.
    assert_eq!(settled.len(), 1);
    assert!(settled[0].is_err(), "{settled:?}");
    let claimed = claimed.unwrap();
    assert_eq!(ids_of(&claimed), ids[1..2], "the job the first sending took");
    assert_eq!(
        s.counts().await.claimed,
        1,
        "no job was taken twice or left behind"
    );
    s.client.consume(copy_of(&claimed[0].lease)).await.unwrap();
    assert_eq!(s.run_one().await, ids[2]);
    for id in &ids {
        let info = s.board.show(&s.queue, id).await.unwrap();
        assert_eq!((info.state, info.attempts), (JobState::Completed, 0), "{id}");
    }
}
