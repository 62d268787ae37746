//! Session loss and server restarts on the ZooKeeper board, against real
//! servers: private ones that are killed (SIGKILL) and restarted on the
//! same port and data dir, and the shared one.

use jobworker_tests::copy_of;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jobworker::board::{follow, Followed};
use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Board, JobId, JobState, NewJob};
use jobworker_tests::{post_until_heard, shared_zookeeper, unique_queue, wait_until, ZooKeeperServer};
use zookeeper_client as zk;

const LONG: Duration = Duration::from_secs(120);

async fn board_on(connect: &str, session: Duration) -> ZooKeeperBoard {
    let mut opts = ZooKeeperOptions::new(connect);
    opts.session_timeout = session;
    ZooKeeperBoard::connect(opts)
        .await
        .expect("connect to the test ZooKeeper")
}

fn private_server() -> ZooKeeperServer {
    ZooKeeperServer::start(Default::default()).expect("start a private ZooKeeper")
}

/// A board whose session expires while the server is down gets
/// `is_unavailable` meanwhile and `is_not_owner` for its old leases once
/// back; another board claims its jobs as soon as the server drops the old
/// session, and the first board keeps working in a new session.
#[tokio::test(flavor = "multi_thread")]
async fn an_expired_session_loses_its_claims_to_other_boards() {
    let mut server = tokio::task::spawn_blocking(private_server).await.unwrap();
    let connect = format!("{}/jw", server.connect_string());
    let a = board_on(&connect, Duration::from_secs(1)).await;
    let q = unique_queue("expire");
    let mut posted = Vec::new();
    for _ in 0..2 {
        posted.push(a.post(&q, NewJob::new("s")).await.unwrap());
    }
    let held = a.claim(&[&q], "worker-a", LONG, 2).await.unwrap();
    assert_eq!(held.len(), 2);
    let first_session = a.session_id();

    server.kill().unwrap();
    // The client gives the session up 1.4 session timeouts after the last
    // reply; until then requests wait, then fail as unavailable.
    let started = Instant::now();
    let down = a.extend(&held[0].lease, LONG).await.unwrap_err();
    assert!(down.is_unavailable(), "{down}");
    assert!(
        down.message().contains(&server.connect_string()) && down.message().contains(&q),
        "{down}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    let server = tokio::task::spawn_blocking(move || {
        server.restart().unwrap();
        server
    })
    .await
    .unwrap();
    // Back: a new session; the old one's locks are not ours any more.
    let lost = a.extend(&held[0].lease, LONG).await.unwrap_err();
    assert!(lost.is_not_owner(), "{lost}");
    assert_ne!(a.session_id(), first_session);
    assert_eq!(a.sessions_replaced(), 1);

    // The server drops the old session one session timeout after its
    // restart, and with it the locks: another board claims the jobs.
    let b = board_on(&connect, Duration::from_secs(10)).await;
    let taken: Arc<Mutex<Vec<JobId>>> = Arc::default();
    wait_until(
        "the other board to claim both jobs",
        Duration::from_secs(15),
        || {
            let (b, q, taken) = (b.clone(), q.clone(), taken.clone());
            async move {
                for c in b.claim(&[&q], "worker-b", LONG, 2).await.unwrap() {
                    assert_eq!(c.attempt, 1, "a lost session counts no attempt");
                    taken.lock().unwrap().push(c.lease.job().clone());
                }
                taken.lock().unwrap().len() == 2
            }
        },
    )
    .await;
    let mut taken = taken.lock().unwrap().clone();
    taken.sort();
    posted.sort();
    assert_eq!(taken, posted);
    for c in &held {
        let e = a.consume(copy_of(&c.lease)).await.unwrap_err();
        assert!(e.is_not_owner(), "{e}");
    }
    // The first board keeps working in its new session.
    let id = a.post(&q, NewJob::new("after")).await.unwrap();
    let c = a.claim(&[&q], "worker-a", LONG, 1).await.unwrap().remove(0);
    assert_eq!(*c.lease.job(), id);
    a.consume(c.lease).await.unwrap();
    assert_eq!(a.state(&q, &id).await.unwrap(), JobState::Completed);
    drop(server);
}

