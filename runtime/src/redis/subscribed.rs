//! Whether a cluster listener's sharded subscriptions are still on the
//! masters that serve their slots.
//!
//! When a master dies for good and its replica takes its slots over,
//! redis-rs keeps trying the dead address for the subscriptions it had
//! there, and a connection that only listens sends no command that would
//! tell redis-rs where the slots went (the drop itself comes as a
//! `Disconnection` push that names no node). So a cluster listener notes,
//! before each subscribe, which node serves the channel's slot (its node
//! id in `CLUSTER SLOTS`), and every [`CHECK_EVERY`] while it waits asks
//! again, from any node it is connected to: a channel now served by
//! another node ends the listener, and its caller opens a new one, which
//! subscribes there. A node that restarts keeps its id (redis-rs
//! subscribes there again by itself), and a replica that dies changes no
//! slot's master: listeners go on.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{FromRedisValue, Value};

use crate::error::{Error, Result};

/// How often a waiting cluster listener checks where its channels' slots
/// are served: one `CLUSTER SLOTS`, from any node.
pub(super) const CHECK_EVERY: Duration = Duration::from_secs(5);

/// How long one look at `CLUSTER SLOTS` may take: the node asked may be
/// hung (stopped, or behind a link that died without a word), and the
/// listener reads nothing meanwhile; it asks again at the next check.
const LOOK_LIMIT: Duration = Duration::from_secs(2);

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

/// A slot range and its master: (first, last, node id, or `host:port`
/// from a server too old to give ids).
type Range = (u16, u16, String);

/// The ranges of a `CLUSTER SLOTS` reply; `None` when it is not one.
fn ranges(reply: &Value) -> Option<Vec<Range>> {
    let Value::Array(entries) = reply else { return None };
    entries
        .iter()
        .map(|entry| {
            let Value::Array(fields) = entry else { return None };
            let [Value::Int(first), Value::Int(last), Value::Array(master), ..] = fields.as_slice() else {
                return None;
            };
            let text = |v: &Value| String::from_redis_value_ref(v).unwrap_or_default();
            let node = match master.as_slice() {
                [_, _, id, ..] => text(id),
                [host, port] => format!("{}:{}", text(host), text(port)),
                _ => return None,
            };
            Some((u16::try_from(*first).ok()?, u16::try_from(*last).ok()?, node))
        })
        .collect()
}

/// The node that serves `channel`'s slot in `ranges`.
fn node_of<'r>(ranges: &'r [Range], channel: &str) -> Option<&'r str> {
    let slot = slot_of(channel);
    ranges
        .iter()
        .find(|(first, last, _)| (*first..=*last).contains(&slot))
        .map(|(.., node)| node.as_str())
}

/// `CLUSTER SLOTS`, asked of any node `con` is connected to, within
/// [`LOOK_LIMIT`].
async fn slot_ranges(con: &mut ClusterConnection) -> Result<Vec<Range>> {
    let any = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
    let ask = con.route_command(redis::cmd("CLUSTER").arg("SLOTS").clone(), any);
    let reply = tokio::time::timeout(LOOK_LIMIT, ask)
        .await
        .map_err(|_| Error::unavailable(format!("no CLUSTER SLOTS reply within {LOOK_LIMIT:?}")))??;
    ranges(&reply).ok_or_else(|| Error::unavailable(format!("unexpected CLUSTER SLOTS reply {reply:?}")))
}

/// The nodes that serve `channels`' slots now, in order, from one look
/// (`None` when that cannot be told: the next check notes it, and a
/// failover in between goes unseen).
pub(super) async fn nodes_serving(con: &mut ClusterConnection, channels: &[&str]) -> Vec<Option<String>> {
    let ranges = slot_ranges(con).await.unwrap_or_default();
    channels
        .iter()
        .map(|channel| node_of(&ranges, channel).map(str::to_owned))
        .collect()
}

/// True when a channel of `served` (channel → the node that served its
/// slot when it was subscribed) is served by another node now; notes the
/// node of those not known yet. False when the cluster cannot say (asked
/// again at the next check).
pub(super) async fn moved(
    con: &mut ClusterConnection,
    served: &mut BTreeMap<String, Option<String>>,
) -> bool {
    if served.is_empty() {
        return false;
    }
    let ranges = match slot_ranges(con).await {
        Ok(ranges) => ranges,
        Err(e) => {
            tracing::debug!(error = %e, "cannot tell where the sharded channels are served");
            return false;
        }
    };
    let mut moved = false;
    for (channel, was) in served.iter_mut() {
        match (node_of(&ranges, channel), was.as_deref()) {
            (Some(now), Some(was)) => moved |= now != was,
            (Some(now), None) => *was = Some(now.to_owned()),
            (None, _) => {}
        }
    }
    moved
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
    fn finds_the_node_serving_a_channel() {
        let node = |host: &str, port: i64, id: &str| {
            Value::Array(vec![
                Value::BulkString(host.into()),
                Value::Int(port),
                Value::BulkString(id.into()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(8191),
                node("10.0.0.1", 7000, "a1"),
            ]),
            Value::Array(vec![
                Value::Int(8192),
                Value::Int(16383),
                node("10.0.0.2", 7001, "b2"),
                node("10.0.0.3", 7002, "c3"),
            ]),
        ]);
        let map = ranges(&reply).unwrap();
        // foo: slot 12182, bar: 5061.
        assert_eq!(node_of(&map, "jw:{foo}:notify"), Some("b2"));
        assert_eq!(node_of(&map, "jw:{bar}:notify"), Some("a1"));
        assert_eq!(
            node_of(&map[..1], "jw:{foo}:notify"),
            None,
            "a slot without a master"
        );
        let old = Value::Array(vec![Value::Array(vec![
            Value::Int(0),
            Value::Int(16383),
            Value::Array(vec![Value::BulkString(b"10.0.0.1".to_vec()), Value::Int(7000)]),
        ])]);
        assert_eq!(node_of(&ranges(&old).unwrap(), "x"), Some("10.0.0.1:7000"));
        assert_eq!(ranges(&Value::Int(1)), None);
    }
}
