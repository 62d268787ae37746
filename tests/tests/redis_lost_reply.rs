//! A call whose connection drops (after the server ran it, its reply lost;
//! or before it got there) is sent again on a new connection. A post sent
//! again must not post its job a second time, though a worker may have
//! consumed it in between, nor report the job it posted as already there;
//! a claim sent again must get back the jobs its first sending took, not
//! leave their leases to expire (each counted as a failed attempt).

use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use jobworker::board::Admin;
use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::{RedisBoard, RedisOptions};
use jobworker::{Board, Claimed, JobId, JobState, NewJob};
use jobworker_tests::features::claimed_outside;
use jobworker_tests::{copy_of, settle_and_take, unique_queue, wait_until, CuttingProxy};

const LONG: Duration = Duration::from_secs(300);
/// Requests a new connection of the client sends before its first call
/// (redis-rs' handshake, one write).
const HANDSHAKE: usize = 1;
const WAIT: Duration = Duration::from_secs(60);

/// Where the proxy drops the connection.
#[derive(Clone, Copy)]
enum Cut {
    /// After the server ran the call: its reply is lost.
    Reply,
    /// The same, after that many replies (the call's reads) got through.
    ReplyAfter(usize),
    /// Before the call reached the server.
    Request,
}

/// A server, a board that reaches it through a [`CuttingProxy`] (the
/// client under test), and one that reaches it directly.
struct Setup {
    _server: RedisServer,
    proxy: CuttingProxy,
    client: RedisBoard,
    board: RedisBoard,
    queue: String,
}

impl Setup {
    async fn start(name: &str) -> Setup {
        let server = RedisServer::start(ServerOptions::default()).unwrap();
        let port = server.port().expect("a tcp server");
        let proxy = CuttingProxy::start(&format!("127.0.0.1:{port}"));
        let client = RedisBoard::connect(&proxy.url()).await.unwrap();
        let board = RedisBoard::connect(&server.url()).await.unwrap();
        let queue = unique_queue(name);
        // The client's connection and its Lua are set up before the cut.
        let warm = client.post(&queue, NewJob::new("warm-up")).await.unwrap();
        let claimed = client.claim(&[&queue], "client", LONG, 1).await.unwrap();
        assert_eq!(*claimed[0].lease.job(), warm);
        client.consume(copy_of(&claimed[0].lease)).await.unwrap();
        Setup {
            _server: server,
            proxy,
            client,
            board,
            queue,
        }
    }

    /// Runs `call` on the client with its connection cut at `cut`;
    /// `meanwhile` runs on the board (directly) after the cut and before
    /// the call gets through again. Returns what the call returned.
    async fn through_a_cut<T, C, CF, M, MF>(&self, cut: Cut, call: C, meanwhile: M) -> T
    where
        C: FnOnce(RedisBoard, String) -> CF,
        CF: Future<Output = T> + Send + 'static,
        T: Send + 'static,
        M: FnOnce() -> MF,
        MF: Future<Output = ()>,
    {
        let arm = |proxy: &CuttingProxy| match cut {
            Cut::Reply => proxy.cut_next_reply(),
            Cut::ReplyAfter(pass) => proxy.cut_reply_after(pass),
            Cut::Request => proxy.cut_next_request(),
        };
        let call = call(self.client.clone(), self.queue.clone());
        self.proxy.through_a_cut(arm, call, meanwhile).await
    }

    async fn counts(&self) -> jobworker::board::QueueCounts {
        Admin::counts(&self.board, std::slice::from_ref(&self.queue))
            .await
            .unwrap()
    }

    /// The ids of the jobs listed.
    async fn listed_ids(&self) -> Vec<String> {
        let key = self.board.keys(&self.queue).unwrap().listings().to_owned();
        redis::cmd("HKEYS")
            .arg(key)
            .query_async(&mut self.board.connection())
            .await
            .unwrap()
    }

    /// The one job listed.
    async fn listed(&self) -> JobId {
        let ids = self.listed_ids().await;
        assert_eq!(ids.len(), 1, "{ids:?}");
        JobId::from(ids[0].clone())
    }

