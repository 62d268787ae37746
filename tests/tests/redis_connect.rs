//! Connection handling: unix sockets, passwords and ACL users, clear
//! errors, and surviving a redis-server kill -9 + restart with AOF on.

use jobworker_tests::copy_of;
use std::collections::HashSet;
use std::time::{Duration, Instant};

use jobworker::embedded::{RedisServer, ServerOptions, Transport};
use jobworker::redis::RedisBoard;
use jobworker::{Board, NewJob};
use jobworker_tests::unique_queue;

const LONG: Duration = Duration::from_secs(300);

#[tokio::test]
async fn unix_socket_url_works() {
    let server = RedisServer::start(ServerOptions {
        transport: Transport::Unix,
        ..Default::default()
    })
    .unwrap();
    assert!(server.url().starts_with("unix://"), "{}", server.url());
    let board = RedisBoard::connect(&server.url()).await.unwrap();
    let q = unique_queue("unix");
    let id = board.post(&q, NewJob::new("u")).await.unwrap();
    assert_eq!(
        *board.claim(&[&q], "w", LONG, 1).await.unwrap()[0].lease.job(),
        id
    );
}

#[tokio::test]
async fn password_and_acl_user_in_the_url() {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let mut con = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg("on")
        .arg(">apppw")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .query_async(&mut con)
        .await
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("s3cret")
        .query_async(&mut con)
        .await
        .unwrap();
    let port = server.port().unwrap();
    for url in [
        format!("redis://:s3cret@127.0.0.1:{port}/"),
        format!("redis://app:apppw@127.0.0.1:{port}/"),
    ] {
        let board = RedisBoard::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        board.post(&unique_queue("auth"), NewJob::new("a")).await.unwrap();
    }
    // Wrong or missing credentials are a config error (exit 2), not an
    // unreachable server.
    let err = RedisBoard::connect(&format!("redis://app:wrong@127.0.0.1:{port}/"))
        .await
        .unwrap_err();
    assert!(
        err.is_invalid() && err.message().contains("refused the credentials"),
        "{err}"
    );
    assert!(
        !err.message().contains("wrong"),
        "the password must not appear in errors: {err}"
    );
    let err = RedisBoard::connect(&format!("redis://127.0.0.1:{port}/"))
        .await
        .unwrap_err();
    assert!(
        err.is_invalid() && err.message().contains("refused the credentials"),
        "{err}"
    );
}

/// Seen: `redis://…/99` (a database the server does not have) was reported
/// as "cannot reach redis" (exit 4), and a server that is not Redis as
/// "Parse error at 1 / Unexpected `84`". Both are config errors now, with a
/// message that says what to check.
#[tokio::test]
async fn a_bad_database_and_a_server_that_is_not_redis_are_config_errors() {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let port = server.port().unwrap();
    let err = RedisBoard::connect(&format!("redis://127.0.0.1:{port}/99"))
        .await
        .unwrap_err();
    assert!(err.is_invalid(), "{err}");
    assert!(
        err.message().contains("no such database") && !err.message().contains('\n'),
        "{err}"
    );

    // A server that answers like HTTP.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 256];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let err = RedisBoard::connect(&format!("redis://127.0.0.1:{http}/"))
        .await
        .unwrap_err();
    assert!(err.is_invalid(), "{err}");
    assert!(
        err.message().contains("does not speak the Redis protocol") && !err.message().contains('\n'),
        "{err}"
    );
}

