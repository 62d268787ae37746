//! Where things live on ZooKeeper, and which names are allowed.
//!
//! Queue `Q` under root `R` (from `host:port/R`):
//!
//! | path | kind | what |
//! | --- | --- | --- |
//! | `R/Q/jobs` | persistent | taskflow's `path`: the job znodes |
//! | `R/Q/jobs/jobNNNNNNNNNN` | persistent sequential | JSON posting |
//! | `R/Q/jobs/jobNNNNNNNNNN.lock` | ephemeral | `{"owner": …}` + lease |
//! | `R/Q/.trash/jobNNNNNNNNNN` | persistent | trashed posting (taskflow's rule); in a failure group when its record says jobworker trashed it (`failed.rs`) |
//! | `R/Q/.entities/conductor/<owner>` | ephemeral | a worker serving `Q` |
//! | `R/Q/.jw/ids/<uuid>` | persistent | jobworker's job record |
//! | `R/Q/.jw/delayed/<uuid>@<ms>` | persistent, empty | a job not claimable before `ms` |
//! | `R/Q/.jw/history/<hour>/<uuid>` | persistent, empty | completed in that hour |
//! | `R/Q/.jw/history/<hour>/<uuid>@cancelled` | persistent, empty | cancelled in that hour |
//! | `R/Q/.jw/leader` | ephemeral | `{"who", "until_ms"}`: the worker leading the queue's maintenance (`leader.rs`) |
//! | `R/Q/.jw/quarantine/<name>` | persistent | an undecodable job znode, moved aside |
//! | `R/Q/.jw/recurring/<id>` | persistent | a recurring template and its next slot, JSON (id percent-encoded; `recurring.rs`) |
//! | `R/Q/.jw/settings` | persistent | the queue's settings: `{"paused": …, "limit": …}` |
//! | `R/Q/.jw/claims` | persistent, empty | the claim gate: every claim under a limit bumps its version (`limit.rs`) |
//! | `R/Q/.jw/tags/<tag>/<uuid>` | persistent, empty | a job tagged `<tag>` (percent-encoded; the record's tags are the truth) |
//! | `R/Q/.jw/tracked/<uuid>` | persistent, empty | a tracked job |
//! | `R/Q/.jw/unique/<key>` | persistent | `{"id", "until_ms"}`: the job holding a unique key (percent-encoded) |
//! | `R/Q/.jw/waiting/<uuid>` | persistent | the JSON posting of a job waiting for dependencies (`deps.rs`); its job znode is made when the last one is consumed |
//! | `R/Q/.jw/dependents/<uuid>/<queue>.<id>` | persistent, empty | job `<id>` of `<queue>` waits for job `<uuid>` (both percent-encoded) |
//! | `R/Q/.jw/owed/<uuid>` | persistent, empty | job `<uuid>` was consumed and its dependents may not all be released yet |
//! | `R/Q/.jw/suspects/<uuid>` | persistent, empty | job `<uuid>` was held by a worker that died holding several: handed out alone next (`claim.rs`) |
//! | `R/.entities/conductor/<owner>` | ephemeral | every registered worker |
//! | `R/.jw/config` | persistent | the board configuration: a JSON object of strings |
//! | `R/.jw/cancels/<owner>/<uuid>` | persistent, empty | a cancel of a job `owner` held, until `owner` hears it |
//!
//! Trash and entities follow taskflow's rule: the jobs path with every
//! occurrence of its last component (`jobs`) replaced by `.trash` or
//! `.entities`, so a Python `ZookeeperJobBoard` configured with
//! `path = R/Q/jobs` shares all of it.

mod words;

pub(crate) use words::{decode_word, dependent_name, encode_word, parse_dependent};

use crate::error::{Error, Result};

/// Prefix of job znode names.
pub(crate) const JOB_PREFIX: &str = "job";
/// Suffix of lock znode names.
pub(crate) const LOCK_POSTFIX: &str = ".lock";
/// Last component of a queue's jobs path.
const JOBS: &str = "jobs";
/// Separates a delayed entry's uuid from its due time.
const DELAY_SEP: char = '@';
/// Ends the history entry of a cancelled job (job ids have no `@`).
const CANCELLED_MARK: &str = "@cancelled";

