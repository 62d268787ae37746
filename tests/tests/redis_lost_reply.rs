//! A post whose reply is lost (the connection drops after the server ran
//! it) is sent again on the new connection. That second sending must not
//! post the job a second time, though a worker may have consumed it in
//! between, nor report the job it posted as already there.

use std::time::Duration;

use jobworker::board::Admin;
use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::RedisBoard;
use jobworker::{Board, JobId, JobState, NewJob};
use jobworker_tests::copy_of;
use jobworker_tests::{unique_queue, wait_until, ReplyCutter};

const LONG: Duration = Duration::from_secs(300);
const WAIT: Duration = Duration::from_secs(60);

/// A server, a board that reaches it through a [`ReplyCutter`], and one
/// that reaches it directly (the worker's side).
struct Setup {
    _server: RedisServer,
    proxy: ReplyCutter,
    poster: RedisBoard,
    worker: RedisBoard,
    queue: String,
}

impl Setup {
    async fn start(name: &str) -> Setup {
        let server = RedisServer::start(ServerOptions::default()).unwrap();
        let port = server.port().expect("a tcp server");
        let proxy = ReplyCutter::start(&format!("127.0.0.1:{port}"));
        let poster = RedisBoard::connect(&proxy.url()).await.unwrap();
        let worker = RedisBoard::connect(&server.url()).await.unwrap();
        let queue = unique_queue(name);
        // The poster's connection and its Lua are set up before the cut.
        let warm = poster.post(&queue, NewJob::new("warm-up")).await.unwrap();
        let claimed = worker.claim(&[&queue], "w", LONG, 1).await.unwrap();
        assert_eq!(*claimed[0].lease.job(), warm);
        worker.consume(copy_of(&claimed[0].lease)).await.unwrap();
        Setup {
            _server: server,
            proxy,
            poster,
            worker,
            queue,
        }
    }

    /// Posts `job` through the proxy with its reply lost; `meanwhile` runs
    /// on the board (directly) after the post ran and before the post is
    /// sent again. Returns what the post returned.
    async fn post_losing_the_reply<F, Fut>(&self, job: NewJob, meanwhile: F) -> jobworker::Result<JobId>
    where
        F: FnOnce(JobId) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let accepted = self.proxy.accepted();
        self.proxy.arm();
        let poster = self.poster.clone();
        let queue = self.queue.clone();
        let post = tokio::spawn(async move { poster.post(&queue, job).await });
        wait_until("the post's reply is cut", WAIT, || async {
            self.proxy.cuts() == 1
        })
        .await;
        let counts = Admin::counts(&self.worker, std::slice::from_ref(&self.queue))
            .await
            .unwrap();
        assert_eq!(counts.listed, 1, "the post ran before its reply was cut");
        let listed = self.worker.list_ids(&self.queue).await;
        meanwhile(listed).await;
        self.proxy.release();
        let result = post.await.unwrap();
        assert!(
            self.proxy.accepted() > accepted,
            "the post went again on a new connection"
        );
        result
    }

    /// Claims the one ready job and consumes it.
    async fn run_one(&self) -> JobId {
        let claimed = self.worker.claim(&[&self.queue], "w", LONG, 1).await.unwrap();
        assert_eq!(claimed.len(), 1, "one job is ready");
        let id = claimed[0].lease.job().clone();
        self.worker.consume(copy_of(&claimed[0].lease)).await.unwrap();
        id
    }

    /// Asserts that nothing is left to run and `id` was consumed.
    async fn assert_ran_once(&self, id: &JobId) {
        let counts = Admin::counts(&self.worker, std::slice::from_ref(&self.queue))
            .await
            .unwrap();
        assert_eq!(counts.listed, 0, "the job was posted again after it ran");
        assert_eq!(counts.completed, 2, "the warm-up and the job, once each");
        let state = self.worker.state(&self.queue, id).await.unwrap();
        assert_eq!(state, JobState::Completed);
        let claimed = self.worker.claim(&[&self.queue], "w", LONG, 1).await.unwrap();
        assert!(
            claimed.is_empty(),
            "a job was ready again: {:?}",
            claimed[0].lease.job()
        );
    }
}

/// The one id listed (the job the cut post wrote).
trait ListIds {
    async fn list_ids(&self, queue: &str) -> JobId;
}

impl ListIds for RedisBoard {
    async fn list_ids(&self, queue: &str) -> JobId {
        let key = self.keys(queue).unwrap().listings().to_owned();
        let ids: Vec<String> = redis::cmd("HKEYS")
            .arg(key)
            .query_async(&mut self.connection())
            .await
            .unwrap();
        assert_eq!(ids.len(), 1, "{ids:?}");
        JobId::from(ids[0].clone())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_generated_id_consumed_before_the_retry_is_not_posted_again() {
    let setup = Setup::start("lost-generated").await;
    let mut ran = None;
    let posted = setup
        .post_losing_the_reply(NewJob::new("once"), |listed| {
            ran = Some(listed);
            async {
                setup.run_one().await;
            }
        })
        .await
        .unwrap();
    assert_eq!(Some(&posted), ran.as_ref(), "the post returns the id it posted");
    setup.assert_ran_once(&posted).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_given_id_consumed_before_the_retry_is_not_posted_again() {
    let setup = Setup::start("lost-given").await;
    let id = JobId::from("order-1");
    let posted = setup
        .post_losing_the_reply(NewJob::new("once").id(id.as_str()), |_| async {
            assert_eq!(setup.run_one().await, id);
        })
        .await
        .unwrap();
    assert_eq!(posted, id);
    setup.assert_ran_once(&id).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_given_id_still_listed_at_the_retry_is_reported_posted() {
    let setup = Setup::start("lost-listed").await;
    let id = JobId::from("order-2");
    let posted = setup
        .post_losing_the_reply(NewJob::new("once").id(id.as_str()), |_| async {})
        .await;
    assert_eq!(posted.unwrap(), id, "the post's own job is not 'already there'");
    assert_eq!(setup.run_one().await, id);
    setup.assert_ran_once(&id).await;
    // Posting that id again now is a new life (it finished): unchanged.
    setup
        .poster
        .post(&setup.queue, NewJob::new("again").id(id.as_str()))
        .await
        .unwrap();
    assert_eq!(setup.run_one().await, id);
}
