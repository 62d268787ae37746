//! Whether a cluster pub/sub connection still hears its sharded channels
//! after one of its node connections dropped.
//!
//! redis-rs reports a dropped node connection with a `Disconnection` push
//! that does not say which node. It then reconnects to that address and
//! subscribes there again, which is right when the node comes back. After a
//! failover the slot is served from another address (the replica), but a
//! connection that only listens sends no call that would tell redis-rs so:
//! it keeps trying the dead address, and the channels of that slot go deaf.
//! So on such a push the subscriber asks the cluster where each channel's
//! slot is served now (`CLUSTER SLOTS`, from any node) and whether its own
//! connection to that master holds as many sharded subscriptions as it
//! should (`CLIENT INFO`'s `ssub`). A drop elsewhere (a replica, an idle
//! connection to another master) leaves it listening.

use std::collections::{BTreeSet, HashMap};

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{FromRedisValue, Value};

use crate::error::Result;

/// Hash slots of a Redis Cluster.
const SLOTS: u16 = 16384;

/// The slot of `channel`: CRC16 (XMODEM) of its hash tag (between the
/// first `{` and the next `}`, when not empty) or of the whole name.
fn slot_of(channel: &str) -> u16 {
    let name = channel.as_bytes();
    let tag = name.iter().position(|b| *b == b'{').and_then(|open| {
        let rest = &name[open + 1..];
        let close = rest.iter().position(|b| *b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tag.unwrap_or(name)) % SLOTS
}

/// A slot range and the address of its master, from `CLUSTER SLOTS`.
type Range = (u16, u16, String, u16);

/// The ranges of a `CLUSTER SLOTS` reply; `None` when it is not one.
fn ranges(reply: &Value) -> Option<Vec<Range>> {
    let Value::Array(entries) = reply else { return None };
    entries
        .iter()
        .map(|entry| match entry {
            Value::Array(fields) => match fields.as_slice() {
                [Value::Int(first), Value::Int(last), Value::Array(master), ..] => {
                    let (host, port) = match master.as_slice() {
                        [host, Value::Int(port), ..] => (String::from_redis_value_ref(host).ok()?, *port),
                        _ => return None,
                    };
                    Some((
                        u16::try_from(*first).ok()?,
                        u16::try_from(*last).ok()?,
                        host,
                        u16::try_from(port).ok()?,
                    ))
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// How many of `channels` each master serves now: (host, port) → count;
/// `None` when a channel's slot has no master in `ranges`.
fn expected(channels: &BTreeSet<String>, ranges: &[Range]) -> Option<HashMap<(String, u16), usize>> {
    let mut counts = HashMap::new();
    for channel in channels {
        let slot = slot_of(channel);
        let (_, _, host, port) = ranges
            .iter()
            .find(|(first, last, ..)| (*first..=*last).contains(&slot))?;
        *counts.entry((host.clone(), *port)).or_insert(0) += 1;
    }
    Some(counts)
}

/// The `ssub` field of a `CLIENT INFO` line (Redis ≥ 7.0.3).
fn sharded_subscriptions(info: &str) -> Option<usize> {
    info.split_whitespace()
        .find_map(|field| field.strip_prefix("ssub="))?
        .parse()
        .ok()
}

/// True when `con` holds its subscriptions to `channels` on the masters
/// that serve them now; false when it does not, or when that cannot be told
/// (the caller then opens a new connection, which subscribes where the
/// slots are now).
pub(super) async fn where_served(con: &mut ClusterConnection, channels: &BTreeSet<String>) -> bool {
    match check(con, channels).await {
        Ok(held) => held,
        Err(e) => {
            tracing::debug!(error = %e, "cannot tell where the sharded subscriptions are");
            false
        }
    }
}

async fn check(con: &mut ClusterConnection, channels: &BTreeSet<String>) -> Result<bool> {
    let any = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
    let reply = con
        .route_command(redis::cmd("CLUSTER").arg("SLOTS").clone(), any)
        .await?;
    let Some(counts) = ranges(&reply).and_then(|r| expected(channels, &r)) else {
        return Ok(false);
    };
    for ((host, port), count) in counts {
        let node = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
        let info = con
            .route_command(redis::cmd("CLIENT").arg("INFO").clone(), node)
            .await?;
        let held = String::from_redis_value_ref(&info)
            .ok()
            .and_then(|info| sharded_subscriptions(&info));
        if held.is_none_or(|held| held < count) {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_is_in_its_hash_tags_slot() {
        // The examples of `CLUSTER KEYSLOT` in Redis' documentation.
        assert_eq!(slot_of("somekey"), 11058);
        assert_eq!(slot_of("foo{hash_tag}"), 2515);
        assert_eq!(slot_of("jw:{hash_tag}:notify"), 2515);
        assert_eq!(slot_of("foo"), 12182);
        // An empty tag is no tag.
        assert_eq!(
            slot_of("{}foo"),
            crc16::State::<crc16::XMODEM>::calculate(b"{}foo") % SLOTS
        );
    }

    #[test]
    fn counts_the_channels_each_master_serves() {
        let master =
            |host: &str, port: i64| Value::Array(vec![Value::BulkString(host.into()), Value::Int(port)]);
        let reply = Value::Array(vec![
            Value::Array(vec![Value::Int(0), Value::Int(8191), master("10.0.0.1", 7000)]),
            Value::Array(vec![
                Value::Int(8192),
                Value::Int(16383),
                master("10.0.0.2", 7001),
            ]),
        ]);
        let map = ranges(&reply).unwrap();
        let channels: BTreeSet<String> = ["jw:{foo}:a", "jw:{foo}:b", "jw:{bar}:a"]
            .map(String::from)
            .into();
        let counts = expected(&channels, &map).unwrap();
        // foo: 12182, bar: 5061.
        assert_eq!(counts[&("10.0.0.2".to_owned(), 7001)], 2);
        assert_eq!(counts[&("10.0.0.1".to_owned(), 7000)], 1);
        assert_eq!(expected(&channels, &map[..1]), None, "a slot without a master");
        assert_eq!(ranges(&Value::Int(1)), None);
    }

    #[test]
    fn reads_the_sharded_subscriptions_of_a_client() {
        let line = "id=66 addr=127.0.0.1:42422 laddr=127.0.0.1:7391 fd=8 name= sub=0 psub=0 ssub=3 multi=-1";
        assert_eq!(sharded_subscriptions(line), Some(3));
        assert_eq!(sharded_subscriptions("id=1 sub=0 psub=0"), None);
    }
}