/// The paths of one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueuePaths {
    /// The queue name.
    pub queue: String,
    /// `R/Q/jobs` (taskflow's `path`).
    pub jobs: String,
    /// Taskflow's trash path.
    pub trash: String,
    /// Taskflow's entity path.
    pub entities: String,
    /// `R/Q/.jw/ids`.
    pub ids: String,
    /// `R/Q/.jw/delayed`.
    pub delayed: String,
    /// `R/Q/.jw/history`.
    pub history: String,
    /// `R/Q/.jw/quarantine`.
    pub quarantine: String,
    /// `R/Q/.jw/settings` (made on the first pause or limit).
    pub settings: String,
    /// `R/Q/.jw/claims`, the claim gate (made with the first limit).
    pub claims: String,
    /// `R/Q/.jw/tags` (made with the first tag).
    pub tags: String,
    /// `R/Q/.jw/tracked` (made with the first tracked job).
    pub tracked: String,
    /// `R/Q/.jw/unique` (made with the first unique key).
    pub unique: String,
    /// `R/Q/.jw/leader` (the maintenance leader's ephemeral znode).
    pub leader: String,
    /// `R/Q/.jw/tally`: an entry per ended claim, until folded (`tally.rs`).
    pub tally: String,
    /// `R/Q/.jw/stats`: a summary per day (made with the first fold).
    pub stats: String,
    /// `R/Q/.jw/recurring` (made with the first recurring template).
    pub recurring: String,
    /// `R/Q/.jw/waiting`: the postings of jobs waiting for dependencies.
    pub waiting: String,
    /// `R/Q/.jw/dependents`: per job, the jobs that wait for it.
    pub dependents: String,
    /// `R/Q/.jw/owed`: consumed jobs whose dependents may wait for a release.
    pub owed: String,
    /// `R/Q/.jw/suspects`: jobs to hand out alone (their worker died while
    /// holding several).
    pub suspects: String,
}

impl QueuePaths {
    /// The paths of `queue` under `root` (`""` or `/a/b`).
    pub(crate) fn new(root: &str, queue: &str) -> Result<QueuePaths> {
        validate_queue(root, queue)?;
        let base = format!("{root}/{queue}");
        let jobs = format!("{base}/{JOBS}");
        let jw = format!("{base}/.jw");
        Ok(QueuePaths {
            queue: queue.to_owned(),
            trash: jobs.replace(JOBS, ".trash"),
            entities: jobs.replace(JOBS, ".entities"),
            jobs,
            ids: format!("{jw}/ids"),
            delayed: format!("{jw}/delayed"),
            history: format!("{jw}/history"),
            quarantine: format!("{jw}/quarantine"),
            settings: format!("{jw}/settings"),
            claims: format!("{jw}/claims"),
            tags: format!("{jw}/tags"),
            tracked: format!("{jw}/tracked"),
            unique: format!("{jw}/unique"),
            leader: format!("{jw}/leader"),
            recurring: format!("{jw}/recurring"),
            tally: format!("{jw}/tally"),
            stats: format!("{jw}/stats"),
            waiting: format!("{jw}/waiting"),
            dependents: format!("{jw}/dependents"),
            owed: format!("{jw}/owed"),
            suspects: format!("{jw}/suspects"),
        })
    }

    /// The directories a queue needs before jobs are posted.
    pub(crate) fn dirs(&self) -> [&str; 10] {
        [
            &self.jobs,
            &self.trash,
            &self.ids,
            &self.delayed,
            &self.history,
            &self.tally,
            &self.waiting,
            &self.dependents,
            &self.owed,
            &self.suspects,
        ]
    }

    /// The summary of day `day` (days since the epoch).
    pub(crate) fn stats_day(&self, day: i64) -> String {
        format!("{}/{day}", self.stats)
    }

    /// A tally entry (`tally.rs`), or its prefix before the sequence.
    pub(crate) fn tally_entry(&self, name: &str) -> String {
        format!("{}/{name}", self.tally)
    }

