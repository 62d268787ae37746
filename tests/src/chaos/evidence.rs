//! Evidence that a lease expired, from the board's side rather than the
//! chaos run's: on Redis the job's history (`stalled` events, written by
//! the claim or reap that recovered an expired lease, judged by Redis' own
//! clock); on ZooKeeper the workers' `recovering an expired lease` log
//! lines (a claimer saw the lease's deadline pass). Each piece names the
//! job and the owner whose lease expired, whose last field is the worker's
//! pid.
//!
//! And evidence that a job was completed, from the workers' side: their
//! `job completed` log lines, written once the board accepted the consume.

use std::collections::HashSet;
use std::path::Path;

use jobworker::{AnyBoard, JobId};

/// (job id, pid of the worker whose lease on it expired).
pub type Expired = HashSet<(String, u32)>;

/// The message a ZooKeeper claimer logs when it recovers an expired lease.
const ZK_EXPIRED_MESSAGE: &str = "recovering an expired lease";
/// The message a worker logs once the board accepted a job's consume.
const COMPLETED_MESSAGE: &str = "job completed";

/// The pid at the end of an owner string `host:supervisor:w<slot>:<pid>`.
pub fn pid_of_owner(owner: &str) -> Option<u32> {
    owner.rsplit(':').next()?.parse().ok()
}

/// Expired leases of `jobs` in `queue` recorded in the Redis history.
pub async fn from_redis_history(
    board: &AnyBoard,
    queue: &str,
    jobs: &[String],
) -> jobworker::Result<Expired> {
    let mut out = Expired::new();
    let Some(redis) = board.as_redis() else {
        return Ok(out);
    };
    for id in jobs {
        for event in redis.history(queue, &JobId::from(id.as_str())).await? {
            if event["event"] == "stalled" {
                if let Some(pid) = event["worker"].as_str().and_then(pid_of_owner) {
                    out.insert((id.clone(), pid));
                }
            }
        }
    }
    Ok(out)
}

/// Expired leases logged by workers in the JSON logs (`--log-format json`)
/// `logs`.
pub fn from_worker_logs(logs: &[impl AsRef<Path>]) -> Expired {
    let mut out = Expired::new();
    for fields in logged(logs, ZK_EXPIRED_MESSAGE) {
        if let (Some(job), Some(pid)) = (
            fields["job"].as_str(),
            fields["owner"].as_str().and_then(pid_of_owner),
        ) {
            out.insert((job.to_owned(), pid));
        }
    }
    out
}

/// The jobs of `of` that a worker logged as completed in the JSON logs
/// `logs` (its consume was accepted).
pub fn completed_in_logs(logs: &[impl AsRef<Path>], of: &HashSet<String>) -> HashSet<String> {
    logged(logs, COMPLETED_MESSAGE)
        .filter_map(|fields| fields["job"].as_str().map(str::to_owned))
        .filter(|job| of.contains(job))
        .collect()
}

/// The fields of every JSON log line of `logs` whose message is `message`
/// (lines cut short by a kill are skipped).
fn logged<'a>(
    logs: &'a [impl AsRef<Path>],
    message: &'a str,
) -> impl Iterator<Item = serde_json::Value> + 'a {
    logs.iter().flat_map(move |log| {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let fields: Vec<serde_json::Value> = text
            .lines()
            .filter(|line| line.contains(message))
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .map(|mut value| value["fields"].take())
            .filter(|fields| fields["message"] == message)
            .collect();
        fields
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_and_log_lines_are_read() {
        assert_eq!(pid_of_owner("host:10:w1:4242"), Some(4242));
        assert_eq!(pid_of_owner("cli-1"), None);
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("supervisor-1.log");
        std::fs::write(
            &log,
            concat!(
                r#"{"timestamp":"t","level":"WARN","fields":{"message":"recovering an expired lease","job":"ab12","queue":"q","owner":"h:1:w0:77"}}"#,
                "\n",
                r#"{"timestamp":"t","level":"INFO","fields":{"message":"worker started"}}"#,
                "\nnot json recovering an expired lease\n"
            ),
        )
        .unwrap();
        let found = from_worker_logs(&[&log]);
        assert_eq!(found, Expired::from([("ab12".to_owned(), 77)]));
    }

    #[test]
    fn completions_are_read_for_the_jobs_asked() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("supervisor-1.log");
        std::fs::write(
            &log,
            concat!(
                r#"{"timestamp":"t","level":"INFO","fields":{"message":"job completed","job":"a1","queue":"q"}}"#,
                "\n",
                r#"{"timestamp":"t","level":"INFO","fields":{"message":"job completed","job":"b2","queue":"q"}}"#,
                "\n",
                r#"{"timestamp":"t","level":"INFO","fields":{"message":"job cancelled before its result was recorded; result dropped","job":"c3"}}"#,
                "\n",
                r#"{"timestamp":"t","level":"INFO","fields":{"message":"job completed","job":"c3""#,
            ),
        )
        .unwrap();
        let of = HashSet::from(["a1".to_owned(), "c3".to_owned()]);
        assert_eq!(completed_in_logs(&[&log], &of), HashSet::from(["a1".to_owned()]));
    }
}
