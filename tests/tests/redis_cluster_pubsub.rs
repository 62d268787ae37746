//! Sharded pub/sub on a Redis Cluster whose slots move: a queue's channels
//! live on the node that serves its slot, and when the slot moves the
//! server drops the subscription (it pushes an SUNSUBSCRIBE nobody asked
//! for). When the node dies and its replica takes the slot over, nobody
//! tells the subscriber anything but that a connection dropped. Either
//! way a listener must subscribe again, on the new node, rather than wait
//! on a subscription that is gone. A private cluster per test, since the
//! tests move slots and kill nodes.

use std::pin::Pin;
use std::time::{Duration, Instant};

use futures_util::Stream;
use tokio::task::JoinHandle;

use jobworker::board::{follow, Followed};
use jobworker::redis::RedisBoard;
use jobworker::{Board, NewJob};
use jobworker_tests::{post_until_heard, unique_queue, RedisCluster};

/// The slot of queue `q`'s keys.
fn queue_slot(cluster: &RedisCluster, q: &str) -> u16 {
    cluster.slot_of(&format!("jw:{{{q}}}"))
}

/// A followed event stream.
type Events = Pin<Box<dyn Stream<Item = Followed> + Send>>;

/// Moves queue `q`'s slot to the other master (off the async runtime:
/// the migration blocks), and gives the cluster back.
async fn move_queue(cluster: RedisCluster, q: &str) -> RedisCluster {
    let slot = queue_slot(&cluster, q);
    let from = cluster.port_of_slot(slot);
    let to = *cluster.ports().iter().find(|p| **p != from).unwrap();
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.migrate_slot(slot, to, 100, Duration::ZERO);
        cluster
    })
    .await
    .unwrap();
    assert_eq!(cluster.port_of_slot(slot), to);
    cluster
}

/// Kills the master of queue `q`'s slot for good and waits until its
/// replica took over (off the async runtime's workers: it blocks).
fn fail_over(cluster: &mut RedisCluster, q: &str) {
    let slot = queue_slot(cluster, q);
    tokio::task::block_in_place(|| cluster.kill_master_of(slot));
}

/// A board on `cluster`, a new queue named after `name`, and an event
/// stream followed on the board that has heard a post to it.
async fn listening(cluster: &RedisCluster, name: &str) -> (RedisBoard, String, Events) {
    let board = RedisBoard::connect(&cluster.url()).await.unwrap();
    let q = unique_queue(name);
    let mut events: Events = Box::pin(follow(board.clone(), false));
    post_until_heard(&board, &q, &mut events).await;
    (board, q, events)
}

/// How long a worker's wait in these tests would last unwoken.
const LONG_WAIT: Duration = Duration::from_secs(600);

/// A worker's wait on `q` (for [`LONG_WAIT`]), in a task.
fn spawn_wait(board: &RedisBoard, q: &str) -> JoinHandle<jobworker::Result<bool>> {
    let (board, q) = (board.clone(), q.to_owned());
    tokio::spawn(async move { board.wait(&[&q], LONG_WAIT).await })
}

/// Waits until the node serving queue `q` counts a subscriber on its
/// notify channel.
async fn wait_subscribed(cluster: &RedisCluster, board: &RedisBoard, q: &str) {
    let port = cluster.port_of_slot(queue_slot(cluster, q));
    let channel = board.keys(q).unwrap().notify.clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg(&channel)
            .query(&mut cluster.node(port))
            .unwrap();
        if counts.first().is_some_and(|(_, n)| *n > 0) {
            return;
        }
        assert!(Instant::now() < deadline, "the wait never subscribed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Events followed on a cluster go on after the queue's slot moves to
/// another master.
#[tokio::test(flavor = "multi_thread")]
async fn events_are_followed_across_a_slot_move() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(2))
        .await
        .unwrap();
    let (board, q, mut events) = listening(&cluster, "moving-events").await;

    let _cluster = move_queue(cluster, &q).await;
    post_until_heard(&board, &q, &mut events).await;
}

/// A worker's wait on a cluster ends when its queue's slot moves (its
/// subscription is gone with the slot), rather than wait out its timeout
/// deaf; the next wait subscribes on the new node and hears a post.
#[tokio::test(flavor = "multi_thread")]
async fn a_wait_ends_when_its_slot_moves_and_the_next_one_hears_posts() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(2))
        .await
        .unwrap();
    let board = RedisBoard::connect(&cluster.url()).await.unwrap();
    let q = unique_queue("moving-wait");
    let first = spawn_wait(&board, &q);
    wait_subscribed(&cluster, &board, &q).await;
    let _cluster = move_queue(cluster, &q).await;
    // It fails: its connection ended (the caller opens another).
    let ended = tokio::time::timeout(Duration::from_secs(60), first).await;
    assert!(
        matches!(ended, Ok(Ok(Err(_)))),
        "the wait did not end after its slot moved: {ended:?}"
    );

    let next = spawn_wait(&board, &q);
    board.post(&q, NewJob::new("heard")).await.unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(60), next).await;
    assert!(matches!(heard, Ok(Ok(Ok(true)))), "{heard:?}");
}