    /// A job znode.
    pub(crate) fn job(&self, name: &str) -> String {
        format!("{}/{name}", self.jobs)
    }

    /// A job's lock znode (a sibling, not a child).
    pub(crate) fn lock(&self, name: &str) -> String {
        format!("{}/{name}{LOCK_POSTFIX}", self.jobs)
    }

    /// A job's trash copy.
    pub(crate) fn trashed(&self, name: &str) -> String {
        format!("{}/{name}", self.trash)
    }

    /// A job's record.
    pub(crate) fn record(&self, uuid: &str) -> String {
        format!("{}/{uuid}", self.ids)
    }

    /// A delayed entry.
    pub(crate) fn delayed_entry(&self, uuid: &str, run_at_ms: i64) -> String {
        format!("{}/{uuid}{DELAY_SEP}{run_at_ms}", self.delayed)
    }

    /// A history bucket (one per hour since the epoch).
    pub(crate) fn history_bucket(&self, hour: i64) -> String {
        format!("{}/{hour}", self.history)
    }

    /// A completed job's history entry.
    pub(crate) fn history_entry(&self, hour: i64, uuid: &str) -> String {
        format!("{}/{hour}/{uuid}", self.history)
    }

    /// A cancelled job's history entry.
    pub(crate) fn cancelled_entry(&self, hour: i64, uuid: &str) -> String {
        format!("{}/{hour}/{uuid}{CANCELLED_MARK}", self.history)
    }

    /// The index directory of `tag`.
    pub(crate) fn tag_dir(&self, tag: &str) -> String {
        format!("{}/{}", self.tags, encode_word(tag))
    }

    /// The index entry of job `uuid` under `tag`.
    pub(crate) fn tag_entry(&self, tag: &str, uuid: &str) -> String {
        format!("{}/{uuid}", self.tag_dir(tag))
    }

    /// The tracking entry of job `uuid`.
    pub(crate) fn tracked_entry(&self, uuid: &str) -> String {
        format!("{}/{uuid}", self.tracked)
    }

    /// The znode of unique key `key`.
    pub(crate) fn unique_key(&self, key: &str) -> String {
        format!("{}/{}", self.unique, encode_word(key))
    }

    /// The znode of recurring template `id` (percent-encoded, so any id
    /// names one znode).
    pub(crate) fn template(&self, id: &str) -> String {
        format!("{}/{}", self.recurring, encode_word(id))
    }

    /// The posting of job `uuid` while it waits for dependencies.
    pub(crate) fn waiting_entry(&self, uuid: &str) -> String {
        format!("{}/{uuid}", self.waiting)
    }

    /// The directory of the jobs that wait for job `uuid`.
    pub(crate) fn dependents_of(&self, uuid: &str) -> String {
        format!("{}/{uuid}", self.dependents)
    }

    /// The entry saying that job `id` of `queue` waits for job `uuid`.
    pub(crate) fn dependent_entry(&self, uuid: &str, queue: &str, id: &str) -> String {
        format!("{}/{}", self.dependents_of(uuid), dependent_name(queue, id))
    }

    /// The entry saying that consumed job `uuid` may owe releases.
    pub(crate) fn owed_entry(&self, uuid: &str) -> String {
        format!("{}/{uuid}", self.owed)
    }

    /// The entry marking job `uuid` a suspect.
    pub(crate) fn suspect_entry(&self, uuid: &str) -> String {
        format!("{}/{uuid}", self.suspects)
    }

    /// A quarantined znode.
    pub(crate) fn quarantined(&self, name: &str) -> String {
        format!("{}/{name}", self.quarantine)
    }

    /// The reason a znode was quarantined.
    pub(crate) fn quarantine_reason(&self, name: &str) -> String {
        format!("{}/{name}.reason", self.quarantine)
    }

    /// A worker's entity under this queue.
    pub(crate) fn entity(&self, owner: &str) -> String {
        format!("{}/conductor/{owner}", self.entities)
    }
}

/// The root-level entity of a worker (`R/.entities/conductor/<owner>`).
pub(crate) fn root_entities(root: &str) -> String {
    format!("{root}/.entities/conductor")
}

