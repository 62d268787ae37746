//! The Redis Cluster test support itself: a cluster starts with every slot
//! served, cluster clients and plain node connections reach the right
//! master, and a slot moves with its keys.

use std::time::Duration;

use jobworker_tests::{shared_cluster, RedisCluster};
use redis::cluster::ClusterClient;
use redis::Commands;

/// `{tag}` keys whose slots are served by three different masters of an
/// evenly split 3-master cluster.
const TAGGED: [&str; 3] = ["{a}x", "{b}x", "{c}x"];

fn hosts(url: &str) -> Vec<String> {
    let rest = url
        .strip_prefix("redis+cluster://")
        .unwrap_or_else(|| panic!("not a cluster url: {url}"));
    rest.split(',').map(str::to_owned).collect()
}

fn cluster_client(cluster: &RedisCluster) -> redis::cluster::ClusterConnection {
    let nodes: Vec<String> = cluster
        .ports()
        .iter()
        .map(|p| format!("redis://127.0.0.1:{p}/"))
        .collect();
    ClusterClient::new(nodes)
        .and_then(|client| client.get_connection())
        .unwrap_or_else(|e| panic!("cannot connect a cluster client to {}: {e}", cluster.url()))
}

#[test]
fn a_shared_three_master_cluster_serves_every_slot() {
    let cluster = shared_cluster();
    let ports = cluster.ports();
    assert_eq!(ports.len(), 3);
    assert_eq!(
        hosts(&cluster.url()),
        ports.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>()
    );
    assert!(std::ptr::eq(cluster, shared_cluster()), "one cluster per binary");
    assert_eq!(cluster.pids().len(), 3);
    for pid in cluster.pids() {
        assert!(
            std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "node {pid} is gone"
        );
    }
    assert_eq!(cluster.used_cpu().len(), 3);

    for slot in [0, 8000, 16383] {
        let port = cluster.port_of_slot(slot);
        assert!(
            ports.contains(&port),
            "slot {slot} served by {port}, not a master"
        );
    }
    let serving: std::collections::BTreeSet<u16> = TAGGED
        .iter()
        .map(|k| cluster.port_of_slot(cluster.slot_of(k)))
        .collect();
    assert_eq!(serving.len(), 3, "{TAGGED:?} land on three masters");

    // slot_of agrees with the server's CLUSTER KEYSLOT.
    let mut any = cluster.node(ports[0]);
    for key in TAGGED
        .iter()
        .copied()
        .chain(["plain", "{}x", "x{}{y}", "{user1000}.following", "é"])
    {
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut any)
            .unwrap();
        assert_eq!(cluster.slot_of(key), slot, "slot of {key:?}");
    }

    let mut con = cluster_client(cluster);
    for key in TAGGED {
        let _: () = con.set(key, format!("value of {key}")).unwrap();
    }
    for key in TAGGED {
        let value: String = con.get(key).unwrap();
        assert_eq!(value, format!("value of {key}"));
        let mut node = cluster.node(cluster.port_of_slot(cluster.slot_of(key)));
        let direct: String = node.get(key).unwrap();
        assert_eq!(direct, value, "{key} is on the master that serves its slot");
    }
}

#[test]
fn a_slot_moves_with_its_keys() {
    let cluster = RedisCluster::start(3);
    let keys: Vec<String> = (0..500).map(|n| format!("{{moving}}{n}")).collect();
    let slot = cluster.slot_of(&keys[0]);
    let from = cluster.port_of_slot(slot);
    let to = *cluster.ports().iter().find(|p| **p != from).unwrap();
    let mut source = cluster.node(from);
    for key in &keys {
        let _: () = source.set(key, format!("v-{key}")).unwrap();
    }

    let moved = cluster.migrate_slot(slot, to, 64, Duration::from_millis(5));
    assert_eq!(moved, 500);
    assert_eq!(cluster.port_of_slot(slot), to);
    for port in cluster.ports() {
        let mut node = cluster.node(port);
        let owner = slot_ranges(&mut node)
            .into_iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|(_, _, port)| port);
        assert_eq!(
            owner,
            Some(to),
            "node {port} agrees on the new owner of slot {slot}"
        );
    }
    let left: usize = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query(&mut source)
        .unwrap();
    assert_eq!(left, 0);
    let moved_away: redis::RedisResult<Option<String>> = source.get(&keys[0]);
    let err = moved_away.expect_err("the old owner redirects");
    assert!(err.to_string().to_lowercase().contains("moved"), "{err}");

    let mut target = cluster.node(to);
    for key in &keys {
        let value: String = target.get(key).unwrap();
        assert_eq!(value, format!("v-{key}"));
    }
    let mut con = cluster_client(&cluster);
    let value: String = con.get(&keys[499]).unwrap();
    assert_eq!(value, format!("v-{}", keys[499]));

    // Moving it where it is already is a no-op.
    assert_eq!(cluster.migrate_slot(slot, to, 64, Duration::ZERO), 0);

    // redis-cli's own reshard.
    let third = *cluster.ports().iter().find(|p| **p != from && **p != to).unwrap();
    let before = owned_slots(&cluster, third);
    let out = cluster.reshard(from, third, 10);
    assert!(out.contains("Moving slot"), "{out}");
    assert_eq!(owned_slots(&cluster, third), before + 10);
}

/// (first slot, last slot, master port) of every range in `CLUSTER SLOTS`.
fn slot_ranges(con: &mut redis::Connection) -> Vec<(u16, u16, u16)> {
    use redis::Value;
    let reply: Vec<Vec<Value>> = redis::cmd("CLUSTER").arg("SLOTS").query(con).unwrap();
    reply
        .iter()
        .map(|range| match range.as_slice() {
            [Value::Int(first), Value::Int(last), Value::Array(master), ..] => match master.as_slice() {
                [_, Value::Int(port), ..] => (
                    u16::try_from(*first).unwrap(),
                    u16::try_from(*last).unwrap(),
                    u16::try_from(*port).unwrap(),
                ),
                _ => panic!("unexpected CLUSTER SLOTS master {master:?}"),
            },
            _ => panic!("unexpected CLUSTER SLOTS entry {range:?}"),
        })
        .collect()
}

/// How many slots the master on `port` serves.
fn owned_slots(cluster: &RedisCluster, port: u16) -> usize {
    slot_ranges(&mut cluster.node(port))
        .into_iter()
        .filter(|(_, _, owner)| *owner == port)
        .map(|(first, last, _)| usize::from(last - first) + 1)
        .sum()
}

#[test]
fn a_one_master_cluster_starts() {
    let cluster = RedisCluster::start(1);
    let ports = cluster.ports();
    assert_eq!(ports.len(), 1);
    assert_eq!(hosts(&cluster.url()), vec![format!("127.0.0.1:{}", ports[0])]);
    for slot in [0, 8000, 16383] {
        assert_eq!(cluster.port_of_slot(slot), ports[0]);
    }
    let mut con = cluster_client(&cluster);
    for key in TAGGED {
        let _: () = con.set(key, "one").unwrap();
    }
    let mut node = cluster.node(ports[0]);
    for key in TAGGED {
        let value: String = node.get(key).unwrap();
        assert_eq!(value, "one");
    }
}
