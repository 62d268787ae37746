//! The job vocabulary shared by every board: ids, postings to make, leases,
//! claims, states and listing filters.

use std::fmt;
use std::time::{Duration, SystemTime};

pub use crate::board::Lease;
use crate::codec::Book;
use crate::error::{Error, Result};

/// A job's id: the taskflow uuid, which is also the `listings` hash field.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub(crate) String);

// A borrowed id (`lease.job()`) compares with an owned one.
impl PartialEq<JobId> for &JobId {
    fn eq(&self, other: &JobId) -> bool {
        **self == *other
    }
}

impl PartialEq<&JobId> for JobId {
    fn eq(&self, other: &&JobId) -> bool {
        *self == **other
    }
}

impl JobId {
    /// A fresh random id in taskflow's form (uuid4, 36 lowercase chars).
    /// Each takes the system's randomness (one `getrandom` call, about a
    /// microsecond of a post): a generator seeded once per process would
    /// be copied into every worker the supervisor forks, which would then
    /// make the same ids, and a post finds a generated id already on the
    /// board as its own earlier sending.
    pub fn random() -> Self {
        JobId(uuid::Uuid::new_v4().to_string())
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for JobId {
    fn from(s: &str) -> Self {
        JobId(s.to_owned())
    }
}

impl From<String> for JobId {
    fn from(s: String) -> Self {
        JobId(s)
    }
}

/// A job's priority: higher runs sooner, FIFO among equals.
///
/// Taskflow's five names map onto it: `VERY_HIGH` = 2, `HIGH` = 1,
/// `NORMAL` = 0, `LOW` = -1, `VERY_LOW` = -2. Any other value is allowed
/// within ±[`Priority::LIMIT`]; taskflow sees it as the nearest name
/// (values above 2 read as `VERY_HIGH`, below -2 as `VERY_LOW`).
///
/// ```
/// use jobworker::Priority;
///
/// assert_eq!(Priority::parse("high")?, Priority::HIGH);
/// assert_eq!(Priority::parse("7")?, Priority(7));
/// assert_eq!(Priority(7).taskflow_name(), "VERY_HIGH");
/// assert!(Priority::HIGH > Priority::NORMAL);
/// # Ok::<(), jobworker::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Priority(pub i32);

impl Priority {
    /// Taskflow's `VERY_HIGH`.
    pub const VERY_HIGH: Priority = Priority(2);
    /// Taskflow's `HIGH`.
    pub const HIGH: Priority = Priority(1);
    /// Taskflow's `NORMAL`, the default.
    pub const NORMAL: Priority = Priority(0);
    /// Taskflow's `LOW`.
    pub const LOW: Priority = Priority(-1);
    /// Taskflow's `VERY_LOW`.
    pub const VERY_LOW: Priority = Priority(-2);
    /// The largest magnitude a priority may have (keeps ready-index scores
    /// exact in a double).
    pub const LIMIT: i32 = 1 << 20;

    /// The taskflow name this priority is shown as in a posting.
    pub fn taskflow_name(self) -> &'static str {
        match self.0 {
            i32::MIN..=-2 => "VERY_LOW",
            -1 => "LOW",
            0 => "NORMAL",
            1 => "HIGH",
            _ => "VERY_HIGH",
        }
    }

    /// Parses a taskflow name, case-insensitively (as taskflow does).
    pub fn from_taskflow_name(name: &str) -> Option<Priority> {
        match name.to_ascii_uppercase().as_str() {
            "VERY_HIGH" => Some(Self::VERY_HIGH),
            "HIGH" => Some(Self::HIGH),
            "NORMAL" => Some(Self::NORMAL),
            "LOW" => Some(Self::LOW),
            "VERY_LOW" => Some(Self::VERY_LOW),
            _ => None,
        }
    }

    /// Parses either a taskflow name or an integer.
    pub fn parse(text: &str) -> Result<Priority> {
        if let Some(p) = Self::from_taskflow_name(text) {
            return Ok(p);
        }
        let value: i32 = text.trim().parse().map_err(|_| {
            Error::invalid(format!(
                "priority {text:?} is neither an integer nor one of VERY_HIGH, HIGH, NORMAL, LOW, VERY_LOW"
            ))
        })?;
        Priority(value).validated()
    }

    /// Checks the range.
    pub fn validated(self) -> Result<Priority> {
        if self.0.abs() > Self::LIMIT {
            return Err(Error::invalid(format!(
                "priority {} is out of range (±{})",
                self.0,
                Self::LIMIT
            )));
        }
        Ok(self)
    }
}

/// When a newly posted job becomes claimable. Boards schedule on the
/// server's clock, never the posting host's: a host whose clock is off
/// does not make jobs run early or late.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunAt {
    /// At once.
    #[default]
    Now,
    /// After this delay, measured on the server's clock.
    After(Duration),
    /// At this wall-clock time as this host's clock reads it: the job runs
    /// once the time between now and then has passed on the server's clock
    /// (a time in the past runs at once).
    At(SystemTime),
}