/// kill -9 and restart of the server within the session timeout: the same
/// board object keeps its session, its claims and its waiters.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_restart_is_survived() {
    let mut server = tokio::task::spawn_blocking(private_server).await.unwrap();
    let connect = format!("{}/jw", server.connect_string());
    let board = board_on(&connect, Duration::from_secs(10)).await;
    let poster = board_on(&connect, Duration::from_secs(10)).await;
    let (q, idle) = (unique_queue("restart"), unique_queue("restart-idle"));
    let first = board.post(&q, NewJob::new("r")).await.unwrap();
    let c = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    let session = board.session_id();
    let waiter = {
        let (board, idle) = (board.clone(), idle.clone());
        tokio::spawn(async move { board.wait(&[&idle], Duration::from_secs(30)).await })
    };

    let restarted = Instant::now();
    server = tokio::task::spawn_blocking(move || {
        server.kill().unwrap();
        server.restart().unwrap();
        server
    })
    .await
    .unwrap();

    // The claim survived with the session; the board goes on.
    board.extend(&c.lease, LONG).await.unwrap();
    assert_eq!(board.find_owner(&q, &first).await.unwrap().as_deref(), Some("w"));
    board.consume(copy_of(&c.lease)).await.unwrap();
    let second = board.post(&q, NewJob::new("r")).await.unwrap();
    let again = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    assert_eq!(*again.lease.job(), second);
    assert!(
        again.lease.token() > c.lease.token(),
        "tokens keep growing across a restart"
    );
    board.consume(again.lease).await.unwrap();
    assert_eq!((board.session_id(), board.sessions_replaced()), (session, 0));

    // The watch of the waiter was set again on reconnect: a post wakes it.
    assert!(!waiter.is_finished(), "the waiter woke without work");
    poster.post(&idle, NewJob::new("wake")).await.unwrap();
    let woke = tokio::time::timeout(Duration::from_secs(10), waiter).await;
    assert!(woke.expect("the waiter to wake").unwrap().unwrap());
    assert!(restarted.elapsed() < Duration::from_secs(20));
    drop(server);
}

/// Closing a board (its last clone dropped) ends its session: its claims go
/// at once, as taskflow's do; a heartbeat from another board is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_closed_session_releases_its_claims_at_once() {
    let connect = format!("{}/jw-close", shared_zookeeper().connect_string());
    let claimer = board_on(&connect, Duration::from_secs(10)).await;
    let heartbeat = board_on(&connect, Duration::from_secs(10)).await;
    let q = unique_queue("close");
    let id = claimer.post(&q, NewJob::new("c")).await.unwrap();
    let lease = claimer.claim(&[&q], "w1", LONG, 1).await.unwrap().remove(0).lease;
    // Ownership is the owner string: another session may extend it.
    heartbeat.extend(&lease, LONG).await.unwrap();
    drop(claimer);
    wait_until(
        "the lock to go with the session",
        Duration::from_secs(5),
        || async { heartbeat.find_owner(&q, &id).await.unwrap().is_none() },
    )
    .await;
    let e = heartbeat.extend(&lease, LONG).await.unwrap_err();
    assert!(e.is_not_owner(), "{e}");
    let c = heartbeat.claim(&[&q], "w2", LONG, 1).await.unwrap().remove(0);
    assert_eq!((c.lease.job(), c.attempt), (&id, 1));
}

/// No server: a clear `is_unavailable` error at once, naming the address.
#[tokio::test]
async fn connecting_to_no_server_is_unavailable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let connect = format!("127.0.0.1:{port}/jw");
    let started = Instant::now();
    let e = ZooKeeperBoard::connect(ZooKeeperOptions::new(&connect))
        .await
        .unwrap_err();
    assert!(e.is_unavailable(), "{e}");
    assert!(e.message().contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let bad = ZooKeeperBoard::connect(ZooKeeperOptions::new("/no-hosts"))
        .await
        .unwrap_err();
    assert!(bad.is_invalid(), "{bad}");
}

