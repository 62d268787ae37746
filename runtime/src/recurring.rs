//! Recurring jobs: templates that post a run per slot of their rule (an
//! interval, or a cron expression in a time zone). A board stores them and
//! spawns their runs (see [`Admin::recur`](crate::board::Admin::recur)).

use std::time::Duration;

use crate::error::{Error, Result};
use crate::job::{validate_word, Priority, DEFAULT_MAX_ATTEMPTS};
use crate::schedule::Rule;

/// Default of [`RecurringJob::backlog`].
pub const DEFAULT_BACKLOG: u32 = 1;

/// A recurring job to create or update with [`Admin::recur`](crate::board::Admin::recur).
///
/// ```
/// use jobworker::recurring::RecurringJob;
/// use jobworker::schedule::Rule;
/// use jobworker::Priority;
///
/// let report = RecurringJob::new("report", Rule::cron("0 7 * * *", "Europe/Berlin")?)
///     .id("daily-report")
///     .args(&"sales")?
///     .priority(Priority::HIGH)
///     .backlog(3); // after an outage, catch up at most 3 missed runs
/// assert_eq!(report.name, "report");
/// # Ok::<(), jobworker::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RecurringJob {
    /// Template id; choosing one makes `recur` an upsert.
    pub id: Option<String>,
    /// Name of the jobs it posts (selects the handler).
    pub name: String,
    /// Arguments of every run.
    pub args: rmpv::Value,
    /// When runs are due.
    pub rule: Rule,
    /// Delay of the first run of an interval rule (qless's offset).
    pub offset: Duration,
    /// Priority of the runs.
    pub priority: Priority,
    /// Tries of each run.
    pub max_attempts: u32,
    /// Tags of the runs.
    pub tags: Vec<String>,
    /// Most missed runs posted when catching up (the latest ones).
    pub backlog: u32,
}

impl RecurringJob {
    /// Runs of `name` on `rule`.
    pub fn new(name: impl Into<String>, rule: Rule) -> Self {
        RecurringJob {
            id: None,
            name: name.into(),
            args: rmpv::Value::Nil,
            rule,
            offset: Duration::ZERO,
            priority: Priority::NORMAL,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            tags: Vec::new(),
            backlog: DEFAULT_BACKLOG,
        }
    }

    /// Sets the template id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the arguments from any serde value.
    pub fn args<T: serde::Serialize + ?Sized>(mut self, args: &T) -> Result<Self> {
        self.args = crate::job::NewJob::new(&self.name).args(args)?.args;
        Ok(self)
    }

    /// Delays the first run of an interval rule.
    pub fn offset(mut self, offset: Duration) -> Self {
        self.offset = offset;
        self
    }

    /// Sets the priority of the runs.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the tries of each run.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Adds a tag to the runs.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Sets how many missed runs are caught up (at least 1).
    pub fn backlog(mut self, n: u32) -> Self {
        self.backlog = n;
        self
    }

    /// Checks the fields a board relies on.
    pub(crate) fn validate(&self) -> Result<()> {
        crate::job::NewJob::new(&self.name)
            .max_attempts(self.max_attempts)
            .priority(self.priority)
            .validate()?;
        if let Some(id) = &self.id {
            validate_word("recurring job id", id)?;
        }
        for tag in &self.tags {
            validate_word("tag", tag)?;
        }
        if self.backlog == 0 {
            return Err(Error::invalid("a recurring job's backlog must be at least 1"));
        }
        Ok(())
    }
}

/// A stored recurring job, as listed by [`Admin::recurring`](crate::board::Admin::recurring).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RecurringInfo {
    /// Template id.
    pub id: String,
    /// Name of the jobs it posts.
    pub name: String,
    /// The rule, for humans.
    pub rule: String,
    /// Next slot (ms since the epoch).
    pub next_ms: i64,
    /// Runs posted so far.
    pub runs: u64,
    /// Backlog.
    pub backlog: u32,
    /// Priority of the runs.
    pub priority: i32,
    /// Tags of the runs.
    pub tags: Vec<String>,
}
