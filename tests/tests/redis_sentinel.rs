//! A board behind Redis Sentinel (`redis+sentinel://`), on real servers: a
//! master, a replica and three sentinels on loopback ports. After the
//! master is killed and the sentinels promote the replica, the async and
//! the blocking boards reach the new master, and what was replicated
//! before the kill is there.

use std::time::{Duration, Instant};

use jobworker::board::follow;
use jobworker::redis::{RedisBoard, RedisOptions, SyncBoard};
use jobworker::{Board, JobState, NewJob};
use jobworker_tests::{post_until_heard, run_python_async, unique_queue, Sentinels, MASTER_NAME};

const LONG: Duration = Duration::from_secs(300);

/// Retries `call` until it succeeds (the first calls after a failover
/// fail while the board finds the new master); panics after 30 s.
async fn eventually<T, F, Fut>(what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = jobworker::Result<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match call().await {
            Ok(v) => return v,
            Err(e) => {
                assert!(Instant::now() < deadline, "{what}: still failing after 30 s: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_board_behind_sentinels_follows_the_master_through_a_failover() {
    let mut setup = Sentinels::start();
    let url = setup.url();
    let board = RedisBoard::connect(&url).await.unwrap();
    let mut sync = SyncBoard::connect(RedisOptions::new(&url)).unwrap();
    let q = unique_queue("sentinel");
    let kept = board.post(&q, NewJob::new("before")).await.unwrap();
    let held = board.post(&q, NewJob::new("held")).await.unwrap();
    let lease = board.claim(&[&q], "w1", LONG, 1).await.unwrap().remove(0).lease;
    // Everything so far is on the replica before the master dies.
    let mut con = board.connection();
    let replicas: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(replicas, 1);

    setup.kill_master();
    setup.wait_failover(Duration::from_secs(30));
    let after = eventually("a post after the failover", || {
        board.post(&q, NewJob::new("after"))
    })
    .await;
    // Once the board follows the new master, the old one back on its
    // address (empty, a master until the sentinels demote it) does not take
    // its writes.
    setup.restart_old_master();
    let later = board.post(&q, NewJob::new("later")).await.unwrap();
    let on_new: Vec<Option<Vec<u8>>> = redis::Client::open(setup.replica.url())
        .unwrap()
        .get_connection()
        .and_then(|mut c| {
            redis::cmd("HMGET")
                .arg(board.keys(&q).unwrap().listings())
                .arg(after.as_str())
                .arg(later.as_str())
                .query(&mut c)
        })
        .unwrap();
    assert_eq!(
        on_new.iter().flatten().count(),
        2,
        "the posts after the failover went to the new master"
    );
    assert_eq!(board.state(&q, &kept).await.unwrap(), JobState::Claimed);
    assert_eq!(board.state(&q, &after).await.unwrap(), JobState::Ready);
    // The lease taken before the failover still holds on the new master.
    assert_eq!(*lease.job(), kept);
    board.extend(&lease, LONG).await.unwrap();
    board.consume(lease).await.unwrap();
    assert_eq!(board.state(&q, &held).await.unwrap(), JobState::Ready);
    // The supervisor's blocking board follows too.
    let counts = sync.counts(std::slice::from_ref(&q)).unwrap();
    assert_eq!((counts.listed, counts.claimed), (3, 0), "{counts:?}");
}

#[tokio::test]
async fn a_sentinel_url_without_a_master_name_is_a_config_error() {
    let e = RedisBoard::connect("redis+sentinel://127.0.0.1:1")
        .await
        .unwrap_err();
    assert!(e.is_invalid(), "{e}");
    assert!(e.to_string().contains("MASTER_NAME"), "{e}");
}

/// Runs one command of real taskflow's RedisJobBoard, configured with the
/// sentinels (its `sentinel` and `sentinel_fallbacks` options), on
/// namespace `ns`.
async fn taskflow(setup: &Sentinels, ns: &str, args: &[&str]) -> serde_json::Value {
    let ports = setup.sentinel_ports();
    let fallbacks: Vec<String> = ports[1..].iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let host = format!("sentinel={MASTER_NAME}@{}", fallbacks.join(","));
    let port = ports[0].to_string();
    let mut all = vec![host.as_str(), port.as_str(), ns];
    all.extend_from_slice(args);
    run_python_async(TASKFLOW, &all).await.json()
}

const TASKFLOW: &str = include_str!("../python/taskflow_board.py");

/// taskflow (through its own sentinel support) and jobworker share one
/// board behind the sentinels, before and after a failover: each takes
/// and finishes the other's job.
#[tokio::test(flavor = "multi_thread")]
async fn taskflow_and_jobworker_share_a_board_behind_sentinels_across_a_failover() {
    let mut setup = Sentinels::start();
    let q = unique_queue("tf-sentinel");
    let ns = format!("interop-{q}");
    let opts = RedisOptions::new(setup.url()).namespace(&q, &ns);
    let board = RedisBoard::with_options(opts).await.unwrap();

    let posted = taskflow(&setup, &ns, &["post", "report", "NORMAL", "{}"]).await;
    let uuid = posted["uuid"].as_str().unwrap().to_owned();
    let c = board.claim(&[&q], "jw-1", LONG, 1).await.unwrap().remove(0);
    assert_eq!(
        (c.lease.job().as_str(), c.name.as_str()),
        (uuid.as_str(), "report")
    );
    board.consume(c.lease).await.unwrap();
    let ours = board.post(&q, NewJob::new("resize")).await.unwrap();
    let mut con = board.connection();
    let _: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query_async(&mut con)
        .await
        .unwrap();

    setup.kill_master();
    setup.wait_failover(Duration::from_secs(30));

    let claimed = taskflow(&setup, &ns, &["claim", ours.as_str(), "tf-1"]).await;
    assert_eq!(claimed["ok"], true, "{claimed}");
    let consumed = taskflow(&setup, &ns, &["consume", ours.as_str(), "tf-1"]).await;
    assert_eq!(consumed["ok"], true, "{consumed}");
    let gone = eventually("jobworker on the new master", || board.state(&q, &ours)).await;
    assert_eq!(gone, JobState::Completed);
    let listed = taskflow(&setup, &ns, &["list"]).await;
    assert_eq!(listed, serde_json::json!([]));
}

/// A board that only listens follows a failover that demotes a live master
/// (`SENTINEL FAILOVER`): the sentinels close its subscription on the old
/// master, which as a replica still takes subscriptions but hears no post
/// (they go to the new master), so the listener asks the sentinels before
/// it subscribes again. (Before, it subscribed on the old master again:
/// "no post heard; the stream gave [Closed, Open]".)
#[tokio::test(flavor = "multi_thread")]
async fn events_follow_a_failover_that_demotes_a_live_master() {
    let setup = Sentinels::start();
    let url = setup.url();
    let listener = RedisBoard::connect(&url).await.unwrap();
    let poster = RedisBoard::connect(&url).await.unwrap();
    let q = unique_queue("sentinel-demoted");
    let mut events = Box::pin(follow(listener, false));
    post_until_heard(&poster, &q, &mut events).await;
    let sentinel = redis::Client::open(format!("redis://127.0.0.1:{}/", setup.sentinel_ports()[0])).unwrap();
    let _: () = redis::cmd("SENTINEL")
        .arg("FAILOVER")
        .arg(MASTER_NAME)
        .query_async(&mut sentinel.get_multiplexed_async_connection().await.unwrap())
        .await
        .unwrap();
    let _setup = tokio::task::spawn_blocking(move || {
        setup.wait_failover(Duration::from_secs(60));
        setup
    })
    .await
    .unwrap();
    // Until the sentinels make the old master a replica, it still takes
    // the poster's posts.
    // (The sentinels close its clients' connections as they do.)
    let old = redis::Client::open(format!("redis://127.0.0.1:{}/", _setup.master.port().unwrap())).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let role: redis::RedisResult<Vec<redis::Value>> = match old.get_multiplexed_async_connection().await {
            Ok(mut c) => redis::cmd("ROLE").query_async(&mut c).await,
            Err(e) => Err(e),
        };
        if role
            .as_ref()
            .is_ok_and(|r| r.first() == Some(&redis::Value::BulkString(b"slave".to_vec())))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the old master was not made a replica: {role:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The poster sends calls: it finds the new master by itself.
    post_until_heard(&poster, &q, &mut events).await;
}
