//! Checks the ZooKeeper test support (shared and private servers, kill -9 and
//! restart, a 3-member ensemble losing its leader), and the zookeeper-client
//! 0.11 calls that `docs/zookeeper-notes.md` describes, against a real
//! ZooKeeper (Debian's 3.8 package), kazoo and taskflow.

use std::time::{Duration, Instant};

use jobworker_tests::{
    run_python_async, shared_zookeeper, unique_queue, wait_until, ZooKeeperEnsemble, ZooKeeperMode,
    ZooKeeperOptions, ZooKeeperServer, ENSEMBLE_TIMEOUT,
};
use serde_json::Value;
use zookeeper_client as zk;

/// Persistent znodes readable and writable by anyone (kazoo's default ACL).
const PERSISTENT: &zk::CreateOptions<'static> = &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
const SEQUENTIAL: &zk::CreateOptions<'static> =
    &zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
const EPHEMERAL: &zk::CreateOptions<'static> = &zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
const LONG: Duration = Duration::from_secs(30);

/// True while a process with `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(stat.rsplit(')').next().map(str::trim_start), Some(s) if s.starts_with('Z')),
        Err(_) => false,
    }
}

/// A fresh absolute path for one test, e.g. `/zk-3fa9c01e0`.
fn unique_path(prefix: &str) -> String {
    format!("/{}", unique_queue(prefix))
}

async fn connect(connect_string: &str, session: Duration) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(session)
        .connect(connect_string)
        .await
        .unwrap_or_else(|e| panic!("connect to {connect_string}: {e}"))
}

#[test]
fn shared_zookeeper_answers_ruok() {
    let server = shared_zookeeper();
    eprintln!("shared ZooKeeper started in {:?}", server.startup_time());
    assert!(
        server.connect_string().starts_with("127.0.0.1:"),
        "{}",
        server.connect_string()
    );
    assert_eq!(server.four_letter_word("ruok").unwrap(), "imok");
    let srvr = server.four_letter_word("srvr").unwrap();
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
    // kazoo's server_version() (taskflow's connect-time check) reads `envi`.
    let envi = server.four_letter_word("envi").unwrap();
    assert!(envi.contains("zookeeper.version=3."), "{envi}");
    let conf = server.four_letter_word("conf").unwrap();
    assert!(
        conf.contains("tickTime=200\n") && conf.contains("maxSessionTimeout=60000\n"),
        "{conf}"
    );
    assert!(server.is_running());
    assert!(std::ptr::eq(server, shared_zookeeper()), "one server per binary");
}

#[test]
fn shared_zookeeper_outlives_the_thread_that_first_asked() {
    let pid = std::thread::spawn(|| shared_zookeeper().pid()).join().unwrap();
    assert_eq!(pid, shared_zookeeper().pid());
    // Kept: watching it live through a while after the thread's exit is
    // the test.
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        assert!(alive(pid), "shared ZooKeeper {pid} died with a test thread");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test]
async fn shared_zookeeper_serves_a_rust_client() {
    let client = shared_zookeeper().client().await;
    let root = unique_path("zk-basic");
    client.create(&root, b"hello", PERSISTENT).await.unwrap();
    let (data, stat) = client.get_data(&root).await.unwrap();
    assert_eq!(data, b"hello");
    assert_eq!(stat.version, 0);
    assert_eq!(stat.ephemeral_owner, 0);
}

#[test]
fn private_server_dies_with_a_dropped_handle_only() {
    // Started on a short-lived thread, it keeps running after that thread ends.
    let server = std::thread::spawn(|| ZooKeeperServer::start(ZooKeeperOptions::default()).unwrap())
        .join()
        .unwrap();
    let (pid, dir) = (server.pid(), server.dir().to_path_buf());
    assert_ne!(server.port(), shared_zookeeper().port());
    // Kept: that it outlives its thread for a while is the test.
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        server.is_running() && alive(pid),
        "private ZooKeeper died with its starting thread"
    );
    assert!(dir.join("zoo.cfg").is_file() && server.log_path().is_file());
    drop(server);
    assert!(!alive(pid), "dropped ZooKeeper {pid} still runs");
    assert!(!dir.exists(), "temp dir {} was not removed", dir.display());
}