impl RunAt {
    /// How long after the post (on the server's clock) the job becomes
    /// claimable.
    pub fn delay(self) -> Duration {
        self.delay_from(SystemTime::now())
    }

    /// [`delay`](RunAt::delay) on a host whose clock reads `now`.
    fn delay_from(self, now: SystemTime) -> Duration {
        match self {
            RunAt::Now => Duration::ZERO,
            RunAt::After(d) => d,
            RunAt::At(t) => t.duration_since(now).unwrap_or(Duration::ZERO),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_the_redis_rule() {
        assert_eq!(failure_group("boom: disk full"), "boom");
        assert_eq!(failure_group("Poison_Pill: x"), "poison-pill");
        assert_eq!(failure_group("no kind here"), "error");
        assert_eq!(failure_group("a/b: x"), "error");
    }

    /// Seen: `run_at` was sent as this host's epoch time, so a host whose
    /// clock ran an hour behind posted jobs that ran at once. The board now
    /// gets the time left, which is the same whatever the host's clock.
    #[test]
    fn a_wall_clock_time_becomes_the_time_left_on_this_hosts_clock() {
        let real = SystemTime::now();
        let an_hour_behind = real - Duration::from_secs(3600);
        let in_five = RunAt::At(an_hour_behind + Duration::from_secs(5));
        assert_eq!(in_five.delay_from(an_hour_behind), Duration::from_secs(5));
        assert_eq!(
            RunAt::At(real - Duration::from_secs(1)).delay_from(real),
            Duration::ZERO
        );
        assert_eq!(
            RunAt::After(Duration::from_secs(7)).delay_from(real),
            Duration::from_secs(7)
        );
        assert_eq!(RunAt::Now.delay_from(real), Duration::ZERO);
    }
}

/// Default number of tries before a failing job is trashed.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;

/// A job to post: a name (which selects the handler), arguments and
/// options, built with its methods.
///
/// ```
/// use jobworker::{NewJob, Priority};
/// use serde::Serialize;
/// use std::time::Duration;
///
/// #[derive(Serialize)]
/// struct Resize {
///     path: String,
///     width: u32,
/// }
///
/// let job = NewJob::new("resize")
///     .args(&Resize { path: "cat.png".into(), width: 64 })?
///     .priority(Priority::HIGH)
///     .delay(Duration::from_secs(10))
///     .max_attempts(3)
///     .tag("images")
///     .unique("resize:cat.png", Duration::from_secs(60));
/// assert_eq!(job.name, "resize");
/// job.validate()?;
/// assert!(NewJob::new("").validate().is_err(), "a name is required");
/// # Ok::<(), jobworker::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// The job name; it selects the handler.
    pub name: String,
    /// The arguments, stored as `details["args"]` in the taskflow posting.
    pub args: rmpv::Value,
    /// Priority (higher first).
    pub priority: Priority,
    /// When the job becomes claimable.
    pub run_at: RunAt,
    /// Tries before the job is trashed.
    pub max_attempts: u32,
    /// A caller-chosen id (a uuid); random when `None`.
    pub id: Option<JobId>,
    /// Tags (see `RedisBoard::tagged`).
    pub tags: Vec<String>,
    /// Jobs that must be consumed before this one runs.
    pub depends: Vec<Dependency>,
    /// A unique key and how long it holds: posting another job with the
    /// same key in the same queue meanwhile returns this job's id.
    pub unique: Option<(String, Duration)>,
    /// Publish this job's events on their own channels too.
    pub track: bool,
    /// taskflow's logbook reference (`book` in the posting), for jobs a
    /// Python conductor may run.
    pub book: Option<Book>,
}

/// A job another job depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dependency {
    /// Its queue; `None` is the dependent's own queue.
    pub queue: Option<String>,
    /// The job.
    pub job: JobId,
}

