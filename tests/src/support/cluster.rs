//! A Redis Cluster on loopback ports for tests: N masters, with or without
//! one replica each, every slot assigned, each node a `redis-server`
//! process of this test.
//!
//! Every node is a `jobworker::embedded::RedisServer` started with
//! `--cluster-enabled yes`, its own `--cluster-config-file` and an explicit
//! `--cluster-port` (the cluster bus port, picked free like the client
//! port: the default bus port, client port + 10000, may be taken or above
//! 65535, since free ports go up to the top of the ephemeral range). A node
//! whose start fails (a port lost to another process) is started again on
//! new ports. The nodes die with the thread that started them
//! (`PDEATHSIG`) and are killed by PID when the [`RedisCluster`] is
//! dropped; [`shared_cluster`] starts one from a thread that never exits.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use jobworker::embedded::{redis_server_version, RedisServer, ServerOptions, Transport};

/// Number of hash slots of a Redis Cluster.
const SLOTS: u16 = 16384;
/// Most masters [`RedisCluster::start`] accepts.
const MAX_MASTERS: usize = 5;
/// `cluster-node-timeout` of every node, in milliseconds.
const NODE_TIMEOUT_MS: u64 = 5000;
/// How many times a node is started on new ports before giving up.
const NODE_ATTEMPTS: usize = 5;
/// How long the cluster may take to be ok and agreed after a change.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one `redis-cli --cluster` run may take.
const CLI_TIMEOUT: Duration = Duration::from_secs(180);
/// Pause between two checks of the cluster's state.
const SETTLE_POLL: Duration = Duration::from_millis(50);
/// Connect timeout of the connections to the nodes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Read and write timeout of the connections to the nodes.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// The `timeout` argument of `MIGRATE`, in milliseconds.
const MIGRATE_TIMEOUT_MS: u64 = 5000;
/// Lines of each node's log quoted when the cluster never settles.
const LOG_TAIL_LINES: usize = 8;
/// The client binary behind `--cluster create` and `--cluster reshard`.
const REDIS_CLI: &str = "redis-cli";
/// The hint given when `redis-cli` is missing.
const CLI_MISSING: &str = "redis-cli not found on PATH; install it with `apt-get install -y redis-tools` \
     (`apt-get install -y redis-server` pulls it in too)";

/// (first slot, last slot, master port) of every slot range, sorted.
type SlotMap = Vec<(u16, u16, u16)>;

/// N masters (with or without one replica each), every slot assigned,
/// each node a `redis-server` process of this test, on `127.0.0.1`.
///
/// The nodes are killed (by PID) and their temp dir is removed on drop.
/// Started from a test thread, they also die when that thread exits
/// (`PDEATHSIG`), so a cluster lives at most as long as its test.
#[derive(Debug)]
pub struct RedisCluster {
    /// The nodes, in start order (the masters first).
    nodes: Vec<RedisServer>,
    /// The cluster bus port of each node (`--cluster-port`).
    bus_ports: Vec<u16>,
    /// The node id (`CLUSTER MYID`) of each node.
    ids: Vec<String>,
    /// Holds the nodes' data dirs; declared last so that it is removed
    /// after the nodes are stopped.
    dir: tempfile::TempDir,
}

impl RedisCluster {
    /// Starts `masters` (1..=5) cluster-enabled `redis-server`s
    /// (`--cluster-enabled yes`, a per-node `--cluster-config-file` in a
    /// temp dir, `--cluster-node-timeout 5000`, a free `--cluster-port`,
    /// persistence off as `RedisServer` does by default) and joins them.
    ///
    /// Three or more nodes are joined with `redis-cli --cluster create
    /// 127.0.0.1:P1 … --cluster-replicas 0 --cluster-yes`. `redis-cli`
    /// refuses fewer than three masters, so one node gets every slot with
    /// `CLUSTER ADDSLOTSRANGE 0 16383`, and two nodes get half the slots
    /// each and meet with `CLUSTER MEET`.
    ///
    /// Returns once every node reports `cluster_state:ok` in `CLUSTER INFO`
    /// and every node's `CLUSTER SLOTS` is the same and covers all 16384
    /// slots.
    ///
    /// Panics with a clear message when it cannot: a missing binary (naming
    /// `apt-get install -y redis-server` or `redis-tools`), a node that does
    /// not start, a cluster that does not settle within a minute. It never
    /// skips.
    pub fn start(masters: usize) -> RedisCluster {
        assert!(
            (1..=MAX_MASTERS).contains(&masters),
            "a test cluster has 1 to {MAX_MASTERS} masters, not {masters}"
        );
        let cluster = RedisCluster::start_nodes(masters);
        if masters >= 3 {
            cluster.create_with_redis_cli(0);
        } else {
            cluster.join_by_hand();
        }
        cluster.wait_settled("after it was created");
        cluster
    }