#[tokio::test]
async fn unreachable_server_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let start = Instant::now();
    let err = RedisBoard::connect(&format!("redis://127.0.0.1:{port}/"))
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert!(err.message().contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "took {:?}",
        start.elapsed()
    );
    let err = RedisBoard::connect("nonsense://x").await.unwrap_err();
    assert!(err.is_invalid(), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_and_restart_with_aof_loses_nothing() {
    let mut server = RedisServer::start(ServerOptions {
        appendonly: true,
        ..Default::default()
    })
    .unwrap();
    let board = RedisBoard::connect(&server.url()).await.unwrap();
    let q = unique_queue("restart");
    let mut posted = HashSet::new();
    for i in 0..200u32 {
        posted.insert(board.post(&q, NewJob::new("r").args(&i).unwrap()).await.unwrap());
    }
    let held = board.claim(&[&q], "w-before", LONG, 10).await.unwrap();
    // appendfsync everysec: give the last second a chance to reach the disk
    // (kept: this Redis has no WAITAOF to wait for the fsync itself).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.kill().unwrap();
    server.restart().unwrap();

    // The same board object reconnects by itself.
    assert_eq!(board.job_count(&q).await.unwrap(), 200);
    for c in &held {
        board.consume(copy_of(&c.lease)).await.unwrap();
    }
    let mut done: HashSet<_> = held.into_iter().map(|c| c.lease.job().clone()).collect();
    loop {
        let got = board.claim(&[&q], "w-after", LONG, 50).await.unwrap();
        if got.is_empty() {
            break;
        }
        for c in got {
            assert!(done.insert(c.lease.job().clone()), "claimed twice");
            board.consume(c.lease).await.unwrap();
        }
    }
    assert_eq!(
        done, posted,
        "every job posted before the kill is processed once after it"
    );
    // New posts work after the restart too.
    board.post(&q, NewJob::new("after")).await.unwrap();
}

/// A bulk post whose connection drops midway goes on once it is back: the
/// calls that got no answer are sent again as themselves, and every job is
/// posted, once (none twice, though some calls ran before the cut).
#[tokio::test(flavor = "multi_thread")]
async fn a_bulk_post_cut_by_a_dropped_connection_posts_each_job_once() {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let board = RedisBoard::connect(&server.url()).await.unwrap();
    let q = unique_queue("bulk-drop");
    let jobs: Vec<NewJob> = (0..100_000)
        .map(|i| NewJob::new("bulk").id(format!("bulk-{i:06}")))
        .collect();
    let keys = board.keys(&q).unwrap();
    let (listings, ready) = (keys.listings().to_owned(), keys.ready().to_owned());
    let listed_key = listings.clone();
    let mut posting = board.connection();
    let id: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut posting)
        .await
        .unwrap();
    // Another connection cuts the board's once the bulk is under way.
    let mut other = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let cutter = tokio::spawn(async move {
        loop {
            let listed: usize = redis::cmd("HLEN")
                .arg(&listings)
                .query_async(&mut other)
                .await
                .unwrap();
            if listed >= 2_000 {
                let killed: i64 = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("ID")
                    .arg(id)
                    .query_async(&mut other)
                    .await
                    .unwrap();
                return (listed, killed);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    let results = board.post_many(&q, &jobs).await.unwrap();
    let (listed_at_cut, killed) = cutter.await.unwrap();
    assert_eq!(killed, 1, "the bulk's connection was cut");
    eprintln!("{listed_at_cut} listed at the cut");
    assert_eq!(results.len(), jobs.len());
    for (i, result) in results.iter().enumerate() {
        let got = result.as_ref().unwrap_or_else(|e| panic!("job {i}: {e}"));
        assert_eq!(got.as_str(), format!("bulk-{i:06}"));
    }
    let mut con = board.connection();
    let listed: HashSet<String> = redis::cmd("HKEYS")
        .arg(&listed_key)
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(listed.len(), jobs.len(), "every job is on the board");
    let indexed: usize = redis::cmd("ZCARD")
        .arg(&ready)
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(indexed, jobs.len(), "every job is ready");
}

/// The TCP options of this process's sockets connected to `port`:
/// (SO_KEEPALIVE, TCP_KEEPIDLE s, TCP_USER_TIMEOUT ms, TCP_NODELAY).
fn socket_options_to(port: u16) -> Vec<(i32, i32, i32, i32)> {
    let option = |fd: i32, level: i32, name: i32| {
        let mut value: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a c_int-sized buffer for an int-valued socket option.
        unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut libc::c_int).cast(), &mut len) };
        value
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let mut peer: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: a sockaddr_in-sized buffer; fails harmlessly on other fds.
        let named = unsafe { libc::getpeername(fd, (&mut peer as *mut libc::sockaddr_in).cast(), &mut len) };
        if named != 0 || i32::from(peer.sin_family) != libc::AF_INET || u16::from_be(peer.sin_port) != port {
            continue;
        }
        found.push((
            option(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE),
            option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE),
            option(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT),
            option(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY),
        ));
    }
    found
}

/// Every connection a board opens (commands, and the pub/sub connection
/// a wait keeps) has keepalive probes after 30 s idle, a 30 s user
/// timeout and no Nagle delay: a connection whose peer vanished without
/// a word (a cut link, a NAT that dropped the flow) fails within about a
/// minute and is opened again.
#[tokio::test]
async fn every_connection_of_a_board_has_keepalive_and_a_user_timeout() {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let port: u16 = server
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let board = RedisBoard::connect(&server.url()).await.unwrap();
    let q = unique_queue("keepalive");
    board.post(&q, NewJob::new("k")).await.unwrap();
    board
        .wait_as(&[&q], Some("w"), Duration::from_millis(10))
        .await
        .unwrap();
    let sockets = socket_options_to(port);
    assert!(sockets.len() >= 2, "command and pub/sub connections: {sockets:?}");
    for options in sockets {
        assert_eq!(
            options,
            (1, 30, 30_000, 1),
            "(keepalive, idle s, user timeout ms, nodelay)"
        );
    }
}