impl NewJob {
    /// A job named `name` with no arguments and default options.
    pub fn new(name: impl Into<String>) -> Self {
        NewJob {
            name: name.into(),
            args: rmpv::Value::Nil,
            priority: Priority::NORMAL,
            run_at: RunAt::Now,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            id: None,
            tags: Vec::new(),
            depends: Vec::new(),
            unique: None,
            track: false,
            book: None,
        }
    }

    /// Sets taskflow's logbook reference (`book`: the logbook's name and
    /// uuid), which a Python conductor needs to run the job.
    pub fn book(mut self, name: impl Into<String>, uuid: impl Into<String>) -> Self {
        self.book = Some(Book::new(name, uuid));
        self
    }

    /// Adds a tag.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Runs this job only after `job` (in the same queue) is consumed.
    pub fn depends_on(mut self, job: impl Into<JobId>) -> Self {
        self.depends.push(Dependency {
            queue: None,
            job: job.into(),
        });
        self
    }

    /// Runs this job only after `job` in `queue` is consumed.
    pub fn depends_on_in(mut self, queue: impl Into<String>, job: impl Into<JobId>) -> Self {
        self.depends.push(Dependency {
            queue: Some(queue.into()),
            job: job.into(),
        });
        self
    }

    /// Makes the job unique by `key` for `ttl`: while the key holds,
    /// posting again with it returns the existing job's id.
    pub fn unique(mut self, key: impl Into<String>, ttl: Duration) -> Self {
        self.unique = Some((key.into(), ttl));
        self
    }

    /// Tracks the job from the start (its events also go to their own
    /// channels).
    pub fn track(mut self) -> Self {
        self.track = true;
        self
    }

    /// Sets the arguments from any serde value (encoded as msgpack, structs
    /// as maps).
    pub fn args<T: serde::Serialize + ?Sized>(mut self, args: &T) -> Result<Self> {
        let bytes = rmp_serde::to_vec_named(args)
            .map_err(|e| Error::codec(format!("cannot encode arguments of job {}: {e}", self.name)))?;
        self.args = rmpv::decode::read_value(&mut bytes.as_slice())
            .map_err(|e| Error::codec(format!("cannot encode arguments of job {}: {e}", self.name)))?;
        Ok(self)
    }

    /// Sets the arguments from a msgpack value.
    pub fn args_value(mut self, args: rmpv::Value) -> Self {
        self.args = args;
        self
    }

