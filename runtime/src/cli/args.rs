//! The command line's grammar: the top-level [`Cli`] and the [`Command`]
//! enum (clap), with `JOBWORKER_*` environment fallbacks; each command's
//! own arguments live with it under `cli/cmd/`.

use clap::{Parser, Subcommand};

use crate::cli::cmd::bench::BenchArgs;
use crate::cli::cmd::cancel::CancelArgs;
use crate::cli::cmd::claim::ClaimArgs;
use crate::cli::cmd::config::ConfigCommand;
use crate::cli::cmd::events::EventsArgs;
use crate::cli::cmd::failed::FailedArgs;
use crate::cli::cmd::lease::{AbandonArgs, ExtendArgs, LeaseArgs, TrashArgs};
use crate::cli::cmd::list::ListArgs;
use crate::cli::cmd::post::PostArgs;
use crate::cli::cmd::priority::PriorityArgs;
use crate::cli::cmd::queues::LimitArgs;
use crate::cli::cmd::recur::RecurCommand;
use crate::cli::cmd::run::RunArgs;
use crate::cli::cmd::server::ServerCommand;
use crate::cli::cmd::settle::SettleArgs;
use crate::cli::cmd::stats::StatsArgs;
use crate::cli::cmd::tag::TagCommand;
use crate::cli::cmd::web::WebArgs;
use crate::cli::job_args::{JobArgs, QueueArg};
use crate::cli::server::BoardArgs;

/// jobworker: background jobs on taskflow-compatible job boards.
///
/// Without a subcommand, runs the workers: `jobworker --queues a,b --workers N`.
#[derive(Debug, Parser)]
#[command(name = "jobworker", version, about)]
pub struct Cli {
    /// Board options shared by every command.
    #[command(flatten)]
    pub board: BoardArgs,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Log format: text or json.
    #[arg(long, global = true, default_value = "text", env = "JOBWORKER_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// Worker options when no subcommand is given.
    #[command(flatten)]
    pub run: RunArgs,
    /// What to do (default: run the workers).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// How logs are written (to stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the supervisor and its workers (the default).
    Run(RunArgs),
    /// List the handlers linked into this binary.
    Handlers,
    /// List the live workers.
    Workers,
    /// Measure speed and memory (see README "Benchmarks"); with --zookeeper,
    /// the ZooKeeper board next to a private Redis.
    Bench(BenchArgs),
    /// Post a job.
    Post(PostArgs),
    /// List a queue's jobs.
    List(ListArgs),
    /// Show one job.
    Show(JobArgs),
    /// Count the jobs in a queue's listings (as taskflow counts them).
    Count(QueueArg),
    /// Claim jobs (prints their leases).
    Claim(ClaimArgs),
    /// Extend a lease.
    Extend(ExtendArgs),
    /// Consume (finish) a claimed job.
    Consume(LeaseArgs),
    /// Give a claimed job back.
    Abandon(AbandonArgs),
    /// Move a claimed job to the trash.
    Trash(TrashArgs),
    /// Promote due jobs, recover expired leases, index taskflow's jobs.
    Reap(QueueArg),
    /// Change the priority of a job that has not run yet.
    Priority(PriorityArgs),
    /// Cancel jobs that have not finished (a running job's handler stops).
    Cancel(CancelArgs),
    /// Add, remove and find tags.
    #[command(subcommand)]
    Tag(TagCommand),
    /// Track a job: its events also go to their own channels.
    Track(JobArgs),
    /// Stop tracking a job.
    Untrack(JobArgs),
    /// List failure groups (trashed jobs by queue and kind), or one group's jobs.
    Failed(FailedArgs),
    /// Put trashed jobs back to work: by id, --group or --all.
    Retry(SettleArgs),
    /// Delete trashed jobs for good: by id, --group or --all.
    Purge(SettleArgs),
    /// Recurring jobs: add, list, remove.
    #[command(subcommand)]
    Recur(RecurCommand),
    /// Stop handing out a queue's jobs.
    Pause(QueueArg),
    /// Hand out a paused queue's jobs again.
    Resume(QueueArg),
    /// Set a queue's cluster-wide concurrency limit.
    Limit(LimitArgs),
    /// The queues jobworker posted to, with their settings.
    Queues,
    /// A queue's statistics for a day: wait and run times, failures, retries.
    Stats(StatsArgs),
    /// Print events as they happen (one JSON object per line).
    Events(EventsArgs),
    /// Serve the operators' web app and /metrics (read-only unless started
    /// with --auth or --token-env).
    Web(WebArgs),
    /// A job's history.
    History(JobArgs),
    /// Board configuration stored in Redis.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// The private board (used when no --redis is given and nothing answers
    /// on 127.0.0.1:6379): show or stop its redis-server.
    #[command(subcommand)]
    Server(ServerCommand),
    /// Print a shell completion script (e.g. `jobworker completions bash >
    /// /etc/bash_completion.d/jobworker`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; `jobworker man | man -l -`).
    Man,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
