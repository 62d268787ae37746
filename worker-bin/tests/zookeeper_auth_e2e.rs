//! The `jobworker` binary on a ZooKeeper board with digest credentials
//! (`JOBWORKER_ZOOKEEPER=user:password@host:port/root`): the supervisor's
//! workers run the jobs, the commands work, the password shows nowhere,
//! and a command without the credentials is refused with a clear error.

mod common;

use std::time::Duration;

use common::runs::logged;
use common::Supervisor;
use jobworker_examples::scripted::Action;
use jobworker_tests::{shared_zookeeper, unique_queue, wait_until};

const PASSWORD: &str = "pa55-w0rd-never-shown";

/// Runs the command line with `zookeeper` in the environment; returns
/// (exit code, stdout, stderr).
fn cli(zookeeper: &str, args: &[&str]) -> (i32, String, String) {
    common::cli::output_of(
        common::cli::jobworker_command()
            .env("JOBWORKER_ZOOKEEPER", zookeeper)
            .args(args),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn workers_run_jobs_with_credentials_and_the_password_shows_nowhere() {
    let plain = format!(
        "{}/{}",
        shared_zookeeper().connect_string(),
        unique_queue("zk-auth-e2e")
    );
    let authed = format!("app:{PASSWORD}@{plain}");
    let q = unique_queue("zk-auth");
    let dir = tempfile::tempdir().unwrap();
    let script = logged(Action::Ok, 0, &dir.path().join("runs.log"));
    let args = serde_json::to_string(&script).unwrap();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (code, id, err) = cli(&authed, &["post", "scripted", "-q", &q, "--args", &args]);
        assert_eq!(code, 0, "{err}");
        ids.push(id.trim().to_owned());
    }

    // Without the credentials: refused, and nothing changes.
    let (code, _, err) = cli(&plain, &["list", "-q", &q]);
    assert!(code == 4 && err.contains("refused access"), "exit {code}: {err}");
    let (code, _, err) = cli(&format!("app:wrong@{plain}"), &["post", "x", "-q", &q]);
    assert!(code == 4 && err.contains("refused access"), "exit {code}: {err}");

    let mut sup = Supervisor::start_with_env(
        &[],
        &q,
        &["--workers", "2"],
        None,
        &[("JOBWORKER_ZOOKEEPER", &authed)],
    );
    wait_until("the three jobs to complete", Duration::from_secs(120), || async {
        ids.iter().all(|id| {
            let (code, shown, _) = cli(&authed, &["--json", "show", id]);
            code == 0 && shown.contains("\"completed\"")
        })
    })
    .await;
    let (code, workers, err) = cli(&authed, &["--json", "workers"]);
    assert_eq!(code, 0, "{err}");
    sup.signal(libc::SIGTERM);
    assert!(sup.wait_exit(Duration::from_secs(30)).success(), "{}", sup.log());

    let (_, listed, _) = cli(&authed, &["--json", "list", "-q", &q, "--state", "completed"]);
    for (what, text) in [
        ("supervisor log", sup.log()),
        ("workers", workers),
        ("list", listed),
    ] {
        assert!(
            !text.contains(PASSWORD),
            "the password shows in the {what}: {text}"
        );
    }
}

/// `jobworker bench --zookeeper user:password@…` starts its supervisors
/// with the board in their environment: the password is on no command line
/// (which every user of the machine can read in /proc).
#[test]
fn the_bench_keeps_the_password_off_its_children_s_command_lines() {
    let plain = format!(
        "{}/{}",
        shared_zookeeper().connect_string(),
        unique_queue("zk-auth-bench")
    );
    let mut bench = common::cli::jobworker_command()
        .env("JOBWORKER_ZOOKEEPER", format!("app:{PASSWORD}@{plain}"))
        .args([
            "bench",
            "--jobs",
            "200",
            "--workers",
            "1",
            "--no-claim-cost",
            "--json",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let status = loop {
        if let Some(status) = bench.try_wait().unwrap() {
            break status;
        }
        for child in jobworker_tests::chaos::procs::children_of(bench.id()) {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            assert!(!cmdline.contains(PASSWORD), "a child's command line: {cmdline}");
            seen.insert(child);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "the bench failed: {status}");
    assert!(!seen.is_empty(), "the bench started no supervisor");
}
