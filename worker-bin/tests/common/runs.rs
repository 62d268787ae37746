//! What a drain did to each job, from the scripted handler's run log (kept
//! outside Redis): jobs that never ran, ran again, or ran twice at once;
//! and jobs whose first runs a test interrupts ([`FirstRuns`]).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use jobworker::redis::RedisBoard;
use jobworker::{Board, JobId, JobInfo, NewJob};
use jobworker_examples::scripted::run_log::RunOutcome;
use jobworker_examples::scripted::{Action, Script};
use jobworker_tests::chaos::runs::{Run, Runs};
use jobworker_tests::{unique_queue, wait_until};

use super::{post_copies, Supervisor};

/// A scripted job's arguments: `action` for `millis`, each run logged to
/// `log` (a run log, which works on any board).
pub fn logged(action: Action, millis: u64, log: &Path) -> Script {
    Script {
        action,
        millis,
        until_attempt: 0,
        count_key: None,
        sandbox_key: None,
        thread_key: None,
        next_queue: None,
        log_file: Some(log.display().to_string()),
    }
}

/// What a drain did, per job.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Acknowledged posts whose job never ran to success.
    pub never_ran: usize,
    /// Jobs run again after a run that ended ok whose consume was
    /// acknowledged (the worker logged no failure to record it): an
    /// acknowledged consume was lost.
    pub ran_again: usize,
    /// Jobs run again after a run that ended ok whose consume failed (the
    /// worker said so; at least once, as promised).
    pub ran_again_unacknowledged: usize,
    /// Jobs with two runs at the same time.
    pub concurrent: usize,
}

/// Jobs whose result the worker could not record, from its log.
pub fn unrecorded(log: &str) -> HashSet<String> {
    log.lines()
        .filter(|l| l.contains("cannot record the result") || l.contains("before the result was recorded"))
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("job=")))
        .map(str::to_owned)
        .collect()
}

/// The acknowledged posts with no run that ended ok.
pub fn never_ran<'a>(ids: &'a [JobId], runs: &[Run]) -> Vec<&'a JobId> {
    let ok: HashSet<&str> = runs
        .iter()
        .filter(|r| matches!(r.end, Some((_, RunOutcome::Ok))))
        .map(|r| r.id.as_str())
        .collect();
    ids.iter().filter(|id| !ok.contains(id.as_str())).collect()
}

/// What the board and the supervisor's log say of each job in `ids`, for a
/// failure's message: its state and owner, its history and the log lines
/// that name it.
pub async fn whereabouts(board: &RedisBoard, q: &str, ids: &[&JobId], log: &str) -> String {
    let mut out = String::new();
    for id in ids.iter().take(10) {
        let show = board.show(q, id).await;
        let history = board.history(q, id).await;
        out += &format!("\n{id}: {show:?}\n  history {history:?}");
        for line in log.lines().filter(|l| l.contains(id.as_str())) {
            out += &format!("\n  log: {line}");
        }
    }
    out
}

pub fn outcome(ids: &[JobId], runs: &[Run], unrecorded: &HashSet<String>) -> Outcome {
    let mut by_id: HashMap<&str, Vec<&Run>> = HashMap::new();
    for r in runs {
        by_id.entry(r.id.as_str()).or_default().push(r);
    }
    let mut out = Outcome {
        never_ran: never_ran(ids, runs).len(),
        ..Outcome::default()
    };
    for id in ids {
        let mut runs = by_id.remove(id.as_str()).unwrap_or_default();
        runs.sort_by_key(|r| r.start_us);
        let ok = |r: &&Run| matches!(r.end, Some((_, RunOutcome::Ok)));
        if runs
            .iter()
            .position(ok)
            .is_some_and(|first| first + 1 < runs.len())
        {
            if unrecorded.contains(id.as_str()) {
                out.ran_again_unacknowledged += 1;
            } else {
                out.ran_again += 1;
            }
        }
        let overlap = runs.windows(2).any(|w| match w[0].end {
            Some((end, _)) => w[1].start_us < end,
            None => false,
        });
        out.concurrent += usize::from(overlap);
    }
    out
}

/// Waits up to `limit` for `what`: until `done` holds of the run log,
/// read as it grows (on failure, with the supervisor's log).
pub async fn wait_for_runs(
    sup: &Supervisor,
    what: &str,
    limit: Duration,
    runs: &mut Runs,
    done: impl Fn(&Runs) -> bool,
) {
    wait_until(sup.and_log(what), limit, || {
        runs.poll().unwrap();
        let met = done(runs);
        async move { met }
    })
    .await;
}