#[tokio::test(flavor = "multi_thread")]
async fn private_server_survives_kill_9_and_restart_with_its_data() {
    let mut server = ZooKeeperServer::start(ZooKeeperOptions::default()).unwrap();
    let (port, first_pid) = (server.port(), server.pid());
    eprintln!("private ZooKeeper started in {:?}", server.startup_time());

    // One client that stays connected through the outage, with a session
    // long enough to outlive it.
    let survivor = connect(&server.connect_string(), Duration::from_secs(20)).await;
    let mut states = survivor.state_watcher();
    survivor.create("/kept", b"before", PERSISTENT).await.unwrap();
    let (_, seq) = survivor.create("/kept/job", b"{}", SEQUENTIAL).await.unwrap();
    survivor
        .create("/kept/job0000000000.lock", b"{\"owner\": \"w\"}", EPHEMERAL)
        .await
        .unwrap();
    assert_eq!(seq.to_string(), "0000000000");

    server.kill().unwrap();
    assert!(!server.is_running());
    assert!(!alive(first_pid), "killed ZooKeeper {first_pid} still exists");
    assert_eq!(states.changed().await, zk::SessionState::Disconnected);

    // A request sent during the outage waits for the reconnect.
    let pending = {
        let client = survivor.clone();
        tokio::spawn(async move { client.get_data("/kept").await })
    };
    let restarted = Instant::now();
    server.restart().unwrap();
    eprintln!("private ZooKeeper restarted in {:?}", server.startup_time());
    assert_eq!(server.port(), port, "restart keeps the port");
    assert_ne!(server.pid(), first_pid);
    assert_eq!(states.changed().await, zk::SessionState::SyncConnected);
    eprintln!(
        "old session reconnected {:?} after the restart began",
        restarted.elapsed()
    );
    assert_eq!(pending.await.unwrap().unwrap().0, b"before");

    // A fresh client sees what was written before the kill, ephemeral included.
    let fresh = server.client().await;
    assert_eq!(fresh.get_data("/kept").await.unwrap().0, b"before");
    let (lock, lock_stat) = fresh.get_data("/kept/job0000000000.lock").await.unwrap();
    assert_eq!(lock, b"{\"owner\": \"w\"}");
    assert_eq!(lock_stat.ephemeral_owner, survivor.session_id().0);
    let mut children = fresh.list_children("/kept").await.unwrap();
    children.sort();
    assert_eq!(children, ["job0000000000", "job0000000000.lock"]);
    // Sequence numbers go on where they were.
    let (_, next) = fresh.create("/kept/job", b"{}", SEQUENTIAL).await.unwrap();
    assert_eq!(next.into_i64(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn client_expires_its_session_when_the_server_stays_down() {
    let mut server = ZooKeeperServer::start(ZooKeeperOptions::default()).unwrap();
    let client = connect(&server.connect_string(), Duration::from_secs(2)).await;
    assert_eq!(client.session_timeout(), Duration::from_secs(2));
    client.create("/lease", b"", EPHEMERAL).await.unwrap();
    let (_, _, watcher) = client.get_and_watch_data("/lease").await.unwrap();
    let mut states = client.state_watcher();

    server.kill().unwrap();
    let killed = Instant::now();
    assert_eq!(states.changed().await, zk::SessionState::Disconnected);
    // The client gives up on its own after 7/5 of the session timeout.
    assert_eq!(states.changed().await, zk::SessionState::Expired);
    let expired_after = killed.elapsed();
    eprintln!("client-side Expired {expired_after:?} after the server was killed (2 s session)");
    assert!(expired_after >= Duration::from_secs(2), "{expired_after:?}");
    let event = watcher.changed().await;
    assert_eq!(
        (event.event_type, event.session_state),
        (zk::EventType::Session, zk::SessionState::Expired)
    );
    assert_eq!(client.get_data("/").await.unwrap_err(), zk::Error::SessionExpired);
    assert!(client.state().is_terminated());

    // The restarted server restores the session from its log and expires it
    // one session timeout later: the ephemeral goes away by itself.
    server.restart().unwrap();
    let other = server.client().await;
    assert!(
        other.check_stat("/lease").await.unwrap().is_some(),
        "session restored with the data"
    );
    let restarted = Instant::now();
    wait_until("the restored session's ephemeral to go", LONG, || {
        let other = other.clone();
        async move { other.check_stat("/lease").await.unwrap().is_none() }
    })
    .await;
    eprintln!("ephemeral gone {:?} after the restart", restarted.elapsed());
}

#[tokio::test(flavor = "multi_thread")]
async fn watches_across_a_server_restart() {
    let mut server = ZooKeeperServer::start(ZooKeeperOptions::default()).unwrap();
    let client = connect(&server.connect_string(), Duration::from_secs(10)).await;
    client.create("/jobs", b"", PERSISTENT).await.unwrap();
    client.create("/other", b"", PERSISTENT).await.unwrap();
    let (_, oneshot) = client.list_and_watch_children("/jobs").await.unwrap();
    let mut persistent = client
        .watch("/other", zk::AddWatchMode::PersistentRecursive)
        .await
        .unwrap();

    server.kill().unwrap();
    server.restart().unwrap();
    // A persistent watcher sees the session events...
    let event = tokio::time::timeout(LONG, persistent.changed()).await.unwrap();
    assert_eq!(
        (event.event_type, event.session_state),
        (zk::EventType::Session, zk::SessionState::Disconnected)
    );
    let event = tokio::time::timeout(LONG, persistent.changed()).await.unwrap();
    assert_eq!(
        (event.event_type, event.session_state),
        (zk::EventType::Session, zk::SessionState::SyncConnected)
    );

    // ...a one-shot watch armed before the outage is re-set on reconnect...
    client.create("/jobs/job", b"{}", SEQUENTIAL).await.unwrap();
    let event = tokio::time::timeout(LONG, oneshot.changed()).await.unwrap();
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (zk::EventType::NodeChildrenChanged, "/jobs")
    );

    // ...but zookeeper-client 0.11.2 does not re-send persistent watches
    // (`resend_watches` only ever sends SetWatches, never SetWatches2), so
    // the board must add them again after every SyncConnected.
    client.create("/other/lost", b"", PERSISTENT).await.unwrap();
    let lost = tokio::time::timeout(Duration::from_millis(500), persistent.changed()).await;
    eprintln!("persistent watch after a reconnect, not re-added: {lost:?}");
    let _again = client
        .watch("/other", zk::AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    client.create("/other/seen", b"", PERSISTENT).await.unwrap();
    let event = tokio::time::timeout(LONG, persistent.changed()).await.unwrap();
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (zk::EventType::NodeCreated, "/other/seen")
    );
}

#[tokio::test]
async fn multi_ops_claim_consume_and_trash_like_taskflow() {
    let client = shared_zookeeper().client().await;
    let path = format!("{}/jobs", unique_path("zk-multi"));
    let trash = path.replace("/jobs", "/.trash");
    client.mkdir(&path, PERSISTENT).await.unwrap();
    client.mkdir(&trash, PERSISTENT).await.unwrap();

    // post
    let body = br#"{"uuid": "u1", "name": "n", "priority": "NORMAL", "details": {}}"#;
    let (_, seq) = client
        .create(&format!("{path}/job"), body, SEQUENTIAL)
        .await
        .unwrap();
    let job = format!("{path}/job{seq}");
    let lock = format!("{job}.lock");

    // claim: get(job) for its version, then check(job, version) + create(lock)
    let (_, job_stat) = client.get_data(&job).await.unwrap();
    let mut txn = client.new_multi_writer();
    txn.add_check_version(&job, job_stat.version).unwrap();
    txn.add_create(&lock, br#"{"owner": "w1"}"#, EPHEMERAL).unwrap();
    let results = txn.commit().await.unwrap();
    assert!(
        matches!(&results[..], [zk::MultiWriteResult::Check, zk::MultiWriteResult::Create { path, .. }] if *path == lock)
    );

    // A second claim fails on the create (index 1) and changes nothing.
    let mut txn = client.new_multi_writer();
    txn.add_check_version(&job, job_stat.version).unwrap();
    txn.add_create(&lock, br#"{"owner": "w2"}"#, EPHEMERAL).unwrap();
    assert_eq!(
        txn.commit().await.unwrap_err(),
        zk::MultiWriteError::OperationFailed {
            index: 1,
            source: zk::Error::NodeExists
        }
    );
    // A stale version fails on the check (index 0).
    let mut txn = client.new_multi_writer();
    txn.add_check_version(&job, job_stat.version + 1).unwrap();
    txn.add_create(&lock, b"{}", EPHEMERAL).unwrap();
    assert_eq!(
        txn.commit().await.unwrap_err(),
        zk::MultiWriteError::OperationFailed {
            index: 0,
            source: zk::Error::BadVersion
        }
    );
    // A missing job fails on the check with NoNode.
    let mut txn = client.new_multi_writer();
    txn.add_check_version(&format!("{path}/job9999999999"), 0)
        .unwrap();
    txn.add_create(&format!("{path}/job9999999999.lock"), b"{}", EPHEMERAL)
        .unwrap();
    assert_eq!(
        txn.commit().await.unwrap_err(),
        zk::MultiWriteError::OperationFailed {
            index: 0,
            source: zk::Error::NoNode
        }
    );

    // trash: create(trash/<basename>) + delete(lock, v) + delete(job, v)
    let (_, lock_stat) = client.get_data(&lock).await.unwrap();
    let (data, job_stat) = client.get_data(&job).await.unwrap();
    let mut txn = client.new_multi_writer();
    txn.add_create(&format!("{trash}/job{seq}"), &data, PERSISTENT)
        .unwrap();
    txn.add_delete(&lock, Some(lock_stat.version)).unwrap();
    txn.add_delete(&job, Some(job_stat.version)).unwrap();
    let results = txn.commit().await.unwrap();
    assert_eq!(results.len(), 3);
    assert!(client.check_stat(&job).await.unwrap().is_none());
    assert_eq!(
        client.get_data(&format!("{trash}/job{seq}")).await.unwrap().0,
        data
    );

    // consume of a job whose lock is gone: nothing is deleted.
    let (_, seq2) = client
        .create(&format!("{path}/job"), body, SEQUENTIAL)
        .await
        .unwrap();
    let job2 = format!("{path}/job{seq2}");
    let mut txn = client.new_multi_writer();
    txn.add_delete(&format!("{job2}.lock"), None).unwrap();
    txn.add_delete(&job2, None).unwrap();
    assert_eq!(
        txn.commit().await.unwrap_err(),
        zk::MultiWriteError::OperationFailed {
            index: 0,
            source: zk::Error::NoNode
        }
    );
    assert!(client.check_stat(&job2).await.unwrap().is_some());
}

#[tokio::test]
async fn watches_chroot_and_ephemerals() {
    let server = shared_zookeeper();
    let root = unique_path("zk-watch");
    let admin = server.client().await;

    // A chroot that does not exist yet: connecting works, writes fail NoNode.
    let chrooted = connect(&server.connect_string_with_chroot(&root), Duration::from_secs(6)).await;
    assert_eq!(chrooted.path(), root);
    assert_eq!(
        chrooted.create("/jobs", b"", PERSISTENT).await.unwrap_err(),
        zk::Error::NoNode
    );
    assert_eq!(
        chrooted.mkdir("/jobs", PERSISTENT).await.unwrap_err(),
        zk::Error::NoNode
    );
    admin.create(&root, b"", PERSISTENT).await.unwrap();
    chrooted.mkdir("/jobs", PERSISTENT).await.unwrap();
    assert!(admin.check_stat(&format!("{root}/jobs")).await.unwrap().is_some());

    // One-shot child watch, paths relative to the chroot.
    let (children, watcher) = chrooted.list_and_watch_children("/jobs").await.unwrap();
    assert!(children.is_empty());
    let (_, seq) = admin
        .create(&format!("{root}/jobs/job"), b"{}", SEQUENTIAL)
        .await
        .unwrap();
    let event = tokio::time::timeout(LONG, watcher.changed()).await.unwrap();
    assert_eq!(event.event_type, zk::EventType::NodeChildrenChanged);
    assert_eq!(event.path, "/jobs");

    // Persistent recursive watch: every create/delete below, until dropped.
    let mut persistent = chrooted
        .watch("/jobs", zk::AddWatchMode::PersistentRecursive)
        .await
        .unwrap();
    let lock = format!("/jobs/job{seq}.lock");
    let (stat, _) = chrooted
        .create(&lock, br#"{"owner": "w"}"#, EPHEMERAL)
        .await
        .unwrap();
    assert_eq!(stat.ephemeral_owner, chrooted.session_id().0);
    let event = tokio::time::timeout(LONG, persistent.changed()).await.unwrap();
    assert_eq!(
        (event.event_type, event.path.as_str()),
        (zk::EventType::NodeCreated, lock.as_str())
    );

    // Closing the client (drop) ends its session at once: ephemerals go.
    let (_, watcher) = admin
        .check_and_watch_stat(&format!("{root}{lock}"))
        .await
        .unwrap();
    let mut states = chrooted.state_watcher();
    drop(persistent);
    drop(chrooted);
    assert_eq!(states.changed().await, zk::SessionState::Closed);
    let event = tokio::time::timeout(LONG, watcher.changed()).await.unwrap();
    assert_eq!(event.event_type, zk::EventType::NodeDeleted);
}

const KAZOO_SCRIPT: &str = r#"
import json, sys
from kazoo.client import KazooClient
hosts, base = sys.argv[1], sys.argv[2]
zk = KazooClient(hosts=hosts, timeout=10)
zk.start(timeout=10)
version = zk.server_version()
data, stat = zk.get(base + "/from-rust")
zk.create(base + "/from-kazoo/lock", b'{"owner": "kazoo"}', ephemeral=False, makepath=True)
job = zk.create(base + "/jobs/job", b"{}", sequence=True, makepath=True)
acl, _ = zk.get_acls(base + "/from-rust")
zk.delete(base + "/from-rust")
zk.stop()
zk.close()
print(json.dumps({
    "version": list(version),
    "from_rust": data.decode(),
    "from_rust_ephemeral": stat.ephemeralOwner != 0,
    "job": job,
    "acl": [[a.perms, a.id.scheme, a.id.id] for a in acl],
}))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn kazoo_and_rust_share_znodes() {
    let server = shared_zookeeper();
    let base = unique_path("zk-kazoo");
    let client = server.client().await;
    client.create(&base, b"", PERSISTENT).await.unwrap();
    client
        .create(&format!("{base}/from-rust"), br#"{"owner": "rust"}"#, EPHEMERAL)
        .await
        .unwrap();

    let out = run_python_async(KAZOO_SCRIPT, &[&server.connect_string(), &base])
        .await
        .json();
    assert_eq!(out["version"][0], 3, "{out}");
    assert_eq!(out["from_rust"], r#"{"owner": "rust"}"#);
    assert_eq!(out["from_rust_ephemeral"], true);
    // kazoo may delete a Rust znode (world:anyone, all permissions = 31).
    assert_eq!(out["acl"], serde_json::json!([[31, "world", "anyone"]]));
    assert!(client
        .check_stat(&format!("{base}/from-rust"))
        .await
        .unwrap()
        .is_none());
    // Sequence numbers are per parent: `jobs` is new, so this is the first.
    assert_eq!(out["job"], format!("{base}/jobs/job0000000000"));
    let (data, _) = client.get_data(&format!("{base}/from-kazoo/lock")).await.unwrap();
    assert_eq!(data, br#"{"owner": "kazoo"}"#);
    let acl = client
        .get_acl(&format!("{base}/from-kazoo/lock"))
        .await
        .unwrap()
        .0;
    assert_eq!((acl[0].scheme(), acl[0].id()), ("world", "anyone"));
    assert!(acl[0].permission().has(zk::Permission::ALL));
}

const TASKFLOW_SCRIPT: &str = r#"
import json, sys
from taskflow.jobs.backends import impl_zookeeper
hosts, path, command = sys.argv[1:4]
board = impl_zookeeper.ZookeeperJobBoard("interop", {"hosts": hosts, "path": path})
board.connect()
try:
    if command == "post":
        job = board.post("resize", details={"k": "v"})
        out = {"uuid": job.uuid, "path": job.path}
    else:
        out = [{"uuid": j.uuid, "state": j.state, "owner": board.find_owner(j)}
               for j in board.iterjobs(ensure_fresh=True)]
finally:
    board.close()
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn taskflow_board_sees_a_rust_claim() {
    let server = shared_zookeeper();
    let path = format!("{}/jobs", unique_path("zk-taskflow"));
    let taskflow = |command: &'static str| {
        let (hosts, path) = (server.connect_string(), path.clone());
        async move {
            run_python_async(TASKFLOW_SCRIPT, &[&hosts, &path, command])
                .await
                .json()
        }
    };
    let posted = taskflow("post").await;
    let job = posted["path"].as_str().unwrap().to_owned();
    assert_eq!(job, format!("{path}/job0000000000"));

    let client = server.client().await;
    // connect() made the path and the trash; the posting is Python's JSON.
    assert!(client
        .check_stat(&path.replace("/jobs", "/.trash"))
        .await
        .unwrap()
        .is_some());
    let (data, stat) = client.get_data(&job).await.unwrap();
    let posting: Value = serde_json::from_slice(&data).unwrap();
    assert_eq!(posting["uuid"], posted["uuid"]);
    assert!(
        String::from_utf8(data).unwrap().starts_with(&format!(
            r#"{{"uuid": "{}", "name": "resize""#,
            posted["uuid"].as_str().unwrap()
        )),
        "key order and separators"
    );

    let mut txn = client.new_multi_writer();
    txn.add_check_version(&job, stat.version).unwrap();
    txn.add_create(&format!("{job}.lock"), br#"{"owner": "rust-worker"}"#, EPHEMERAL)
        .unwrap();
    txn.commit().await.unwrap();

    let listed = taskflow("list").await;
    assert_eq!(listed[0]["uuid"], posted["uuid"], "{listed}");
    assert_eq!(listed[0]["state"], "CLAIMED");
    assert_eq!(listed[0]["owner"], "rust-worker");
}

/// A 3-member ensemble on loopback ports: a znode written through one
/// member reads through another; kill -9 of the leader makes the other two
/// elect a new one, the znode stays readable, and the killed member,
/// restarted on its ports and dir, rejoins the quorum.
#[tokio::test(flavor = "multi_thread")]
async fn ensemble_elects_a_new_leader_after_kill_9_and_takes_the_old_one_back() {
    let starting = Instant::now();
    let mut ensemble = tokio::task::block_in_place(|| ZooKeeperEnsemble::start(3));
    let leader = ensemble.leader();
    eprintln!(
        "ensemble: 3 members up in {:?}, member {leader} leads",
        starting.elapsed()
    );
    let hosts: Vec<String> = (0..3)
        .map(|i| format!("127.0.0.1:{}", ensemble.port(i)))
        .collect();
    assert_eq!(ensemble.connect_string(), hosts.join(","));
    let followers = (0..3).filter(|&i| ensemble.mode(i) == Some(ZooKeeperMode::Follower));
    assert_eq!(followers.count(), 2, "{}", ensemble.modes_text());
    let (writer, reader) = ((leader + 1) % 3, (leader + 2) % 3);

    let writing = connect(&ensemble.member(writer).connect_string(), Duration::from_secs(20)).await;
    writing.create("/ensemble", b"quorum", PERSISTENT).await.unwrap();
    let reading = connect(&ensemble.member(reader).connect_string(), Duration::from_secs(20)).await;
    // A follower may answer before it applied the write: sync first.
    reading.sync("/ensemble").await.unwrap();
    assert_eq!(reading.get_data("/ensemble").await.unwrap().0, b"quorum");

    let old_pid = ensemble.pid(leader);
    let killed = Instant::now();
    ensemble.kill(leader);
    assert!(
        !ensemble.is_running(leader) && !alive(old_pid),
        "leader {old_pid} still runs"
    );
    let new_leader = tokio::task::block_in_place(|| ensemble.wait_new_leader(leader, ENSEMBLE_TIMEOUT));
    let election = killed.elapsed();
    eprintln!("ensemble: member {new_leader} elected leader {election:?} after kill -9 of leader {leader}");
    assert_ne!(new_leader, leader);
    // Both clients stay usable: each is on a surviving member.
    for client in [&reading, &writing] {
        client.sync("/ensemble").await.unwrap();
        assert_eq!(client.get_data("/ensemble").await.unwrap().0, b"quorum");
    }
    let any = connect(&ensemble.connect_string(), Duration::from_secs(20)).await;
    assert_eq!(any.get_data("/ensemble").await.unwrap().0, b"quorum");
    any.set_data("/ensemble", b"two of three", None).await.unwrap();

    let restarting = Instant::now();
    tokio::task::block_in_place(|| ensemble.restart(leader));
    eprintln!(
        "ensemble: member {leader} rejoined {:?} after its restart began",
        restarting.elapsed()
    );
    assert_ne!(ensemble.pid(leader), old_pid);
    assert!(matches!(
        ensemble.mode(leader),
        Some(ZooKeeperMode::Follower | ZooKeeperMode::Leader)
    ));
    let settled = tokio::task::block_in_place(|| ensemble.wait_leader(ENSEMBLE_TIMEOUT));
    assert!(ensemble.is_running(settled));
    // The rejoined member has the write made while it was down.
    let rejoined = connect(&ensemble.member(leader).connect_string(), Duration::from_secs(20)).await;
    rejoined.sync("/ensemble").await.unwrap();
    assert_eq!(rejoined.get_data("/ensemble").await.unwrap().0, b"two of three");
    let sessions = ensemble.established_sessions();
    assert!(sessions.len() >= 4, "{sessions:?}");
    let pids: Vec<u32> = (0..3).map(|i| ensemble.pid(i)).collect();
    drop(ensemble);
    assert!(
        pids.iter().all(|&p| !alive(p)),
        "a member outlived the ensemble: {pids:?}"
    );
}