    /// Sets the priority.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Makes the job claimable only after `delay`.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.run_at = RunAt::After(delay);
        self
    }

    /// Makes the job claimable only at `when`.
    pub fn run_at(mut self, when: SystemTime) -> Self {
        self.run_at = RunAt::At(when);
        self
    }

    /// Sets the number of tries.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Uses a caller-chosen id.
    pub fn id(mut self, id: impl Into<JobId>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Checks the fields a board relies on.
    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() {
            return Err(Error::invalid("a job needs a non-empty name"));
        }
        if self.max_attempts == 0 {
            return Err(Error::invalid(format!(
                "job {}: max_attempts must be at least 1",
                self.name
            )));
        }
        self.priority.validated()?;
        for tag in &self.tags {
            validate_word("tag", tag)?;
        }
        if let Some((key, ttl)) = &self.unique {
            validate_word("unique key", key)?;
            if ttl.is_zero() {
                return Err(Error::invalid(format!(
                    "unique key {key:?} needs a ttl of at least 1 ms"
                )));
            }
        }
        for dep in &self.depends {
            validate_word("dependency", dep.job.as_str())?;
        }
        if let Some(book) = &self.book {
            if book.name.is_empty() || book.uuid.is_empty() {
                return Err(Error::invalid(format!(
                    "job {}: a book needs a name and a uuid",
                    self.name
                )));
            }
        }
        if let Some(id) = &self.id {
            if id.0.is_empty() || id.0.len() > 255 || id.0.contains(char::is_whitespace) {
                return Err(Error::invalid(format!(
                    "job id {:?} must be 1 to 255 characters without spaces",
                    id.0
                )));
            }
        }
        Ok(())
    }
}

/// Tags, unique keys and ids become parts of key names: 1 to 200
/// characters, no whitespace or control characters.
pub fn validate_word(what: &str, text: &str) -> Result<()> {
    if text.is_empty() || text.len() > 200 || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::invalid(format!(
            "{what} {text:?} must be 1 to 200 characters without spaces"
        )));
    }
    Ok(())
}

/// The failure group of a reason: its leading `kind:` word(s) lowercased,
/// spaces and underscores as dashes (`stalled`, `fatal`, `poison-pill`);
/// `error` when there is none. The same rule as the Redis board's Lua (`group_of`).
pub fn failure_group(reason: &str) -> String {
    let Some((kind, _)) = reason.split_once(':') else {
        return "error".into();
    };
    let ok = |c: char| c.is_alphanumeric() || c == ' ' || c == '_' || c == '-';
    if kind.is_empty() || !kind.chars().all(ok) {
        return "error".into();
    }
    kind.to_lowercase().replace([' ', '_'], "-")
}

/// A claimed job, ready to run.
#[derive(Debug, PartialEq)]
pub struct Claimed {
    /// The lease to extend, consume, abandon or trash with.
    pub lease: Lease,
    /// The job name (selects the handler).
    pub name: String,
    /// The arguments (`details["args"]`, or the whole `details` for a job
    /// posted by taskflow without `args`).
    pub args: rmpv::Value,
    /// taskflow's whole `details` map (jobworker's postings: `{"args": …}`).
    pub details: rmpv::Value,
    /// taskflow's logbook reference, when the posting has one.
    pub book: Option<Book>,
    /// Which try this is, from 1.
    pub attempt: u32,
    /// Tries allowed before the job is trashed.
    pub max_attempts: u32,
    /// The job's priority.
    pub priority: Priority,
    /// The job was in a worker that died while holding several jobs: run it
    /// alone (a worker claims nothing else until it finishes).
    pub suspect: bool,
}

/// How to give a claim back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Abandon {
    /// Give it back without counting an attempt; claimable at once.
    Release,
    /// Count a failed attempt and retry after `delay`; once attempts run out
    /// the job is trashed with `error` as the reason.
    Retry {
        /// Wait before the next try.
        delay: Duration,
        /// What went wrong (recorded on the job).
        error: String,
    },
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Claimable later (delay, retry backoff). Moved in by post and abandon
    /// with a delay; moved out (to ready) by the next claim or reap once due.
    Scheduled,
    /// Waiting for dependencies. Moved in by post (with unmet
    /// dependencies); out (to ready or scheduled) when the last one is
    /// consumed, or by cancel. Its posting is not in the listings yet, so
    /// taskflow does not see it.
    Waiting,
    /// Claimable now. Moved in by post, abandon, reap and promotion; out by
    /// claim.
    Ready,
    /// Held under a lease. Moved in by claim; out by consume, abandon,
    /// trash, or reap when the lease expires.
    Claimed,
    /// Consumed; kept in history for a bounded time and count.
    Completed,
    /// Given up (dead letter); moved in by trash or exhausted attempts.
    Trashed,
    /// Cancelled before it finished (by cancel); kept in the history like
    /// completed jobs.
    Cancelled,
    /// A posting nobody can decode, moved aside with the reason.
    Quarantined,
}

