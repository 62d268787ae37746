//! TCP keepalive and a user timeout on every connection to Redis, so that
//! a connection whose peer is gone without a word (a cut link, a host
//! that died, a NAT or load balancer that dropped an idle flow) fails
//! within about a minute and is opened again, instead of taking calls
//! that time out one by one until the kernel gives up on it (about 15
//! minutes). redis-rs reconnects after a dropped connection, not after a
//! timed-out call; a pub/sub connection that waits for messages sends
//! nothing, so without probes nothing would ever notice.

use std::time::Duration;

use redis::io::tcp::{socket2::TcpKeepalive, TcpSettings};

/// Idle time before the first keepalive probe.
pub(crate) const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);

/// Time between probes.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// How long sent data or probes may go unacknowledged before the kernel
/// drops the connection (`TCP_USER_TIMEOUT`; with keepalive it also ends
/// the probing).
pub(crate) const USER_TIMEOUT: Duration = Duration::from_secs(30);

/// The TCP settings of every connection to a Redis server or sentinel.
pub(crate) fn tcp_settings() -> TcpSettings {
    let keepalive = TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL);
    TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive)
        .set_user_timeout(USER_TIMEOUT)
}