/// The cancel notes of worker `owner` (`R/.jw/cancels/<owner>`): one child
/// per job of its that was cancelled while it held it.
pub(crate) fn cancel_notes(root: &str, owner: &str) -> String {
    format!("{root}/.jw/cancels/{owner}")
}

/// The job id of a history entry, and whether the job was cancelled (else
/// completed).
pub(crate) fn history_job(entry: &str) -> (&str, bool) {
    match entry.strip_suffix(CANCELLED_MARK) {
        Some(uuid) => (uuid, true),
        None => (entry, false),
    }
}

/// The parent of a path (`/` for a top-level one).
pub(crate) fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// True for a job znode name (taskflow's filter: `job…`, not `….lock`).
pub(crate) fn is_job_name(child: &str) -> bool {
    child.starts_with(JOB_PREFIX) && !child.ends_with(LOCK_POSTFIX)
}

/// The job name of a lock znode name.
pub(crate) fn locked_job(child: &str) -> Option<&str> {
    child
        .strip_suffix(LOCK_POSTFIX)
        .filter(|n| n.starts_with(JOB_PREFIX))
}

/// The sequence number of a job znode name (`job0000000012` → 12), as
/// taskflow parses it; `None` when taskflow could not (it raises then).
pub(crate) fn sequence_of(name: &str) -> Option<i64> {
    let digits = name.strip_prefix(JOB_PREFIX)?;
    let unsigned = digits.strip_prefix('-').unwrap_or(digits);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Splits a delayed entry name into uuid and due time.
pub(crate) fn parse_delayed(entry: &str) -> Option<(&str, i64)> {
    let (uuid, at) = entry.rsplit_once(DELAY_SEP)?;
    Some((uuid, at.parse().ok()?))
}

/// Characters ZooKeeper refuses in a path (`PathUtils.validatePath`).
fn bad_char(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}')
}

/// A valid znode name: not empty, not `.` or `..`, no `/`, no character
/// ZooKeeper refuses.
pub(crate) fn is_znode_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.chars().any(bad_char)
}

fn validate_queue(root: &str, queue: &str) -> Result<()> {
    let bad = |c: char| c == '{' || c == '}' || c == ':' || c.is_whitespace() || c.is_control();
    if queue.is_empty()
        || queue.len() > 200
        || queue.chars().any(bad)
        || queue.starts_with('.')
        || !is_znode_name(queue)
        || (root.is_empty() && queue == "zookeeper")
    {
        return Err(Error::invalid(format!(
            "queue name {queue:?} must be 1 to 200 characters without braces, colons, slashes or \
             spaces, must not start with a dot, and must not be /zookeeper"
        )));
    }
    Ok(())
}

/// Checks a job id for use as a znode name (on top of
/// [`NewJob::validate`](crate::NewJob::validate)).
pub(crate) fn validate_job_id(id: &str) -> Result<()> {
    if !is_znode_name(id) || id.contains('@') {
        return Err(Error::invalid(format!(
            "job id {id:?} cannot be used on ZooKeeper: it must not contain '/' or '@', be '.' or \
             '..', or hold characters ZooKeeper refuses in paths"
        )));
    }
    Ok(())
}

/// Checks a worker owner string for use as a znode name.
pub(crate) fn validate_owner(owner: &str) -> Result<()> {
    if !is_znode_name(owner) || owner.len() > 255 {
        return Err(Error::invalid(format!(
            "worker name {owner:?} cannot be a znode name (1 to 255 characters, no '/')"
        )));
    }
    Ok(())
}

