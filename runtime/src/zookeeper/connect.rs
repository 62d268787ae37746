//! Connecting a ZooKeeper session: the connect attempts, and when the
//! digest credentials go to the server.

use std::time::{Duration, Instant};

use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::zookeeper::access::Access;
use crate::zookeeper::tls::ZooKeeperTls;

/// Connect attempts before a board reports the servers unreachable.
const CONNECT_ATTEMPTS: u32 = 5;

/// Connects a new session on the session thread's runtime, trying again
/// (within the session timeout) after a failed attempt.
///
/// Credentials are sent once the session is established, not with the
/// connect request: a Netty server (the one that serves TLS) can answer
/// them before the connect itself, and zookeeper-client 0.11 then fails
/// the attempt ("unable to unmarshal ConnectResponse"; about one connect
/// in ten over TLS, and once it starts, again and again). A server that
/// enforces authentication (`enforce.auth.enabled`) refuses a session's
/// first request before credentials: there they go with the connect
/// request, and a failed attempt is tried again.
pub(crate) async fn connect_on(
    runtime: &tokio::runtime::Handle,
    hosts: &str,
    timeout: Duration,
    access: &Access,
    tls: Option<&ZooKeeperTls>,
) -> Result<zk::Client> {
    let started = Instant::now();
    let mut connector = zk::Client::connector()
        .with_session_timeout(timeout)
        .with_fail_eagerly();
    if let Some(tls) = tls {
        connector = connector.with_tls(tls.options()?);
    }
    let mut enforced = false;
    let mut attempt = 1;
    loop {
        let connector = match enforced {
            true => access.authenticate(connector.clone()),
            false => connector.clone(),
        };
        let (connect, secure) = (hosts.to_owned(), tls.is_some());
        let task = runtime.spawn(async move {
            match secure {
                true => connector.secure_connect(&connect).await,
                false => connector.connect(&connect).await,
            }
        });
        let connected = match task.await {
            Ok(Ok(client)) if enforced => return Ok(client),
            Ok(Ok(client)) => access.authenticate_session(&client).await.map(|()| client),
            Ok(Err(e)) => Err(e),
            Err(e) => {
                return Err(Error::unavailable(format!(
                    "cannot connect to zookeeper at {hosts}: the session thread failed: {e}"
                )))
            }
        };
        let err = match connected {
            Ok(client) => return Ok(client),
            Err(e) => e,
        };
        if err == zk::Error::AuthFailed && !enforced && access.has_credentials() {
            enforced = true;
        } else if attempt >= CONNECT_ATTEMPTS || err == zk::Error::AuthFailed || started.elapsed() >= timeout
        {
            return Err(Error::unavailable(format!(
                "cannot connect to zookeeper at {hosts} (after {:?}, {attempt} attempts): {err}",
                started.elapsed()
            )));
        } else {
            tokio::time::sleep(Duration::from_millis(20 * u64::from(attempt))).await;
        }
        attempt += 1;
    }
}