    /// Starts `masters` (3..=5) masters and one replica of each, joined
    /// with `redis-cli --cluster create … --cluster-replicas 1`. The
    /// `cluster-node-timeout` is 5 s, as in [`start`](Self::start): a
    /// master killed by [`kill_master_of`](Self::kill_master_of) is failed
    /// over some 6 s later, and a busy machine does not fail over a live
    /// one.
    ///
    /// Returns once the cluster is ok and agreed (as [`start`](Self::start)
    /// waits) and every replica's link to its master is up (a replica
    /// that never synced would not be elected).
    ///
    /// Panics as [`start`](Self::start) does.
    pub fn start_with_replicas(masters: usize) -> RedisCluster {
        assert!(
            (3..=MAX_MASTERS).contains(&masters),
            "a test cluster with replicas has 3 to {MAX_MASTERS} masters, not {masters}"
        );
        let cluster = RedisCluster::start_nodes(masters * 2);
        cluster.create_with_redis_cli(1);
        cluster.wait_settled("after it was created");
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        for port in cluster.ports() {
            loop {
                let info: String = exec(
                    &mut cluster.node(port),
                    port,
                    "INFO replication",
                    &["INFO", "replication"],
                );
                let line = |l: &str| info.lines().any(|line| line.trim() == l);
                if line("role:master") || line("master_link_status:up") {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the replica on 127.0.0.1:{port} did not sync within {SETTLE_TIMEOUT:?}: {info}"
                );
                thread::sleep(SETTLE_POLL);
            }
        }
        cluster
    }