/// `CLUSTER SLOTS` calls the nodes of `cluster` ran since their stats
/// were reset.
fn cluster_slots_calls(cluster: &RedisCluster) -> u64 {
    cluster
        .ports()
        .into_iter()
        .map(|port| {
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query(&mut cluster.node(port))
                .unwrap();
            info.lines()
                .find_map(|line| line.strip_prefix("cmdstat_cluster|slots:calls="))
                .and_then(|rest| rest.split(',').next())
                .map_or(0, |calls| calls.parse::<u64>().unwrap())
        })
        .sum()
}

/// An event stream over many queues looks once where their channels are
/// served, not once per queue: its start costs a round trip per queue,
/// not two.
#[tokio::test(flavor = "multi_thread")]
async fn a_stream_over_many_queues_looks_once_where_they_are_served() {
    const QUEUES: usize = 30;
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(2))
        .await
        .unwrap();
    let board = RedisBoard::connect(&cluster.url()).await.unwrap();
    let queues: Vec<String> = (0..QUEUES).map(|_| unique_queue("many")).collect();
    for q in &queues {
        board.post(q, NewJob::new("registers")).await.unwrap();
    }
    for port in cluster.ports() {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut cluster.node(port))
            .unwrap();
    }

    let mut events: Events = Box::pin(follow(board.clone(), false));
    post_until_heard(&board, &queues[QUEUES - 1], &mut events).await;
    let looks = cluster_slots_calls(&cluster);
    // redis-rs asks each node once as the connection opens; a look every
    // 5 s while the stream waits.
    assert!(
        (1..10).contains(&looks),
        "{looks} CLUSTER SLOTS calls for {QUEUES} queues"
    );
}

/// Events followed on a cluster go on after the master of the queue's
/// slot dies for good and its replica takes over.
#[tokio::test(flavor = "multi_thread")]
async fn events_are_followed_across_a_failover() {
    // Started on this thread: the nodes live as long as it does.
    let mut cluster = RedisCluster::start_with_replicas(3);
    let (board, q, mut events) = listening(&cluster, "failover-events").await;

    fail_over(&mut cluster, &q);
    post_until_heard(&board, &q, &mut events).await;
}

/// A replica that dies drops a node connection of every cluster listener
/// too (redis-rs holds one to each node), but no slot changes its master:
/// an event stream goes on without a gap.
#[tokio::test(flavor = "multi_thread")]
async fn events_are_followed_without_a_gap_when_a_replica_dies() {
    let mut cluster = RedisCluster::start_with_replicas(3);
    let (board, q, mut events) = listening(&cluster, "replica-events").await;

    tokio::task::block_in_place(|| cluster.kill_a_replica());
    // Time for a listener's look at where its channels are served (every
    // 5 s) to run after the drop.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let other = post_until_heard(&board, &q, &mut events).await;
    assert!(
        !other.iter().any(|item| matches!(item, Followed::Closed)),
        "the stream closed: {other:?}"
    );
}

/// A worker's wait on a cluster ends when the master of its queue's slot
/// dies (its subscription went with it), rather than wait out its timeout
/// deaf once the replica took over; the next wait hears a post.
#[tokio::test(flavor = "multi_thread")]
async fn a_wait_ends_when_its_master_dies_and_the_next_one_hears_posts() {
    let mut cluster = RedisCluster::start_with_replicas(3);
    let board = RedisBoard::connect(&cluster.url()).await.unwrap();
    let q = unique_queue("failover-wait");
    let first = spawn_wait(&board, &q);
    wait_subscribed(&cluster, &board, &q).await;

    fail_over(&mut cluster, &q);
    let ended = tokio::time::timeout(Duration::from_secs(60), first).await;
    assert!(
        matches!(ended, Ok(Ok(Err(_)))),
        "the wait did not end after its master died: {ended:?}"
    );
    let next = spawn_wait(&board, &q);
    let heard = async {
        loop {
            board.post(&q, NewJob::new("heard")).await.unwrap();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    let heard = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::select! {
            woken = next => woken,
            _ = heard => unreachable!("posting never ends"),
        }
    })
    .await;
    assert!(matches!(heard, Ok(Ok(Ok(true)))), "{heard:?}");
}