    /// Posts 5,000 jobs `bulk-0000`… in one bulk whose first reply is
    /// cut, running `meanwhile` on the board before the bulk goes on; each
    /// job's result, and the ids listed afterwards.
    async fn bulk_through_a_cut(
        &self,
        meanwhile: redis::Cmd,
    ) -> (Vec<jobworker::Result<JobId>>, HashSet<String>) {
        let jobs: Vec<NewJob> = (0..5_000)
            .map(|i| NewJob::new("bulk").id(format!("bulk-{i:04}")))
            .collect();
        let results = self
            .through_a_cut(
                Cut::Reply,
                |client, q| async move { client.post_many(&q, &jobs).await },
                || async {
                    let _: () = meanwhile.query_async(&mut self.board.connection()).await.unwrap();
                },
            )
            .await
            .unwrap();
        let listed: HashSet<String> = self.listed_ids().await.into_iter().collect();
        (results, listed)
    }

    /// Claims the one ready job on the board and consumes it.
    async fn run_one(&self) -> JobId {
        let claimed = self.board.claim(&[&self.queue], "board", LONG, 1).await.unwrap();
        assert_eq!(claimed.len(), 1, "one job is ready");
        self.board.consume(copy_of(&claimed[0].lease)).await.unwrap();
        claimed[0].lease.job().clone()
    }

    /// Asserts that nothing is left and `done` (besides the warm-up) were
    /// consumed once.
    async fn assert_all_ran_once(&self, done: &[&JobId]) {
        let counts = self.counts().await;
        assert_eq!(
            counts.listed, 0,
            "nothing is left: a job was posted again after it ran"
        );
        assert_eq!(
            counts.completed,
            1 + done.len(),
            "the warm-up and the jobs, once each"
        );
        for id in done {
            let state = self.board.state(&self.queue, id).await.unwrap();
            assert_eq!(state, JobState::Completed, "{id}");
            let info = self.board.show(&self.queue, id).await.unwrap();
            assert_eq!(info.attempts, 0, "{id}: no failed attempt was counted");
        }
    }

    /// The deadline (ms) of `id`'s lease in the lease index.
    async fn lease_deadline(&self, id: &JobId) -> i64 {
        let key = self.board.keys(&self.queue).unwrap().leases().to_owned();
        let score: f64 = redis::cmd("ZSCORE")
            .arg(key)
            .arg(id.as_str())
            .query_async(&mut self.board.connection())
            .await
            .unwrap();
        score as i64
    }

    /// Posts `job` through the client with its connection cut at `cut`
    /// (see [`through_a_cut`](Self::through_a_cut)).
    async fn post_cut<M, MF>(&self, cut: Cut, job: NewJob, meanwhile: M) -> jobworker::Result<JobId>
    where
        M: FnOnce() -> MF,
        MF: Future<Output = ()>,
    {
        self.through_a_cut(
            cut,
            |client, q| async move { client.post(&q, job).await },
            meanwhile,
        )
        .await
    }

    /// Claims up to `count` jobs as "client" with the connection cut at
    /// `cut` (see [`through_a_cut`](Self::through_a_cut)).
    async fn claim_cut<M, MF>(&self, cut: Cut, count: usize, meanwhile: M) -> jobworker::Result<Vec<Claimed>>
    where
        M: FnOnce() -> MF,
        MF: Future<Output = ()>,
    {
        let claim = move |client: RedisBoard, q: String| async move {
            client.claim(&[&q], "client", LONG, count).await
        };
        self.through_a_cut(cut, claim, meanwhile).await
    }

