//! `rediss://` against a real TLS `redis-server` whose certificate is signed
//! by a private CA, given to jobworker through `JOBWORKER_REDIS_CA`.
//!
//! The CA and the server certificate (for `localhost`, SAN `DNS:localhost`
//! and `IP:127.0.0.1`) are made with the `openssl` command line in a temp
//! dir. The server is a `jobworker::embedded::RedisServer` (plain loopback
//! port for its readiness probe) with a TLS port added; it is stopped by PID
//! when dropped.
//!
//! Environment variables are process-global and the tests of this file run
//! as threads of one process, so everything that depends on
//! `JOBWORKER_REDIS_CA` stays in one test function.

use jobworker_tests::copy_of;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::RedisBoard;
use jobworker::{Board, NewJob};
use jobworker_tests::{make_certs, unique_queue, wait_for_blocking, Certs};
use tempfile::TempDir;

/// The variable `jobworker::redis` reads the CA path from.
const CA_ENV: &str = "JOBWORKER_REDIS_CA";
/// How long the TLS port may take to accept TCP connections.
const READY_DEADLINE: Duration = Duration::from_secs(10);
/// How many fresh TLS ports to try when the one picked is lost to a race.
const PORT_ATTEMPTS: usize = 3;

/// A free loopback port: bind port 0, read it, release it.
fn free_port() -> u16 {
    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .and_then(|l| l.local_addr())
        .expect("cannot pick a free loopback port")
        .port()
}

/// Waits until `127.0.0.1:port` accepts TCP connections.
fn wait_accepting(port: u16) {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let what = format!("TLS port {port} to accept connections");
    wait_for_blocking(&what, READY_DEADLINE, || {
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()
    });
}

/// A `redis-server` with a plain loopback port (for the readiness probe of
/// `RedisServer`) and a TLS port; returns it and the TLS port. It is stopped
/// by PID when dropped, and dies with the calling thread.
fn start_tls_server(certs: &Certs) -> (RedisServer, u16) {
    let mut last = String::new();
    for _ in 0..PORT_ATTEMPTS {
        let tls_port = free_port();
        let extra_args = [
            ("--tls-port", tls_port.to_string()),
            ("--tls-cert-file", certs.cert.display().to_string()),
            ("--tls-key-file", certs.key.display().to_string()),
            ("--tls-ca-cert-file", certs.ca.display().to_string()),
            ("--tls-auth-clients", "no".to_owned()),
        ]
        .into_iter()
        .flat_map(|(name, value)| [name.to_owned(), value])
        .collect();
        match RedisServer::start(ServerOptions {
            extra_args,
            ..ServerOptions::default()
        }) {
            Ok(server) => {
                wait_accepting(tls_port);
                return (server, tls_port);
            }
            // Only a lost port is worth another try.
            Err(e) if e.message().contains("Address already in use") => last = e.to_string(),
            Err(e) => panic!("cannot start a TLS redis-server: {e}"),
        }
    }
    panic!("cannot start a TLS redis-server after {PORT_ATTEMPTS} attempts: {last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn rediss_with_a_private_ca() {
    let tmp = TempDir::new().unwrap();
    let certs = make_certs(tmp.path());
    // Started from the test thread (the body runs there): the server lives
    // until `server` is dropped at the end of this function.
    let (server, tls_port) = start_tls_server(&certs);
    let url = format!("rediss://localhost:{tls_port}/");

    // Without the CA, the server's certificate is not trusted.
    std::env::remove_var(CA_ENV);
    let err = RedisBoard::connect(&url)
        .await
        .expect_err("connecting without the private CA must fail");
    // A certificate problem is a config error (exit 2) that says what to do.
    assert!(err.is_invalid(), "{err:?}");
    assert!(err.message().contains(&url), "the error must name {url}: {err}");
    assert!(err.message().contains(CA_ENV), "the error names the fix: {err}");

    // With the CA, it is.
    std::env::set_var(CA_ENV, &certs.ca);
    let board = RedisBoard::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("{url} with {CA_ENV}={}: {e}", certs.ca.display()));
    let q = unique_queue("tls");
    let id = board.post(&q, NewJob::new("tls")).await.unwrap();
    let claimed = board.claim(&[&q], "w", Duration::from_secs(30), 1).await.unwrap();
    assert_eq!(claimed.len(), 1, "{claimed:?}");
    assert_eq!(*claimed[0].lease.job(), id);
    board.consume(copy_of(&claimed[0].lease)).await.unwrap();
    assert_eq!(board.job_count(&q).await.unwrap(), 0);

    std::env::remove_var(CA_ENV);
    drop(board);
    drop(server);
}