/// Jobs of the scripted handler on a fresh queue of the Redis at `url`,
/// each doing an action on its first attempt and succeeding on the next
/// (every run logged), and the flags of the supervisors that run them.
pub struct FirstRuns {
    url: String,
    q: String,
    pub ids: Vec<JobId>,
    args: Vec<String>,
    pub runs: Runs,
    _dir: tempfile::TempDir,
}

impl FirstRuns {
    /// Posts `n` jobs doing `action` for `millis` on their first attempt
    /// to a queue named after `prefix`, starts a supervisor with `args`,
    /// and returns once all `n` run.
    pub async fn running(
        url: &str,
        prefix: &str,
        (action, millis): (Action, u64),
        n: usize,
        args: &[&str],
    ) -> (FirstRuns, Supervisor) {
        let q = unique_queue(prefix);
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("runs.log");
        let mut script = logged(action, millis, &log);
        script.until_attempt = 1;
        let job = NewJob::new("scripted").args(&script).unwrap();
        let ids = post_copies(&RedisBoard::connect(url).await.unwrap(), &q, job, n).await;
        let mut jobs = FirstRuns {
            url: url.to_owned(),
            q,
            ids,
            args: args.iter().map(|a| a.to_string()).collect(),
            runs: Runs::new(&log),
            _dir: dir,
        };
        let sup = jobs.supervisor();
        wait_for_runs(
            &sup,
            "every job to run",
            Duration::from_secs(120),
            &mut jobs.runs,
            |r| r.open_runs().count() == n,
        )
        .await;
        (jobs, sup)
    }

    /// What the board shows of each job.
    pub async fn shown(&self) -> Vec<JobInfo> {
        let board = RedisBoard::connect(&self.url).await.unwrap();
        let mut shown = Vec::new();
        for id in &self.ids {
            shown.push(board.show(&self.q, id).await.unwrap());
        }
        shown
    }

    /// The server's clock and each job's lease as Redis holds it (its
    /// score in the lease index, its owner key and that key's time to
    /// live), for a failure's message.
    pub async fn leases(&self) -> String {
        let board = match RedisBoard::connect(&self.url).await {
            Ok(board) => board,
            Err(e) => return format!("cannot read them: {e}"),
        };
        let keys = board.keys(&self.q).unwrap();
        let mut con = board.connection();
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut con).await.unwrap_or_default();
        let mut out = format!("server time {} ms", secs * 1000 + micros / 1000);
        for id in &self.ids {
            let score: Option<f64> = redis::cmd("ZSCORE")
                .arg(keys.leases())
                .arg(id.as_str())
                .query_async(&mut con)
                .await
                .unwrap_or_default();
            let owned = keys.owned(id.as_str());
            let owner: Option<String> = redis::cmd("GET")
                .arg(&owned)
                .query_async(&mut con)
                .await
                .unwrap_or_default();
            let ttl: i64 = redis::cmd("PTTL")
                .arg(&owned)
                .query_async(&mut con)
                .await
                .unwrap_or_default();
            out += &format!("; {id}: lease index {score:?}, owner {owner:?}, owner key pttl {ttl} ms");
        }
        out
    }

    /// A new supervisor on their queue, with the same flags.
    pub fn supervisor(&self) -> Supervisor {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        Supervisor::start_on(&["--redis", &self.url], &self.q, &args, None)
    }

    /// A new supervisor must run every job again to success within
    /// `limit`, never two runs at once (the runs of `stopped`, the one
    /// before it, included).
    pub async fn run_again(mut self, stopped: &Supervisor, limit: Duration) {
        let mut again = self.supervisor();
        let n = self.ids.len();
        let deadline = std::time::Instant::now() + limit;
        loop {
            self.runs.poll().unwrap();
            if self.runs.ok_jobs() == n {
                break;
            }
            if std::time::Instant::now() >= deadline {
                panic!(
                    "timed out after {limit:?}: every job to run again\nthe board shows: {:?}\nthe leases: {}\nthe runs: {:?}\nthe log before:\n{}\nthe log after:\n{}",
                    self.shown().await,
                    self.leases().await,
                    self.runs.all(),
                    stopped.log(),
                    again.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        again.stop_cleanly(Duration::from_secs(60));
        let unrecorded = unrecorded(&format!("{}{}", stopped.log(), again.log()));
        let out = outcome(&self.ids, self.runs.all(), &unrecorded);
        assert_eq!(
            (out.never_ran, out.ran_again, out.concurrent),
            (0, 0, 0),
            "{out:?}"
        );
    }
}
