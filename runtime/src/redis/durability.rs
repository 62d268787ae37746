//! Write durability (`--durability wait:N[:ms]`): every call to the board
//! that may write is followed by `WAIT N ms`, and a call is acknowledged
//! only once N replicas hold everything the connection wrote, so that an
//! acknowledged post or consume survives a failover to one of them. A call
//! whose writes did not reach N replicas in time fails with
//! [`Error::is_unavailable`] (its writes are on the master and may or may
//! not survive). A plain read (`HMGET`, `ZRANGE`, `INFO`, …) goes without
//! a `WAIT`: it wrote nothing to acknowledge, and it answers while the
//! replicas lag.
//!
//! The cost is one more round trip per call that may write, plus the
//! replicas' lag: see `docs/scaling.md`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};

/// How long a call waits for its replicas when `wait:N` gives no time.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(1);
/// The longest wait allowed (well within a call's 10 s response timeout).
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(5);

/// How many replicas must hold a call's writes before it is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durability {
    /// Replicas that must acknowledge (WAIT's numreplicas, at least 1).
    pub replicas: u32,
    /// How long to wait for them (WAIT's timeout; above zero).
    pub timeout: Duration,
}

impl FromStr for Durability {
    type Err = Error;

    /// Parses `wait:N` or `wait:N:MS`.
    fn from_str(s: &str) -> Result<Durability> {
        let bad = || {
            Error::invalid(format!(
                "--durability {s:?} must look like wait:N or wait:N:MS (N replicas, at least 1, \
                 acknowledge each write within MS milliseconds, 1 to {}, default {})",
                MAX_WAIT.as_millis(),
                DEFAULT_WAIT.as_millis()
            ))
        };
        let mut parts = s.strip_prefix("wait:").ok_or_else(bad)?.split(':');
        let replicas: u32 = parts.next().and_then(|n| n.parse().ok()).ok_or_else(bad)?;
        let timeout = match parts.next() {
            Some(ms) => Duration::from_millis(ms.parse().map_err(|_| bad())?),
            None => DEFAULT_WAIT,
        };
        if replicas == 0 || timeout.is_zero() || timeout > MAX_WAIT || parts.next().is_some() {
            return Err(bad());
        }
        Ok(Durability { replicas, timeout })
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wait:{}:{}", self.replicas, self.timeout.as_millis())
    }
}

/// What a write too few replicas acknowledged fails with.
const SHORT: &str = "write not acknowledged by enough replicas";

/// The commands that never write, sent without a `WAIT`. Anything else
/// (scripts and functions included, `FUNCTION LIST` too) counts as a write.
const READS: &[&[u8]] = &[
    b"EXISTS",
    b"GET",
    b"HEXISTS",
    b"HGET",
    b"HGETALL",
    b"HKEYS",
    b"HLEN",
    b"HMGET",
    b"HSCAN",
    b"INFO",
    b"LLEN",
    b"LRANGE",
    b"MGET",
    b"PING",
    b"PTTL",
    b"ROLE",
    b"SCAN",
    b"SCARD",
    b"SISMEMBER",
    b"SMEMBERS",
    b"SRANDMEMBER",
    b"TIME",
    b"TTL",
    b"TYPE",
    b"ZCARD",
    b"ZCOUNT",
    b"ZRANGE",
    b"ZRANGEBYSCORE",
    b"ZSCORE",
];

/// Whether `cmd` may write (its name is not one of [`READS`]).
pub(crate) fn may_write(cmd: &redis::Cmd) -> bool {
    match cmd.args_iter().next() {
        Some(redis::Arg::Simple(name)) => !READS.iter().any(|r| r.eq_ignore_ascii_case(name)),
        _ => true,
    }
}

/// True for the error of a write too few replicas acknowledged.
pub(crate) fn is_short(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Client && e.to_string().starts_with(SHORT)
}

impl Durability {
    /// The `WAIT` command of this durability.
    pub(crate) fn wait_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(self.replicas).arg(self.timeout.as_millis() as u64);
        cmd
    }

    /// Reads WAIT's reply (`None`: it is missing): an error unless enough
    /// replicas acknowledged.
    pub(crate) fn acknowledged(&self, reply: Option<redis::Value>) -> redis::RedisResult<()> {
        let acked = match reply {
            Some(redis::Value::Int(n)) => n,
            Some(other) => {
                other.extract_error()?;
                return Err(self.short(-1));
            }
            None => return Err(self.short(-1)),
        };
        if acked < i64::from(self.replicas) {
            return Err(self.short(acked));
        }
        Ok(())
    }

    /// The error of a call whose writes reached only `acked` replicas (-1:
    /// WAIT gave no count).
    fn short(&self, acked: i64) -> redis::RedisError {
        redis::RedisError::from((
            redis::ErrorKind::Client,
            SHORT,
            format!(
                "{acked} of {} replicas within {} ms; the write is on the master and may be lost in a failover",
                self.replicas,
                self.timeout.as_millis()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durability_reads_back() {
        let d: Durability = "wait:2:250".parse().unwrap();
        assert_eq!((d.replicas, d.timeout), (2, Duration::from_millis(250)));
        assert_eq!(d.to_string(), "wait:2:250");
        let d: Durability = "wait:1".parse().unwrap();
        assert_eq!(d.timeout, DEFAULT_WAIT);
        for bad in [
            "wait:0",
            "wait:1:0",
            "wait:1:5001",
            "wait:x",
            "1",
            "wait:1:5:9",
            "wait:",
        ] {
            let e = bad.parse::<Durability>().unwrap_err();
            assert!(e.is_invalid() && e.to_string().contains("wait:N"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_short_acknowledgement_is_told_apart() {
        let d: Durability = "wait:1".parse().unwrap();
        let short = d.acknowledged(Some(redis::Value::Int(0))).unwrap_err();
        assert!(is_short(&short), "{short}");
        assert!(d.acknowledged(Some(redis::Value::Int(1))).is_ok());
        let other = redis::RedisError::from((redis::ErrorKind::Client, "something else"));
        assert!(!is_short(&other));
    }

    #[test]
    fn only_plain_reads_go_without_a_wait() {
        let reads = [redis::cmd("HMGET"), redis::cmd("zrange"), redis::cmd("INFO")];
        assert!(reads.iter().all(|c| !may_write(c)));
        let mut load = redis::cmd("FUNCTION");
        load.arg("LIST");
        let writes = [
            redis::cmd("SADD"),
            redis::cmd("FCALL"),
            redis::cmd("EVALSHA"),
            load,
        ];
        assert!(writes.iter().all(may_write));
    }
}
