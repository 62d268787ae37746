//! Arguments of the operator commands built on the qless-style features:
//! priorities, cancel, tags, tracking, failures, recurring jobs, queues,
//! statistics, events, history and configuration.

use clap::{Args, Subcommand};

use crate::cli::args::{JobQueueArg, QueueArg};

/// `priority`.
#[derive(Debug, Args)]
pub struct PriorityArgs {
    /// The job id.
    pub id: String,
    /// New priority: an integer (higher first) or a taskflow name.
    #[arg(allow_hyphen_values = true)]
    pub priority: String,
    /// The job's queue.
    #[command(flatten)]
    pub queue: JobQueueArg,
}

/// `cancel`.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Job ids.
    #[arg(required = true)]
    pub ids: Vec<String>,
    /// The job's queue.
    #[command(flatten)]
    pub queue: JobQueueArg,
    /// Also cancel every job that depends on them, in any queue.
    #[arg(long)]
    pub with_dependents: bool,
}

/// `tag`.
#[derive(Debug, Subcommand)]
pub enum TagCommand {
    /// Add tags to a job.
    Add(TagChange),
    /// Remove tags from a job.
    Remove(TagChange),
    /// Jobs carrying a tag, most recently tagged first.
    Find {
        /// The tag.
        tag: String,
        /// The queue.
        #[command(flatten)]
        queue: QueueArg,
        /// Entries to show.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// The most used tags.
    Top {
        /// The queue.
        #[command(flatten)]
        queue: QueueArg,
        /// Entries to show.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
}

/// Tags to add to or remove from a job.
#[derive(Debug, Args)]
pub struct TagChange {
    /// The job id.
    pub id: String,
    /// Tags.
    #[arg(required = true)]
    pub tags: Vec<String>,
    /// The job's queue.
    #[command(flatten)]
    pub queue: JobQueueArg,
}

/// `failed`.
#[derive(Debug, Args)]
pub struct FailedArgs {
    /// Show this group's jobs instead of the list of groups.
    pub group: Option<String>,
    /// Queues (comma-separated; default: every queue jobworker posted to).
    #[arg(long, short, value_delimiter = ',')]
    pub queue: Vec<String>,
    /// Entries to show per group.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

/// `retry` and `purge`: trashed jobs by id, by failure group, or all.
#[derive(Debug, Args)]
pub struct SettleArgs {
    /// Job ids.
    pub ids: Vec<String>,
    /// The job's queue.
    #[command(flatten)]
    pub queue: JobQueueArg,
    /// Every job of this failure group.
    #[arg(long, conflicts_with = "ids")]
    pub group: Option<String>,
    /// Every trashed job of the queue (all groups).
    #[arg(long, conflicts_with_all = ["ids", "group"])]
    pub all: bool,
}

/// `recur`.
#[derive(Debug, Subcommand)]
pub enum RecurCommand {
    /// Create (or, with an existing --id, update) a recurring job.
    Add(RecurAddArgs),
    /// List the recurring jobs of a queue.
    List(QueueArg),
    /// Delete a recurring job.
    Remove {
        /// Template id.
        id: String,
        /// The queue.
        #[command(flatten)]
        queue: QueueArg,
    },
}

/// `recur add`.
#[derive(Debug, Args)]
pub struct RecurAddArgs {
    /// Job name of the runs.
    pub name: String,
    /// The queue.
    #[command(flatten)]
    pub queue: QueueArg,
    /// Interval: a number with unit ms, s, m, h or d (e.g. 30s).
    #[arg(long, required_unless_present = "cron", conflicts_with = "cron")]
    pub every: Option<String>,
    /// Delay of the first run of an interval (e.g. 5s).
    #[arg(long, requires = "every")]
    pub offset: Option<String>,
    /// Cron expression (5 fields, or 6 with seconds first).
    #[arg(long)]
    pub cron: Option<String>,
    /// Time zone of the cron expression (IANA name).
    #[arg(long, default_value = "UTC", requires = "cron")]
    pub tz: String,
    /// Most missed runs posted when catching up.
    #[arg(long, default_value_t = crate::recurring::DEFAULT_BACKLOG)]
    pub backlog: u32,
    /// Arguments as JSON.
    #[arg(long, default_value = "null")]
    pub args: String,
    /// Priority of the runs.
    #[arg(long, default_value = "NORMAL", allow_hyphen_values = true)]
    pub priority: String,
    /// Tries of each run.
    #[arg(long, default_value_t = crate::job::DEFAULT_MAX_ATTEMPTS)]
    pub max_attempts: u32,
    /// Tags of the runs (repeatable).
    #[arg(long)]
    pub tag: Vec<String>,
    /// Template id (updates the template with this id if there is one).
    #[arg(long)]
    pub id: Option<String>,
}

/// `limit`.
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// Most jobs of the queue claimed at once across all workers.
    #[arg(required_unless_present = "none")]
    pub limit: Option<u32>,
    /// Remove the limit.
    #[arg(long, conflicts_with = "limit")]
    pub none: bool,
    /// The queue.
    #[command(flatten)]
    pub queue: QueueArg,
}

/// `stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The queue.
    #[command(flatten)]
    pub queue: QueueArg,
    /// The day, YYYY-MM-DD (UTC; default today).
    #[arg(long)]
    pub day: Option<String>,
}

/// `events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only tracked jobs' events.
    #[arg(long)]
    pub tracked: bool,
    /// Stop after this many events.
    #[arg(long)]
    pub count: Option<usize>,
}

/// `config`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the stored configuration (or one key).
    Get {
        /// One key.
        key: Option<String>,
    },
    /// Store a value.
    Set {
        /// The key (expiry, grace, history-count, history-age, trash-count,
        /// trash-age).
        key: String,
        /// The value (seconds for durations).
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// Remove a stored value (back to the built-in default).
    Unset {
        /// The key.
        key: String,
    },
}