/// While no server takes sessions, a board whose session ended tries to
/// connect a new one at a slowing pace, one request at a time, not once
/// per request (a storm of connects during a slow election); the requests
/// that waited meanwhile get the failure; once a server serves again, the
/// board connects.
#[tokio::test(flavor = "multi_thread")]
async fn reconnects_slow_down_while_no_server_serves() {
    const CALLERS: usize = 8;
    const WINDOW: Duration = Duration::from_secs(6);
    let mut server = tokio::task::spawn_blocking(private_server).await.unwrap();
    let connect = format!("{}/jw", server.connect_string());
    let board = board_on(&connect, Duration::from_secs(1)).await;
    let q = unique_queue("paced");
    board.post(&q, NewJob::new("p")).await.unwrap();
    server.kill().unwrap();
    // The first failure comes once the client gave the session up.
    let down = board.job_count(&q).await.unwrap_err();
    assert!(down.is_unavailable(), "{down}");

    let started = Instant::now();
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (board, q) = (board.clone(), q.clone());
            tokio::spawn(async move {
                let mut requests = 0;
                while started.elapsed() < WINDOW {
                    let e = board.job_count(&q).await.unwrap_err();
                    assert!(e.is_unavailable(), "{e}");
                    requests += 1;
                }
                requests
            })
        })
        .collect();
    let mut requests = 0;
    for c in callers {
        requests += c.await.unwrap();
    }
    let connects = board.failed_reconnects();
    // A connect to a dead server fails in about 0.2 s: unpaced, 30 of them
    // would run in the window, one after another. Paced (0.25 s after the
    // first failure, doubled up to 2 s), about 6 do, and every request
    // answered (more than the connects: the waiting ones share one).
    assert!(connects <= 10, "{connects} connects in {WINDOW:?}");
    assert!(
        requests > connects as usize,
        "{requests} requests, {connects} connects"
    );

    let server = tokio::task::spawn_blocking(move || {
        server.restart().unwrap();
        server
    })
    .await
    .unwrap();
    wait_until("the board to connect again", Duration::from_secs(15), || async {
        board.job_count(&q).await.is_ok()
    })
    .await;
    assert_eq!(board.job_count(&q).await.unwrap(), 1);
    assert_eq!(board.sessions_replaced(), 1);
    drop(server);
}

/// A plain ZooKeeper client of `server` (to look at znodes).
async fn plain_client(server: &ZooKeeperServer) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(Duration::from_secs(30))
        .connect(&server.connect_string())
        .await
        .expect("connect to the private ZooKeeper")
}

/// The event stream outlasts the loss of its board's session. Its
/// listener znode is ephemeral, so it goes with the session and boards
/// stop writing events: the stream then ends rather than go silent, and
/// `board::follow` subscribes again (a new listener) in the new session.
#[tokio::test(flavor = "multi_thread")]
async fn events_are_followed_across_an_expired_session() {
    let mut server = tokio::task::spawn_blocking(private_server).await.unwrap();
    let connect = format!("{}/jw", server.connect_string());
    let board = board_on(&connect, Duration::from_secs(1)).await;
    let q = unique_queue("events-expire");
    let mut events = Box::pin(follow(board.clone(), false));
    post_until_heard(&board, &q, &mut events).await;
    let first_session = board.session_id();
    let listeners = |c: zk::Client| async move { c.list_children("/jw/.jw/listeners").await.unwrap() };
    let watcher = plain_client(&server).await;
    let ours = listeners(watcher.clone()).await;
    assert_eq!(ours.len(), 1, "listeners: {ours:?}");
    drop(watcher);

    server.kill().unwrap();
    // The client gives the session up 1.4 session timeouts after the last
    // reply: a post fails meanwhile.
    let down = board.post(&q, NewJob::new("s")).await.unwrap_err();
    assert!(down.is_unavailable(), "{down}");
    let _server = tokio::task::spawn_blocking(move || {
        server.restart().unwrap();
        server
    })
    .await
    .unwrap();
    // The server drops the old session (and its listener) one session
    // timeout after its restart; until then events are still written.
    let watcher = plain_client(&_server).await;
    wait_until("the old session's listener to go", LONG, || {
        let (watcher, ours) = (watcher.clone(), ours.clone());
        async move { !listeners(watcher).await.contains(&ours[0]) }
    })
    .await;
    let between = post_until_heard(&board, &q, &mut events).await;
    assert_ne!(board.session_id(), first_session);
    assert!(
        between.iter().any(|g| matches!(g, Followed::Closed))
            && between.iter().any(|g| matches!(g, Followed::Open)),
        "{between:?}"
    );
}
