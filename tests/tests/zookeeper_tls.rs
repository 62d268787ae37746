//! TLS to ZooKeeper against a real server's `secureClientPort` (Netty, a
//! private CA's certificate for `localhost` and `127.0.0.1`): a board with
//! the CA and a client certificate posts, claims and consumes; without
//! TLS, with another CA, or without the client certificate the server asks
//! for, it does not connect, and says why.

use std::time::Duration;

use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions, ZooKeeperTls};
use jobworker::{Board, JobState, NewJob};
use jobworker_tests::{make_certs, unique_queue, TlsZooKeeper};

const LONG: Duration = Duration::from_secs(120);

fn options(zk: &TlsZooKeeper, tls: Option<ZooKeeperTls>) -> ZooKeeperOptions {
    options_as(zk, "", tls)
}

/// Options for `user:password@` (`credentials`, or `""` for none).
fn options_as(zk: &TlsZooKeeper, credentials: &str, tls: Option<ZooKeeperTls>) -> ZooKeeperOptions {
    let mut opts = ZooKeeperOptions::new(format!("{credentials}{}/tls", zk.secure_connect_string()));
    opts.session_timeout = Duration::from_secs(4);
    opts.tls = tls;
    opts
}

#[tokio::test]
async fn a_board_with_the_ca_and_a_client_certificate_works_over_tls() {
    let zk = TlsZooKeeper::start("need").expect("start a TLS ZooKeeper");
    let c = &zk.certs;
    let tls = ZooKeeperTls::new(&c.ca).with_identity(&c.client_cert, &c.client_key);
    let board = ZooKeeperBoard::connect(options(&zk, Some(tls)))
        .await
        .expect("connect over TLS");
    let q = unique_queue("tls");
    let id = board.post(&q, NewJob::new("secure")).await.unwrap();
    let got = board.claim(&[&q], "w", LONG, 1).await.unwrap().remove(0);
    assert_eq!(got.lease.job(), id);
    board.consume(got.lease).await.unwrap();
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Completed);

    // Digest credentials over TLS: the znodes are closed to others (read
    // here through the server's plain port).
    let tls = ZooKeeperTls::new(&c.ca).with_identity(&c.client_cert, &c.client_key);
    let authed = ZooKeeperBoard::connect(options_as(&zk, "app:pw@", Some(tls)))
        .await
        .expect("connect over TLS with credentials");
    let closed = unique_queue("tls-digest");
    authed.post(&closed, NewJob::new("secret")).await.unwrap();
    let jobs = authed.jobs_path(&closed).unwrap();
    let plain = zk.server.client().await;
    let children = plain.list_children(&jobs).await;
    assert_eq!(children.err(), Some(zookeeper_client::Error::NoAuth));
}

#[tokio::test]
async fn without_tls_another_ca_or_the_client_certificate_it_does_not_connect() {
    let zk = TlsZooKeeper::start("need").expect("start a TLS ZooKeeper");
    let c = &zk.certs;
    let e = ZooKeeperBoard::connect(options(&zk, None))
        .await
        .expect_err("a plain connection to the TLS port fails");
    assert!(e.is_unavailable(), "{e}");

    let other = tempfile::tempdir().unwrap();
    let strangers = make_certs(other.path());
    let tls = ZooKeeperTls::new(&strangers.ca).with_identity(&c.client_cert, &c.client_key);
    let e = ZooKeeperBoard::connect(options(&zk, Some(tls)))
        .await
        .expect_err("a server certificate of another CA is refused");
    assert!(e.is_unavailable(), "{e}");

    let e = ZooKeeperBoard::connect(options(&zk, Some(ZooKeeperTls::new(&c.ca))))
        .await
        .expect_err("the server asks for a client certificate");
    assert!(e.is_unavailable(), "{e}");

    let e = ZooKeeperBoard::connect(options(
        &zk,
        Some(ZooKeeperTls::new(other.path().join("missing.pem"))),
    ))
    .await
    .expect_err("a missing CA file");
    assert!(e.message().contains("missing.pem"), "{e}");
}

#[tokio::test]
async fn a_server_that_asks_for_no_client_certificate_needs_only_the_ca() {
    let zk = TlsZooKeeper::start("none").expect("start a TLS ZooKeeper");
    let board = ZooKeeperBoard::connect(options(&zk, Some(ZooKeeperTls::new(&zk.certs.ca))))
        .await
        .expect("connect over TLS with the CA alone");
    let q = unique_queue("tls-ca");
    board.post(&q, NewJob::new("secure")).await.unwrap();
    assert_eq!(board.job_count(&q).await.unwrap(), 1);
}

/// A Netty server can answer the credentials before the connect request
/// when both come in one TLS record; the client then misread the answer
/// as the connect response and failed about one connect in ten. Twenty
/// sessions in a row all connect.
#[tokio::test]
async fn sessions_with_credentials_over_tls_connect_every_time() {
    let zk = TlsZooKeeper::start("need").expect("start a TLS ZooKeeper");
    let c = &zk.certs;
    for i in 0..20 {
        let tls = ZooKeeperTls::new(&c.ca).with_identity(&c.client_cert, &c.client_key);
        let board = ZooKeeperBoard::connect(options_as(&zk, "app:pw@", Some(tls)))
            .await
            .unwrap_or_else(|e| panic!("session {i}: {e}"));
        let q = unique_queue("tls-again");
        board.post(&q, NewJob::new("secure")).await.unwrap();
    }
}
