//! Sharded pub/sub on a Redis Cluster whose slots move: a queue's channels
//! live on the node that serves its slot, and when the slot moves the
//! server drops the subscription (it pushes an SUNSUBSCRIBE nobody asked
//! for). A listener must then subscribe again, on the new node, rather
//! than wait on a subscription that is gone. A private cluster, since the
//! test moves its slots.

use std::time::{Duration, Instant};

use jobworker::board::follow;
use jobworker::redis::RedisBoard;
use jobworker::{Board, NewJob};
use jobworker_tests::{post_until_heard, unique_queue, RedisCluster};

/// Moves queue `q`'s slot to the other master (off the async runtime:
/// the migration blocks), and gives the cluster back.
async fn move_queue(cluster: RedisCluster, q: &str) -> RedisCluster {
    let slot = cluster.slot_of(&format!("jw:{{{q}}}"));
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

/// Events followed on a cluster go on after the queue's slot moves to
/// another master.
#[tokio::test(flavor = "multi_thread")]
async fn events_are_followed_across_a_slot_move() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(2))
        .await
        .unwrap();
    let board = RedisBoard::connect(&cluster.url()).await.unwrap();
    let q = unique_queue("moving-events");
    let mut events = Box::pin(follow(board.clone(), false));
    post_until_heard(&board, &q, &mut events).await;

    let _cluster = move_queue(cluster, &q).await;
    post_until_heard(&board, &q, &mut events).await;
}

/// A worker's wait on a cluster ends when its queue's slot moves (its
/// subscription is gone with the slot), rather than wait out its timeout
/// deaf; the next wait subscribes on the new node and hears a post.
#[tokio::test(flavor = "multi_thread")]
async fn a_wait_ends_when_its_slot_moves_and_the_next_one_hears_posts() {
    const LONG_WAIT: Duration = Duration::from_secs(600);
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(2))
        .await
        .unwrap();
    let board = RedisBoard::connect(&cluster.url()).await.unwrap();
    let q = unique_queue("moving-wait");
    let wait = |board: RedisBoard, q: String| tokio::spawn(async move { board.wait(&[&q], LONG_WAIT).await });
    let first = wait(board.clone(), q.clone());
    // Subscribed once the queue's node counts a subscriber on its channel.
    let from = cluster.port_of_slot(cluster.slot_of(&format!("jw:{{{q}}}")));
    let channel = board.keys(&q).unwrap().notify.clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg(&channel)
            .query(&mut cluster.node(from))
            .unwrap();
        if counts.first().is_some_and(|(_, n)| *n > 0) {
            break;
        }
        assert!(Instant::now() < deadline, "the wait never subscribed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _cluster = move_queue(cluster, &q).await;
    // It fails: its connection ended (the caller opens another).
    let ended = tokio::time::timeout(Duration::from_secs(60), first).await;
    assert!(
        matches!(ended, Ok(Ok(Err(_)))),
        "the wait did not end after its slot moved: {ended:?}"
    );

    let next = wait(board.clone(), q.clone());
    board.post(&q, NewJob::new("heard")).await.unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(60), next).await;
    assert!(matches!(heard, Ok(Ok(Ok(true)))), "{heard:?}");
}