    /// Consumes `claimed` through the client (their leases are good).
    async fn consume_all(&self, claimed: &[Claimed]) {
        for c in claimed {
            self.client.consume(copy_of(&c.lease)).await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_generated_id_consumed_before_the_retry_is_not_posted_again() {
    let s = Setup::start("lost-generated").await;
    let mut ran = None;
    let posted = s
        .post_cut(Cut::Reply, NewJob::new("once"), || async {
            assert_eq!(
                s.counts().await.listed,
                1,
                "the post ran before its reply was cut"
            );
            ran = Some(s.run_one().await);
        })
        .await
        .unwrap();
    assert_eq!(Some(&posted), ran.as_ref(), "the post returns the id it posted");
    s.assert_all_ran_once(&[&posted]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_given_id_consumed_before_the_retry_is_not_posted_again() {
    let s = Setup::start("lost-given").await;
    let id = JobId::from("order-1");
    let posted = s
        .post_cut(Cut::Reply, NewJob::new("once").id("order-1"), || async {
            assert_eq!(s.run_one().await, id)
        })
        .await
        .unwrap();
    assert_eq!(posted, id);
    s.assert_all_ran_once(&[&id]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_given_id_still_listed_at_the_retry_is_reported_posted() {
    let s = Setup::start("lost-listed").await;
    let id = JobId::from("order-2");
    let posted = s
        .post_cut(Cut::Reply, NewJob::new("once").id("order-2"), || async {
            assert_eq!(s.listed().await, id)
        })
        .await;
    assert_eq!(posted.unwrap(), id, "the post's own job is not 'already there'");
    assert_eq!(s.run_one().await, id);
    s.assert_all_ran_once(&[&id]).await;
    // Posting that id again now is a new life (it finished): unchanged.
    s.client
        .post(&s.queue, NewJob::new("again").id("order-2"))
        .await
        .unwrap();
    assert_eq!(s.run_one().await, id);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_post_cut_before_it_ran_is_posted_once() {
    let s = Setup::start("cut-post").await;
    let posted = s
        .post_cut(Cut::Request, NewJob::new("once").id("order-3"), || async {
            assert_eq!(s.counts().await.listed, 0, "the post did not get there")
        })
        .await
        .unwrap();
    assert_eq!(s.run_one().await, posted);
    s.assert_all_ran_once(&[&posted]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_waiting_on_another_queue_is_linked_when_its_post_is_sent_again() {
    let s = Setup::start("lost-waiting").await;
    let other = unique_queue("lost-waiting-dep");
    let dep = s.board.post(&other, NewJob::new("dep")).await.unwrap();
    let (other_q, dep_id) = (other.clone(), dep.clone());
    let posted = s
        .through_a_cut(
            Cut::Reply,
            move |client, q| async move {
                let job = NewJob::new("after-dep")
                    .id("order-4")
                    .depends_on_in(other_q, dep_id);
                client.post(&q, job).await
            },
            || async {},
        )
        .await
        .unwrap();
    assert_eq!(s.board.state(&s.queue, &posted).await.unwrap(), JobState::Waiting);
    let claimed = s.board.claim(&[&other], "board", LONG, 1).await.unwrap();
    assert_eq!(*claimed[0].lease.job(), dep);
    s.board.consume(copy_of(&claimed[0].lease)).await.unwrap();
    wait_until("the job is ready once its dependency ran", WAIT, || async {
        s.board.state(&s.queue, &posted).await.unwrap() == JobState::Ready
    })
    .await;
    assert_eq!(s.run_one().await, posted);
}

/// Posts `n` jobs on the board, returning their ids in claim order.
async fn post_jobs(s: &Setup, n: usize) -> Vec<JobId> {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(
            s.board
                .post(&s.queue, NewJob::new("job").id(format!("job-{i}")))
                .await
                .unwrap(),
        );
    }
    ids
}

fn ids_of(claimed: &[Claimed]) -> Vec<JobId> {
    claimed.iter().map(|c| c.lease.job().clone()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_whose_reply_was_lost_gets_back_what_it_took() {
    let s = Setup::start("lost-claim").await;
    let ids = post_jobs(&s, 3).await;
    let mut released_ms = 0;
    let claimed = s
        .claim_cut(Cut::Reply, 2, || async {
            let claimed = s.counts().await.claimed;
            assert_eq!(claimed, 2, "the claim ran before its reply was cut");
            tokio::time::sleep(Duration::from_millis(20)).await;
            released_ms = s.board.server_ms().await.unwrap();
        })
        .await
        .unwrap();
    assert_eq!(ids_of(&claimed), ids[..2], "the jobs the first sending took");
    assert!(claimed.iter().all(|c| c.attempt == 1), "first attempts");
    let held = s.counts().await.claimed;
    assert_eq!(held, 2, "no job was taken twice or left behind");
    for id in &ids[..2] {
        let deadline = s.lease_deadline(id).await;
        assert!(
            deadline >= released_ms + LONG.as_millis() as i64,
            "{id}: its lease counts from the retry"
        );
    }
    s.consume_all(&claimed).await;
    assert_eq!(s.run_one().await, ids[2]);
    s.assert_all_ran_once(&ids.iter().collect::<Vec<_>>()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_cut_before_it_ran_claims_on_the_new_connection() {
    let s = Setup::start("cut-claim").await;
    let ids = post_jobs(&s, 3).await;
    let claimed = s
        .claim_cut(Cut::Request, 2, || async {
            assert_eq!(s.counts().await.claimed, 0, "the claim did not get there")
        })
        .await
        .unwrap();
    assert_eq!(ids_of(&claimed), ids[..2]);
    assert_eq!(s.counts().await.claimed, 2);
    s.consume_all(&claimed).await;
    assert_eq!(s.run_one().await, ids[2]);
    s.assert_all_ran_once(&ids.iter().collect::<Vec<_>>()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_settle_and_take_whose_reply_was_lost_gets_back_what_it_took() {
    let s = Setup::start("lost-cycle").await;
    let ids = post_jobs(&s, 3).await;
    let first = s.client.claim(&[&s.queue], "client", LONG, 1).await.unwrap();
    assert_eq!(ids_of(&first), ids[..1]);
    let done = copy_of(&first[0].lease);
    let (settled, claimed) = s
        .through_a_cut(
            Cut::Reply,
            |client, q| settle_and_take(client, q, "client", done),
            || async {
                assert_eq!(
                    s.counts().await.completed,
                    2,
                    "the consume ran before the reply was cut"
                )
            },
        )
        .await;
    // Sent again as itself, the consume its first sending ran is done.
    assert!(settled[0].is_ok(), "{settled:?}");
    let claimed = claimed.unwrap();
    assert_eq!(ids_of(&claimed), ids[1..2], "the job the first sending took");
    assert_eq!(s.counts().await.claimed, 1);
    // Settling the first job again is refused (it is gone), not run again.
    assert!(s.client.consume(copy_of(&first[0].lease)).await.is_err());
    s.consume_all(&claimed).await;
    assert_eq!(s.run_one().await, ids[2]);
    s.assert_all_ran_once(&ids.iter().collect::<Vec<_>>()).await;
}

/// A settle-and-take call whose connection drops twice (its reply lost,
/// then its consume sent again cut on the way) still sends its claim
/// again: the job its first sending took comes back, and the consume
/// fails as one that may have run.
#[tokio::test(flavor = "multi_thread")]
async fn a_settle_and_take_cut_twice_still_gets_back_what_it_took() {
    let s = Setup::start("lost-cycle-twice").await;
    let ids = post_jobs(&s, 3).await;
    let first = s.client.claim(&[&s.queue], "client", LONG, 1).await.unwrap();
    let done = copy_of(&first[0].lease);
    let (client, q) = (s.client.clone(), s.queue.clone());
    let cuts = s.proxy.cuts();
    s.proxy.cut_next_reply();
    let task = tokio::spawn(settle_and_take(client, q, "client", done));
    for n in 1..=2 {
        wait_until("the connection is cut", WAIT, || async {
            s.proxy.cuts() >= cuts + n
        })
        .await;
        if n == 1 {
            // The new connection's handshake goes through first.
            s.proxy.cut_request_after(HANDSHAKE);
        }
        s.proxy.release();
    }
    let (settled, claimed) = task.await.unwrap();
    let err = settled[0]
        .as_ref()
        .expect_err("whether the consume ran is not known");
    assert!(err.to_string().contains("may have been consumed"), "{err}");
    assert_eq!(
        ids_of(&claimed.unwrap()),
        ids[1..2],
        "the job the first sending took"
    );
    assert_eq!(
        s.counts().await.claimed,
        1,
        "no job was taken twice or left behind"
    );
}

/// A consume whose reply was lost, or that never got there, is sent
/// again as itself: either way the job is consumed once and the consume
/// says so; a second consume of that lease is refused as before.
#[tokio::test(flavor = "multi_thread")]
async fn a_consume_whose_connection_dropped_is_reported_consumed() {
    for cut in [Cut::Reply, Cut::Request] {
        let s = Setup::start("lost-consume").await;
        let ids = post_jobs(&s, 1).await;
        let claimed = s.client.claim(&[&s.queue], "client", LONG, 1).await.unwrap();
        let lease = copy_of(&claimed[0].lease);
        let consumed = s
            .through_a_cut(
                cut,
                |client, _| async move { client.consume(lease).await },
                || async {},
            )
            .await;
        assert!(consumed.is_ok(), "{consumed:?}");
        let again = s.client.consume(copy_of(&claimed[0].lease)).await.unwrap_err();
        assert!(again.is_not_found(), "{again}");
        s.assert_all_ran_once(&[&ids[0]]).await;
    }
}

/// A consume without a token (`--any-token`) of a job claimed outside
/// jobworker (taskflow's owner key only), its reply lost, is reported
/// consumed when sent again, and the job is consumed once.
#[tokio::test(flavor = "multi_thread")]
async fn a_consume_without_a_token_whose_reply_was_lost_is_reported_consumed() {
    let s = Setup::start("lost-consume-outside").await;
    let ids = post_jobs(&s, 1).await;
    let lease = claimed_outside(&s.board, &s.queue, &ids[0], "taskflow").await;
    let consumed = s
        .through_a_cut(
            Cut::Reply,
            |client, _| async move { client.consume(lease).await },
            || async {},
        )
        .await;
    assert!(consumed.is_ok(), "{consumed:?}");
    assert_eq!(
        s.board.show(&s.queue, &ids[0]).await.unwrap().state,
        JobState::Completed
    );
    // (With the set-up's warm-up job.)
    let counts = s.counts().await;
    assert_eq!((counts.listed, counts.completed), (0, 2));
}

/// taskflow's claim of one named job, its reply lost, is the first
/// sending's claim when sent again, not "already claimed" by its caller
/// (whose lease would otherwise be held by nobody who knows it).
#[tokio::test(flavor = "multi_thread")]
async fn a_named_claim_whose_reply_was_lost_gets_its_job() {
    let s = Setup::start("lost-named").await;
    let ids = post_jobs(&s, 2).await;
    let named = ids[1].clone();
    // The claim reads the job's posting first, then runs its script.
    let claimed = s
        .through_a_cut(
            Cut::ReplyAfter(1),
            |client, q| async move { client.claim_job(&q, &named, "client", Some(LONG)).await },
            || async {
                let owner = s.board.find_owner(&s.queue, &ids[1]).await.unwrap();
                assert_eq!(
                    owner.as_deref(),
                    Some("client"),
                    "the claim ran before its reply was cut"
                );
            },
        )
        .await
        .unwrap();
    assert_eq!(*claimed.lease.job(), ids[1]);
    assert_eq!(claimed.attempt, 1);
    let info = s.board.show(&s.queue, &ids[1]).await.unwrap();
    assert_eq!(info.token, claimed.lease.token(), "the first sending's lease");
    s.client.consume(copy_of(&claimed.lease)).await.unwrap();
    assert_eq!(s.run_one().await, ids[0]);
    s.assert_all_ran_once(&ids.iter().collect::<Vec<_>>()).await;
    // A claim of a job its caller holds, not sent again, is refused as
    // taskflow's is.
    let held = s.board.post(&s.queue, NewJob::new("held")).await.unwrap();
    s.client
        .claim_job(&s.queue, &held, "client", Some(LONG))
        .await
        .unwrap();
    let again = s
        .client
        .claim_job(&s.queue, &held, "client", Some(LONG))
        .await
        .unwrap_err();
    assert!(again.to_string().contains("client"), "{again}");
}

/// A cancel whose reply was lost is not "already finished" when sent
/// again: the job its first sending cancelled counts as cancelled.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_whose_reply_was_lost_is_reported_done() {
    let s = Setup::start("lost-cancel").await;
    let ids = post_jobs(&s, 2).await;
    let cancelled = s
        .through_a_cut(
            Cut::Reply,
            |client, q| async move { client.cancel(&q, &[JobId::from("job-0")], false).await },
            || async {
                let state = s.board.state(&s.queue, &ids[0]).await.unwrap();
                assert_eq!(
                    state,
                    JobState::Cancelled,
                    "the cancel ran before its reply was cut"
                );
            },
        )
        .await
        .unwrap();
    assert_eq!(cancelled, [(s.queue.clone(), ids[0].clone())]);
    assert_eq!(s.run_one().await, ids[1], "the other job is untouched");
    // Cancelling it again, not sent again, is refused as before.
    let again = s.client.cancel(&s.queue, &ids[..1], false).await.unwrap_err();
    assert!(again.is_finished(), "{again}");
}

/// A cancel sent again after a lost reply still takes the job off its
/// dependencies' lists in other queues: such a dependency can then be
/// cancelled alone, as if the first reply had come.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_sent_again_frees_the_dependencies_in_other_queues() {
    let s = Setup::start("lost-cancel-deps").await;
    let other = unique_queue("lost-cancel-dep");
    let dep = s.board.post(&other, NewJob::new("dep")).await.unwrap();
    let waiting = s
        .board
        .post(&s.queue, NewJob::new("waits").depends_on_in(&other, dep.clone()))
        .await
        .unwrap();
    let cancelled = s
        .through_a_cut(
            Cut::Reply,
            |client, q| async move { client.cancel(&q, &[waiting], false).await },
            || async {},
        )
        .await
        .unwrap();
    assert_eq!(cancelled.len(), 1);
    let deps = s.board.dependencies(&other, &dep).await.unwrap();
    assert!(deps.dependents.is_empty(), "still listed: {deps:?}");
    s.board.cancel(&other, &[dep], false).await.unwrap();
}

/// A bulk post that goes as one pipeline (here because of a durability;
/// also behind sentinels) and loses its reply sends each of its calls
/// again as itself: every job is posted, once.
#[tokio::test(flavor = "multi_thread")]
async fn a_pipelined_bulk_post_whose_reply_was_lost_posts_each_job_once() {
    let master = RedisServer::start(ServerOptions {
        extra_args: vec!["--repl-diskless-sync-delay".into(), "0".into()],
        ..Default::default()
    })
    .unwrap();
    let port = master.port().expect("a tcp server");
    let replica = RedisServer::start(ServerOptions {
        extra_args: vec!["--replicaof".into(), "127.0.0.1".into(), port.to_string()],
        ..Default::default()
    })
    .unwrap();
    let replica_con = redis::Client::open(replica.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    wait_until("the replica is in sync", WAIT, || {
        let mut con = replica_con.clone();
        async move {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut con)
                .await
                .unwrap();
            info.contains("master_link_status:up")
        }
    })
    .await;
    let proxy = CuttingProxy::start(&format!("127.0.0.1:{port}"));
    let mut opts = RedisOptions::new(proxy.url());
    opts.durability = Some("wait:1:5000".parse().unwrap());
    let client = RedisBoard::with_options(opts).await.unwrap();
    let q = unique_queue("lost-pipeline");
    // The replica is in sync once a post is acknowledged by it.
    client
        .post(&q, NewJob::new("warm-up").id("warm-up"))
        .await
        .unwrap();
    let jobs: Vec<NewJob> = (0..1_000)
        .map(|i| NewJob::new("bulk").id(format!("bulk-{i:04}")))
        .collect();
    proxy.cut_next_reply();
    let posting = client.clone();
    let (queue, all) = (q.clone(), jobs.clone());
    let bulk = tokio::spawn(async move { posting.post_many(&queue, &all).await });
    wait_until("the pipeline's reply is cut", WAIT, || async {
        proxy.cuts() == 1
    })
    .await;
    proxy.release();
    let results = bulk.await.unwrap().unwrap();
    assert_eq!(results.len(), jobs.len());
    for (i, result) in results.iter().enumerate() {
        let got = result.as_ref().unwrap_or_else(|e| panic!("job {i}: {e}"));
        assert_eq!(got.as_str(), format!("bulk-{i:04}"));
    }
    let direct = RedisBoard::connect(&master.url()).await.unwrap();
    let listed: usize = redis::cmd("HLEN")
        .arg(direct.keys(&q).unwrap().listings())
        .query_async(&mut direct.connection())
        .await
        .unwrap();
    assert_eq!(listed, 1 + jobs.len(), "the warm-up and every job");
}

/// A bulk post whose call fails again when it is sent again (here: the
/// server is out of memory by then) fails that call's jobs (each error
/// names the job and says it may have run) and does not send the rest
/// (their errors say so).
#[tokio::test(flavor = "multi_thread")]
async fn a_bulk_post_whose_call_fails_again_says_which_jobs_may_have_run() {
    let s = Setup::start("lost-bulk").await;
    let mut full = redis::cmd("CONFIG");
    full.arg("SET").arg("maxmemory").arg("1");
    let (results, listed) = s.bulk_through_a_cut(full).await;
    let (mut maybe, mut unsent) = (0, 0);
    for (i, result) in results.iter().enumerate() {
        let id = format!("bulk-{i:04}");
        let text = result.as_ref().expect_err("no call was answered").to_string();
        if text.contains("may have run") {
            assert!(text.contains(&id), "the error names the job: {text}");
            maybe += 1;
        } else {
            assert!(text.contains("not sent"), "{text}");
            assert!(!listed.contains(&id), "{id} was reported not sent");
            unsent += 1;
        }
    }
    eprintln!("{maybe} maybe posted, {unsent} not sent, {} listed", listed.len());
    assert!(listed.len() >= 100, "the cut call ran");
    assert!(maybe >= 100, "the cut call's jobs may have run: {maybe}");
}

/// A bulk post whose calls are sent again after a lost reply to a server
/// that lost the library meanwhile (another build deleted it, a restart)
/// loads it again and runs them: no job is reported as maybe posted.
#[tokio::test(flavor = "multi_thread")]
async fn a_bulk_post_sent_again_to_a_server_without_the_library_loads_it() {
    let s = Setup::start("lost-bulk-library").await;
    let mut flush = redis::cmd("FUNCTION");
    flush.arg("FLUSH");
    let (results, listed) = s.bulk_through_a_cut(flush).await;
    let mut posted = 0;
    for (i, result) in results.iter().enumerate() {
        let id = format!("bulk-{i:04}");
        match result {
            Ok(got) => {
                assert_eq!(got.as_str(), id);
                assert!(listed.contains(&id), "{id} was reported posted");
                posted += 1;
            }
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains("not sent"), "{id}: {text}");
                assert!(!listed.contains(&id), "{id} was reported not sent");
            }
        }
    }
    assert!(posted >= 100, "the cut call's jobs are posted: {posted}");
}

/// A suspect (one of the jobs a crashed worker held together) is claimed
/// alone; a claim whose reply was lost gets it back still marked so.
#[tokio::test(flavor = "multi_thread")]
async fn a_suspect_claimed_again_is_still_a_suspect() {
    use jobworker::board::Recovery;
    let s = Setup::start("lost-suspect").await;
    let ids = post_jobs(&s, 2).await;
    let held = s.board.claim(&[&s.queue], "dead", LONG, 2).await.unwrap();
    assert_eq!(held.len(), 2);
    s.board
        .recover_owner(&s.queue, "dead", "killed by signal 9")
        .await
        .unwrap();
    let claimed = s.claim_cut(Cut::Reply, 2, || async {}).await.unwrap();
    assert_eq!(ids_of(&claimed), ids[..1], "a suspect is claimed alone");
    assert!(claimed[0].suspect, "and is still known as a suspect");
}