    /// Starts `count` cluster-enabled nodes and reads their ids; joins
    /// nothing.
    fn start_nodes(count: usize) -> RedisCluster {
        check_binaries();
        let dir = tempfile::Builder::new()
            .prefix("jobworker-cluster-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temp dir for the redis cluster: {e}"));
        let mut cluster = RedisCluster {
            nodes: Vec::new(),
            bus_ports: Vec::new(),
            ids: Vec::new(),
            dir,
        };
        for n in 0..count {
            let (node, bus_port) = start_node(cluster.dir.path(), n);
            cluster.nodes.push(node);
            cluster.bus_ports.push(bus_port);
        }
        cluster.ids = cluster
            .ports()
            .into_iter()
            .map(|port| {
                exec::<String>(
                    &mut cluster.node(port),
                    port,
                    "CLUSTER MYID",
                    &["CLUSTER", "MYID"],
                )
            })
            .collect();
        cluster
    }

    /// Kills (`SIGKILL`, by PID) the master that serves `slot`, for good,
    /// and waits until its replica serves the slot and every node still
    /// running reports `cluster_state:ok`; returns the new master's port.
    ///
    /// For a cluster started with
    /// [`start_with_replicas`](Self::start_with_replicas). Panics when the
    /// failover does not happen within a minute, naming what the nodes
    /// said (and quoting their logs). The dead node stays in
    /// [`ports`](Self::ports), so what waits for every node to agree
    /// ([`migrate_slot`](Self::migrate_slot), [`reshard`](Self::reshard))
    /// is not for this cluster any more.
    pub fn kill_master_of(&mut self, slot: u16) -> u16 {
        let old = self.port_of_slot(slot);
        let index = self.index_of(old);
        self.nodes[index]
            .kill()
            .unwrap_or_else(|e| panic!("cannot kill the master on 127.0.0.1:{old}: {e}"));
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            let problem = match self.check_failed_over(slot, old) {
                Ok(new) => return new,
                Err(problem) => problem,
            };
            if Instant::now() >= deadline {
                panic!(
                    "slot {slot} was not failed over from 127.0.0.1:{old} within {SETTLE_TIMEOUT:?}: \
                     {problem}\n{}",
                    self.log_tails()
                );
            }
            thread::sleep(SETTLE_POLL);
        }
    }

    /// Kills (`SIGKILL`, by PID) a replica, for good; returns its port.
    /// The cluster stays ok: every slot keeps its master.
    ///
    /// Panics when no node is a replica (a cluster started without them).
    pub fn kill_a_replica(&mut self) -> u16 {
        let masters: Vec<u16> = self.current_slot_map().iter().map(|(_, _, port)| *port).collect();
        let index = self
            .ports()
            .iter()
            .position(|port| !masters.contains(port))
            .unwrap_or_else(|| panic!("no replica to kill: every node of {:?} is a master", self.ports()));
        let port = self.ports()[index];
        self.nodes[index]
            .kill()
            .unwrap_or_else(|e| panic!("cannot kill the replica on 127.0.0.1:{port}: {e}"));
        port
    }

    /// The port that serves `slot` once every node but `dead` is ok and
    /// names a master other than `dead` for it; else what is still wrong.
    fn check_failed_over(&self, slot: u16, dead: u16) -> Result<u16, String> {
        let mut owner = None;
        for port in self.ports().into_iter().filter(|p| *p != dead) {
            let mut con = connect(port).map_err(|e| format!("cannot connect to 127.0.0.1:{port}: {e}"))?;
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query(&mut con)
                .map_err(|e| format!("CLUSTER INFO on 127.0.0.1:{port}: {e}"))?;
            if !info.lines().any(|line| line.trim() == "cluster_state:ok") {
                return Err(format!("127.0.0.1:{port} is not ok yet"));
            }
            let map = slot_map(&mut con).map_err(|e| format!("CLUSTER SLOTS on 127.0.0.1:{port}: {e}"))?;
            let serves = map
                .iter()
                .find(|(first, last, _)| (*first..=*last).contains(&slot))
                .map(|(_, _, port)| *port);
            match serves {
                Some(p) if p != dead && owner.is_none_or(|o| o == p) => owner = Some(p),
                other => return Err(format!("127.0.0.1:{port} says {other:?} serves slot {slot}")),
            }
        }
        owner.ok_or_else(|| "no node is running".to_owned())
    }

    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,…` (every node, in
    /// [`ports`](Self::ports) order).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.ports().iter().map(|p| format!("127.0.0.1:{p}")).collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The nodes' client ports, in start order (masters and replicas).
    pub fn ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .map(|node| node.port().expect("a tcp server has a port"))
            .collect()
    }

    /// PIDs of the nodes, in [`ports`](Self::ports) order.
    pub fn pids(&self) -> Vec<u32> {
        self.nodes.iter().map(RedisServer::pid).collect()
    }

    /// The node id (`CLUSTER MYID`) of the node on `port`.
    ///
    /// Panics when `port` is not a node of this cluster.
    pub fn node_id(&self, port: u16) -> &str {
        &self.ids[self.index_of(port)]
    }

    /// The slot of `key`: CRC16 (XMODEM) of its hash tag (the part between
    /// the first `{` and the next `}`, when not empty) or of the whole key,
    /// modulo 16384, as Redis computes it (`CLUSTER KEYSLOT`).
    pub fn slot_of(&self, key: &str) -> u16 {
        key_slot(key.as_bytes())
    }

    /// The port of the master that serves `slot` now, from `CLUSTER SLOTS`
    /// of the first node that answers.
    ///
    /// Panics when `slot` is not below 16384, when no node answers, or when
    /// no master serves the slot.
    pub fn port_of_slot(&self, slot: u16) -> u16 {
        assert!(slot < SLOTS, "slot {slot} is not below {SLOTS}");
        let map = self.current_slot_map();
        map.iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|(_, _, port)| *port)
            .unwrap_or_else(|| panic!("no master serves slot {slot}; CLUSTER SLOTS: {map:?}"))
    }

    /// A plain (non-cluster) `redis::Connection` to the node on `port`,
    /// with a 10 s read and write timeout (a hung node fails the test
    /// instead of hanging it). It does not follow `MOVED` or `ASK`.
    ///
    /// Panics when it cannot connect.
    pub fn node(&self, port: u16) -> redis::Connection {
        connect(port).unwrap_or_else(|e| panic!("cannot connect to the cluster node 127.0.0.1:{port}: {e}"))
    }

    /// Moves `slot` to the master on `to`, the way `redis-cli --cluster
    /// reshard` does it for one slot:
    ///
    /// 1. `CLUSTER SETSLOT s IMPORTING <source id>` on the target;
    /// 2. `CLUSTER SETSLOT s MIGRATING <target id>` on the source;
    /// 3. on the source, `CLUSTER GETKEYSINSLOT s <batch>` then
    ///    `MIGRATE 127.0.0.1 <to> "" 0 5000 KEYS k1 k2 …`, sleeping `pause`
    ///    after each batch, until the slot is empty there (so a test can run
    ///    load while the slot is half moved and clients get `ASK` and
    ///    `TRYAGAIN`);
    /// 4. `CLUSTER SETSLOT s NODE <target id>` on the target, the source and
    ///    every other master.
    ///
    /// Then waits until the cluster is ok and agreed again, and returns the
    /// number of keys moved (0 when `to` serves the slot already: nothing is
    /// done then).
    ///
    /// Panics with the failing command's error, or when `to` is not a
    /// master of this cluster, `slot` is not below 16384 or `batch` is 0.
    pub fn migrate_slot(&self, slot: u16, to: u16, batch: usize, pause: Duration) -> usize {
        assert!(batch > 0, "migrate_slot needs a batch of at least one key");
        let to_id = self.node_id(to).to_owned();
        let from = self.port_of_slot(slot);
        if from == to {
            return 0;
        }
        let from_id = self.node_id(from).to_owned();
        let slot_arg = slot.to_string();
        let mut target = self.node(to);
        let mut source = self.node(from);
        exec::<()>(
            &mut target,
            to,
            "CLUSTER SETSLOT IMPORTING",
            &["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &from_id],
        );
        exec::<()>(
            &mut source,
            from,
            "CLUSTER SETSLOT MIGRATING",
            &["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &to_id],
        );
        let mut moved = 0;
        loop {
            let keys: Vec<Vec<u8>> = exec(
                &mut source,
                from,
                "CLUSTER GETKEYSINSLOT",
                &["CLUSTER", "GETKEYSINSLOT", &slot_arg, &batch.to_string()],
            );
            if keys.is_empty() {
                break;
            }
            let mut migrate = redis::cmd("MIGRATE");
            migrate
                .arg("127.0.0.1")
                .arg(to)
                .arg("")
                .arg(0)
                .arg(MIGRATE_TIMEOUT_MS)
                .arg("KEYS");
            for key in &keys {
                migrate.arg(key.as_slice());
            }
            let _: redis::Value = migrate.query(&mut source).unwrap_or_else(|e| {
                panic!(
                    "MIGRATE of {} keys of slot {slot} from 127.0.0.1:{from} to 127.0.0.1:{to} failed: {e}",
                    keys.len()
                )
            });
            moved += keys.len();
            if !pause.is_zero() {
                thread::sleep(pause);
            }
        }
        let others = self.ports().into_iter().filter(|p| *p != from && *p != to);
        for port in [to, from].into_iter().chain(others) {
            exec::<()>(
                &mut self.node(port),
                port,
                "CLUSTER SETSLOT NODE",
                &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id],
            );
        }
        self.wait_settled(&format!("after slot {slot} moved to 127.0.0.1:{to}"));
        moved
    }

    /// Runs `redis-cli --cluster reshard 127.0.0.1:<first port> --cluster-from
    /// <id of from> --cluster-to <id of to> --cluster-slots <slots>
    /// --cluster-yes`, waits until the cluster is ok and agreed again, and
    /// returns `redis-cli`'s stdout.
    ///
    /// Panics when `from` or `to` is not a master of this cluster or when
    /// `redis-cli` fails (quoting its output).
    pub fn reshard(&self, from: u16, to: u16, slots: usize) -> String {
        let entry = format!("127.0.0.1:{}", self.ports()[0]);
        let slots = slots.to_string();
        let args = [
            "--cluster",
            "reshard",
            entry.as_str(),
            "--cluster-from",
            self.node_id(from),
            "--cluster-to",
            self.node_id(to),
            "--cluster-slots",
            slots.as_str(),
            "--cluster-yes",
        ];
        let stdout = self.run_cli(&args);
        self.wait_settled(&format!("after resharding {slots} slots from {from} to {to}"));
        stdout
    }

    /// `used_cpu_sys + used_cpu_user` (seconds) of every master, from
    /// `INFO cpu`, in [`ports`](Self::ports) order (for benchmarks).
    ///
    /// Panics when a node does not answer or lacks the fields.
    pub fn used_cpu(&self) -> Vec<f64> {
        self.ports()
            .into_iter()
            .map(|port| {
                let info: String = exec(&mut self.node(port), port, "INFO cpu", &["INFO", "cpu"]);
                let field = |name: &str| -> f64 {
                    info.lines()
                        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                        .and_then(|value| value.trim().parse().ok())
                        .unwrap_or_else(|| panic!("INFO cpu of 127.0.0.1:{port} has no {name}: {info}"))
                };
                field("used_cpu_sys") + field("used_cpu_user")
            })
            .collect()
    }

    /// The position of the node on `port` in [`ports`](Self::ports).
    fn index_of(&self, port: u16) -> usize {
        self.ports().iter().position(|p| *p == port).unwrap_or_else(|| {
            panic!(
                "127.0.0.1:{port} is not a node of this cluster ({:?})",
                self.ports()
            )
        })
    }

    /// Joins three or more masters, with `replicas` replicas each, with
    /// `redis-cli --cluster create`.
    fn create_with_redis_cli(&self, replicas: usize) {
        let hosts: Vec<String> = self.ports().iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let replicas = replicas.to_string();
        let mut args = vec!["--cluster", "create"];
        args.extend(hosts.iter().map(String::as_str));
        args.extend(["--cluster-replicas", replicas.as_str(), "--cluster-yes"]);
        self.run_cli(&args);
    }

    /// Joins one or two nodes, which `redis-cli --cluster create` refuses:
    /// distinct config epochs, an even split of the slots, and a `CLUSTER
    /// MEET` from the first node to the others.
    fn join_by_hand(&self) {
        let ports = self.ports();
        let count = u16::try_from(ports.len()).expect("at most 5 masters");
        let per_node = SLOTS / count;
        for (n, port) in (0..count).zip(ports.iter().copied()) {
            let first = n * per_node;
            let last = if n + 1 == count {
                SLOTS - 1
            } else {
                first + per_node - 1
            };
            let mut con = self.node(port);
            let epoch = (n + 1).to_string();
            exec::<()>(
                &mut con,
                port,
                "CLUSTER SET-CONFIG-EPOCH",
                &["CLUSTER", "SET-CONFIG-EPOCH", &epoch],
            );
            exec::<()>(
                &mut con,
                port,
                "CLUSTER ADDSLOTSRANGE",
                &["CLUSTER", "ADDSLOTSRANGE", &first.to_string(), &last.to_string()],
            );
        }
        let mut first = self.node(ports[0]);
        for (port, bus_port) in ports.iter().zip(&self.bus_ports).skip(1) {
            exec::<()>(
                &mut first,
                ports[0],
                "CLUSTER MEET",
                &[
                    "CLUSTER",
                    "MEET",
                    "127.0.0.1",
                    &port.to_string(),
                    &bus_port.to_string(),
                ],
            );
        }
    }

    /// Runs `redis-cli` with `args` (stdin closed), waits up to
    /// [`CLI_TIMEOUT`] and returns its stdout; panics with its output when it
    /// fails or hangs.
    fn run_cli(&self, args: &[&str]) -> String {
        let out = tempfile::tempfile_in(self.dir.path()).expect("temp file for redis-cli stdout");
        let err = tempfile::tempfile_in(self.dir.path()).expect("temp file for redis-cli stderr");
        let mut child = Command::new(REDIS_CLI)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("temp file"))
            .stderr(err.try_clone().expect("temp file"))
            .spawn()
            .unwrap_or_else(|e| {
                if e.kind() == io::ErrorKind::NotFound {
                    panic!("{CLI_MISSING}");
                }
                panic!("cannot run redis-cli {}: {e}", args.join(" "));
            });
        let deadline = Instant::now() + CLI_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(SETTLE_POLL),
                Ok(None) => {
                    // Our own child, not yet reaped: killed by its handle.
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                Err(e) => panic!("waiting for redis-cli {}: {e}", args.join(" ")),
            }
        };
        let stdout = read_all(out);
        if status.is_some_and(|s| s.success()) {
            return stdout;
        }
        let what = match status {
            Some(status) => format!("failed ({status})"),
            None => format!("did not finish within {CLI_TIMEOUT:?}"),
        };
        panic!(
            "redis-cli {} {what}\nstdout:\n{stdout}\nstderr:\n{}",
            args.join(" "),
            read_all(err)
        );
    }

    /// Waits until every node reports `cluster_state:ok`, knows every master,
    /// and has the same `CLUSTER SLOTS` covering all slots with our masters;
    /// panics (with the nodes' log tails) after [`SETTLE_TIMEOUT`].
    fn wait_settled(&self, when: &str) {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            let problem = match self.check_settled() {
                Ok(()) => return,
                Err(problem) => problem,
            };
            if Instant::now() >= deadline {
                panic!(
                    "the redis cluster on {:?} was not ok and agreed {when} within {SETTLE_TIMEOUT:?}: \
                     {problem}\n{}",
                    self.ports(),
                    self.log_tails()
                );
            }
            thread::sleep(SETTLE_POLL);
        }
    }

    /// `Ok` when the cluster is settled, else what is still wrong.
    fn check_settled(&self) -> Result<(), String> {
        let ports = self.ports();
        let mut agreed: Option<(u16, SlotMap)> = None;
        for port in &ports {
            let mut con = connect(*port).map_err(|e| format!("cannot connect to 127.0.0.1:{port}: {e}"))?;
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query(&mut con)
                .map_err(|e| format!("CLUSTER INFO on 127.0.0.1:{port}: {e}"))?;
            let field = |name: &str| {
                info.lines()
                    .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                    .map(str::trim)
                    .unwrap_or("?")
                    .to_owned()
            };
            let state = field("cluster_state");
            if state != "ok" {
                return Err(format!("127.0.0.1:{port} has cluster_state:{state}"));
            }
            let known = field("cluster_known_nodes");
            if known != ports.len().to_string() {
                return Err(format!(
                    "127.0.0.1:{port} knows {known} nodes, not {}",
                    ports.len()
                ));
            }
            let map = slot_map(&mut con).map_err(|e| format!("CLUSTER SLOTS on 127.0.0.1:{port}: {e}"))?;
            check_coverage(&map, &ports).map_err(|e| format!("CLUSTER SLOTS on 127.0.0.1:{port}: {e}"))?;
            match &agreed {
                None => agreed = Some((*port, map)),
                Some((first, first_map)) if *first_map != map => {
                    return Err(format!(
                        "127.0.0.1:{first} and 127.0.0.1:{port} disagree: {first_map:?} vs {map:?}"
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// `CLUSTER SLOTS` of the first node that answers.
    fn current_slot_map(&self) -> SlotMap {
        let mut errors = Vec::new();
        for port in self.ports() {
            match connect(port)
                .map_err(|e| e.to_string())
                .and_then(|mut con| slot_map(&mut con))
            {
                Ok(map) => return map,
                Err(e) => errors.push(format!("127.0.0.1:{port}: {e}")),
            }
        }
        panic!("no cluster node answers CLUSTER SLOTS: {}", errors.join("; "));
    }

    /// The last lines of every node's `redis.log`.
    fn log_tails(&self) -> String {
        let mut text = String::new();
        for node in &self.nodes {
            let log =
                std::fs::read_to_string(node.log_path()).unwrap_or_else(|e| format!("(cannot read: {e})"));
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
            let _ = writeln!(text, "end of {}:\n{tail}", node.log_path().display());
        }
        text
    }
}

static SHARED: OnceLock<RedisCluster> = OnceLock::new();

/// The 3-master [`RedisCluster`] shared by all tests of this test binary,
/// started on first use.
///
/// Like [`shared_redis`](crate::shared_redis), the nodes are started from a
/// dedicated thread that parks forever (their parent-death signal fires
/// when the *thread* that spawned them exits), the cluster is a static
/// that is never dropped, and an `atexit` hook kills the nodes by PID and
/// removes their temp dir when the process exits.
///
/// Tests keep apart by using their own keys (e.g. their own
/// [`unique_queue`](crate::unique_queue)). Tests that move slots, or stop
/// nodes, start their own [`RedisCluster`] instead.
///
/// Panics like [`RedisCluster::start`] when the cluster cannot be started.
pub fn shared_cluster() -> &'static RedisCluster {
    SHARED.get_or_init(start_shared)
}

fn start_shared() -> RedisCluster {
    let (tx, rx) = mpsc::channel();
    thread::Builder::new()
        .name("shared-cluster".into())
        .spawn(move || {
            let cluster = match std::panic::catch_unwind(|| RedisCluster::start(3)) {
                Ok(cluster) => cluster,
                Err(panic) => {
                    let msg = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_else(|| "(no message)".to_owned());
                    let _ = tx.send(Err(msg));
                    return;
                }
            };
            // Nodes first, each with its own data dir; the last one also
            // removes the cluster's dir (after all nodes are killed).
            let last = cluster.nodes.len() - 1;
            for (n, node) in cluster.nodes.iter().enumerate() {
                let dir = if n == last {
                    cluster.dir.path()
                } else {
                    node.data_dir()
                };
                super::exit::stop_at_exit(node.pid(), dir.to_path_buf());
            }
            let _ = tx.send(Ok(cluster));
            // This thread spawned the nodes and must never exit: its exit
            // would fire their parent-death signal.
            loop {
                thread::park();
            }
        })
        .expect("cannot spawn the shared-cluster thread");
    match rx.recv() {
        Ok(Ok(cluster)) => cluster,
        Ok(Err(msg)) => panic!("cannot start the shared redis cluster for this test binary: {msg}"),
        Err(_) => panic!("the shared-cluster thread died before reporting"),
    }
}

/// Panics naming the package when `redis-server` or `redis-cli` is missing.
fn check_binaries() {
    if let Err(e) = redis_server_version() {
        panic!("cannot start a redis cluster: {e}");
    }
    match Command::new(REDIS_CLI)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => panic!("{CLI_MISSING}"),
        Err(e) => panic!("cannot run `redis-cli --version`: {e}"),
    }
}

/// Starts node `n` in `root/node-n` on a free client port and a free bus
/// port; returns it and its bus port. Tries new ports when a start fails.
fn start_node(root: &Path, n: usize) -> (RedisServer, u16) {
    let dir = root.join(format!("node-{n}"));
    let mut errors = Vec::new();
    for _ in 0..NODE_ATTEMPTS {
        // A failed start may leave a nodes.conf behind: start afresh.
        let _ = std::fs::remove_dir_all(&dir);
        let (port, bus_port) = two_free_ports();
        let opts = ServerOptions {
            transport: Transport::Tcp { port: Some(port) },
            data_dir: Some(dir.clone()),
            extra_args: vec![
                "--cluster-enabled".into(),
                "yes".into(),
                "--cluster-config-file".into(),
                dir.join("nodes.conf").to_string_lossy().into_owned(),
                "--cluster-port".into(),
                bus_port.to_string(),
                "--cluster-node-timeout".into(),
                NODE_TIMEOUT_MS.to_string(),
            ],
            ..ServerOptions::default()
        };
        match RedisServer::start(opts) {
            Ok(node) => return (node, bus_port),
            Err(e) => errors.push(format!("ports {port}/{bus_port}: {e}")),
        }
    }
    panic!(
        "cannot start cluster node {n} after {NODE_ATTEMPTS} attempts on free ports:\n{}",
        errors.join("\n")
    );
}

/// Two distinct free loopback ports (both bound at once, then released).
fn two_free_ports() -> (u16, u16) {
    let bind = || {
        TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .unwrap_or_else(|e| panic!("cannot bind a free loopback port: {e}"))
    };
    let (a, b) = (bind(), bind());
    let port = |l: &TcpListener| l.local_addr().expect("a bound listener has an address").port();
    (port(&a), port(&b))
}

/// A connection to `127.0.0.1:port` with [`CONNECT_TIMEOUT`] and
/// [`IO_TIMEOUT`].
fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let con = client.get_connection_with_timeout(CONNECT_TIMEOUT)?;
    con.set_read_timeout(Some(IO_TIMEOUT))?;
    con.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(con)
}

/// Runs `args` on `con` (the node on `port`); panics with the error, naming
/// `what` and the node.
fn exec<T: redis::FromRedisValue>(con: &mut redis::Connection, port: u16, what: &str, args: &[&str]) -> T {
    let mut cmd = redis::Cmd::new();
    for arg in args {
        cmd.arg(*arg);
    }
    cmd.query(con)
        .unwrap_or_else(|e| panic!("{what} (`{}`) on 127.0.0.1:{port} failed: {e}", args.join(" ")))
}

/// `CLUSTER SLOTS` as a [`SlotMap`].
fn slot_map(con: &mut redis::Connection) -> Result<SlotMap, String> {
    use redis::Value;
    let reply: Vec<Vec<Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(con)
        .map_err(|e| e.to_string())?;
    let mut map = SlotMap::new();
    for range in &reply {
        let parsed = match range.as_slice() {
            [Value::Int(first), Value::Int(last), Value::Array(master), ..] => match master.as_slice() {
                [_, Value::Int(port), ..] => Some((*first, *last, *port)),
                _ => None,
            },
            _ => None,
        };
        let (first, last, port) =
            parsed.ok_or_else(|| format!("unexpected CLUSTER SLOTS entry {range:?}"))?;
        let narrow =
            |v: i64| u16::try_from(v).map_err(|_| format!("out of range in CLUSTER SLOTS: {range:?}"));
        map.push((narrow(first)?, narrow(last)?, narrow(port)?));
    }
    map.sort_unstable();
    Ok(map)
}

/// `Ok` when `map` covers every slot exactly once with masters in `ports`.
fn check_coverage(map: &SlotMap, ports: &[u16]) -> Result<(), String> {
    let mut next = 0u32;
    for &(first, last, port) in map {
        if u32::from(first) != next || last < first {
            return Err(format!("slots {next}.. are not covered as expected: {map:?}"));
        }
        if !ports.contains(&port) {
            return Err(format!("slots {first}-{last} are served by unknown port {port}"));
        }
        next = u32::from(last) + 1;
    }
    if next != u32::from(SLOTS) {
        return Err(format!("slots {next}.. are not covered: {map:?}"));
    }
    Ok(())
}

/// The hash slot of `key`, as Redis computes it.
fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

/// The part of `key` that is hashed: the content of the first `{…}` when
/// it is not empty, else the whole key.
fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        let rest = &key[open + 1..];
        if let Some(close) = rest.iter().position(|&b| b == b'}') {
            if close > 0 {
                return &rest[..close];
            }
        }
    }
    key
}

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), Redis Cluster's
/// key hash.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Everything left in `file` (a temp file a child wrote), from the start.
fn read_all(mut file: File) -> String {
    let mut bytes = Vec::new();
    let read = file
        .seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_end(&mut bytes));
    match read {
        Ok(_) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => format!("(cannot read: {e})"),
    }
}