/// Splits `host:port[,host:port…][/root]` into the host list and the
/// normalised root (`""` for none, else `/a/b` without a trailing slash).
pub(crate) fn split_connect(connect: &str) -> Result<(String, String)> {
    let (hosts, root) = match connect.find('/') {
        Some(i) => (&connect[..i], &connect[i..]),
        None => (connect, ""),
    };
    let invalid = |why: &str| {
        Error::invalid(format!(
            "zookeeper address {connect:?} {why}; expected host:port[,host:port]/root"
        ))
    };
    if hosts.is_empty() || hosts.split(',').any(|h| h.trim().is_empty()) {
        return Err(invalid("names no server"));
    }
    let root = root.trim_end_matches('/');
    for part in root.split('/').skip(1) {
        if !is_znode_name(part) {
            return Err(invalid("has an invalid root path"));
        }
    }
    if root == "/zookeeper" || root.starts_with("/zookeeper/") {
        return Err(invalid("uses ZooKeeper's reserved /zookeeper as root"));
    }
    Ok((hosts.to_owned(), root.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_tag_names_one_znode_and_comes_back() {
        for tag in ["red", "a/b", ".", "..", "50%", "état", "x.y", "a:b_c-d"] {
            let name = encode_word(tag);
            assert!(is_znode_name(&name) && !name.contains('.'), "{tag} -> {name}");
            assert_eq!(decode_word(&name).as_deref(), Some(tag));
        }
        assert_eq!(encode_word("a/b"), "a%2Fb");
        assert_eq!(decode_word("bad%G1"), None);
        assert_eq!(decode_word("cut%2"), None);
        let name = dependent_name("q.1", "a.b");
        assert_eq!(name, "q%2E1.a%2Eb");
        assert_eq!(parse_dependent(&name), Some(("q.1".into(), "a.b".into())));
        assert_eq!(parse_dependent("nodot"), None);
    }

    #[test]
    fn trash_and_entities_follow_taskflow_s_replace() {
        let p = QueuePaths::new("/jw", "emails").unwrap();
        assert_eq!(p.jobs, "/jw/emails/jobs");
        assert_eq!(p.trash, "/jw/emails/.trash");
        assert_eq!(p.entities, "/jw/emails/.entities");
        assert_eq!(p.lock("job0000000001"), "/jw/emails/jobs/job0000000001.lock");
        assert_eq!(p.record("u"), "/jw/emails/.jw/ids/u");
        // Python's str.replace replaces every occurrence.
        let odd = QueuePaths::new("/myjobs", "q").unwrap();
        assert_eq!(odd.trash, "/my.trash/q/.trash");
        let top = QueuePaths::new("", "q").unwrap();
        assert_eq!((top.jobs.as_str(), top.trash.as_str()), ("/q/jobs", "/q/.trash"));
    }

    #[test]
    fn names_are_parsed_as_taskflow_parses_them() {
        assert!(is_job_name("job0000000001") && !is_job_name("job0000000001.lock"));
        assert!(!is_job_name("other"));
        assert_eq!(locked_job("job0000000001.lock"), Some("job0000000001"));
        assert_eq!(sequence_of("job0000000012"), Some(12));
        assert_eq!(sequence_of("jobx"), None);
        assert_eq!(sequence_of("job"), None);
        assert_eq!(parse_delayed("a@b@17"), Some(("a@b", 17)));
        assert_eq!(parse_delayed("nope"), None);
    }

    #[test]
    fn connect_strings_and_names_are_checked() {
        assert_eq!(
            split_connect("h:1,h:2/a/b/").unwrap(),
            ("h:1,h:2".to_owned(), "/a/b".to_owned())
        );
        assert_eq!(split_connect("h:1").unwrap().1, "");
        assert!(split_connect("/a").unwrap_err().is_invalid());
        assert!(split_connect("h:1/a//b").unwrap_err().is_invalid());
        assert!(split_connect("h:1/zookeeper").unwrap_err().is_invalid());
        assert!(QueuePaths::new("", "bad queue").unwrap_err().is_invalid());
        assert!(QueuePaths::new("", "a/b").unwrap_err().is_invalid());
        assert!(QueuePaths::new("", ".jw").unwrap_err().is_invalid());
        assert!(QueuePaths::new("", "zookeeper").unwrap_err().is_invalid());
        assert!(validate_job_id("a/b").is_err() && validate_job_id("..").is_err());
        assert!(validate_job_id("0b5a1d2e-3c4f-4a6b-8c7d-9e0f1a2b3c01").is_ok());
        assert!(validate_owner("w1@host:42").is_ok() && validate_owner("a/b").is_err());
    }
}
