//! The `jobworker` binary on a ZooKeeper board reached over TLS
//! (`--zookeeper-ca`, `--zookeeper-cert`, `--zookeeper-key`, or their
//! `JOBWORKER_ZOOKEEPER_*` variables): commands work, the supervisor's
//! workers and its agent connect with TLS and drain the queue, and a
//! command without the CA is refused with exit 4 (unavailable).

mod common;

use common::runs::logged;
use common::Supervisor;
use jobworker_examples::scripted::Action;
use jobworker_tests::{unique_queue, TlsZooKeeper};

#[test]
fn workers_and_commands_use_tls_when_given_the_ca() {
    let zk = TlsZooKeeper::start("need").expect("start a TLS ZooKeeper");
    let connect = format!("{}/{}", zk.secure_connect_string(), unique_queue("zk-tls"));
    let c = &zk.certs;
    let (ca, cert, key) = (
        c.ca.display().to_string(),
        c.client_cert.display().to_string(),
        c.client_key.display().to_string(),
    );
    let tls = [
        "--zookeeper",
        &connect,
        "--zookeeper-ca",
        &ca,
        "--zookeeper-cert",
        &cert,
        "--zookeeper-key",
        &key,
    ];
    let q = unique_queue("tls-e2e");
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs.log");
    let args = serde_json::to_string(&logged(Action::Ok, 0, &runs)).unwrap();
    for _ in 0..4 {
        let (code, _, err) = common::cli::output_of(
            common::cli::jobworker_command()
                .args(tls)
                .args(["post", "scripted", "-q", &q, "--args", &args]),
        );
        assert_eq!(code, 0, "{err}");
    }
    let (code, _, err) = common::cli::output_of(common::cli::jobworker_command().args([
        "--zookeeper",
        &connect,
        "count",
        "-q",
        &q,
    ]));
    assert_eq!(code, 4, "without TLS: unavailable: {err}");

    // The variables instead of the flags, for the supervisor and its forks.
    let env = [
        ("JOBWORKER_ZOOKEEPER", connect.as_str()),
        ("JOBWORKER_ZOOKEEPER_CA", ca.as_str()),
        ("JOBWORKER_ZOOKEEPER_CERT", cert.as_str()),
        ("JOBWORKER_ZOOKEEPER_KEY", key.as_str()),
    ];
    let mut sup = Supervisor::start_with_env(&[], &q, &["--workers", "2", "--until-drained"], None, &env);
    let status = sup.wait_exit(std::time::Duration::from_secs(120));
    assert!(status.success(), "{}", sup.log());
    let ran = std::fs::read_to_string(&runs).unwrap_or_default();
    let ended_ok = ran
        .lines()
        .filter(|l| l.starts_with("end ") && l.ends_with(" ok"));
    assert_eq!(ended_ok.count(), 4, "each job ran once: {ran}\n{}", sup.log());
    let (code, count, err) = common::cli::output_of(
        common::cli::jobworker_command()
            .args(tls)
            .args(["count", "-q", &q]),
    );
    assert_eq!((code, count.trim()), (0, "0"), "{err}");
}