impl JobState {
    /// The lowercase name used by the CLI and JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Scheduled => "scheduled",
            JobState::Waiting => "waiting",
            JobState::Ready => "ready",
            JobState::Claimed => "claimed",
            JobState::Completed => "completed",
            JobState::Trashed => "trashed",
            JobState::Cancelled => "cancelled",
            JobState::Quarantined => "quarantined",
        }
    }

    /// Parses a lowercase state name.
    pub fn parse(text: &str) -> Result<JobState> {
        Ok(match text {
            "scheduled" => JobState::Scheduled,
            "waiting" => JobState::Waiting,
            "ready" => JobState::Ready,
            "claimed" => JobState::Claimed,
            "completed" => JobState::Completed,
            "trashed" => JobState::Trashed,
            "cancelled" => JobState::Cancelled,
            "quarantined" => JobState::Quarantined,
            other => return Err(Error::invalid(format!("unknown job state {other:?}"))),
        })
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which jobs [`Board::list`](crate::Board::list) returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListFilter {
    /// Everything in the listings (ready, scheduled and claimed), in claim
    /// order.
    #[default]
    Live,
    /// Only jobs in this state.
    State(JobState),
}

/// A page of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Entries to skip.
    pub offset: usize,
    /// Entries to return at most.
    pub limit: usize,
}

impl Default for Page {
    fn default() -> Self {
        Page {
            offset: 0,
            limit: 100,
        }
    }
}

/// What a board knows about one job.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct JobInfo {
    /// The job id.
    pub id: String,
    /// The queue.
    pub queue: String,
    /// The job name (empty for a quarantined posting).
    pub name: String,
    /// Current state.
    pub state: JobState,
    /// Priority.
    pub priority: i32,
    /// Current owner, when claimed.
    pub owner: Option<String>,
    /// Failed tries so far.
    pub attempts: u32,
    /// Tries allowed.
    pub max_attempts: u32,
    /// Fencing token of the latest claim.
    pub token: u64,
    /// Time left on the claim's lease in ms (taskflow's `expires_in`), when
    /// claimed with an expiry.
    pub expires_in_ms: Option<i64>,
    /// When it becomes claimable (ms since the epoch), for scheduled jobs.
    pub run_at_ms: Option<i64>,
    /// The taskflow sequence number.
    pub sequence: Option<i64>,
    /// The posting's `created_on`, ISO 8601 (naive UTC as taskflow writes).
    pub created_on: Option<String>,
    /// taskflow's `last_modified` (the last claim, abandon or trash; on
    /// ZooKeeper the job znode's mtime), ISO 8601 naive UTC.
    pub last_modified: Option<String>,
    /// Last failure or trash/quarantine reason.
    pub reason: Option<String>,
    /// The failure group of a trashed job (the kind of its last failure:
    /// `error`, `fatal`, `stalled`, `crashed`, `poison-pill`, …).
    pub group: Option<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// The job's arguments as JSON (lossy for binary values).
    pub args: serde_json::Value,
    /// taskflow's whole `details` map as JSON (lossy for binary values).
    pub details: serde_json::Value,
    /// taskflow's logbook reference, when the posting has one.
    pub book: Option<Book>,
}

impl serde::Serialize for JobState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}
