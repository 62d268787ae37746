//! Command-line arguments (clap), with `JOBWORKER_*` environment fallbacks.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::cli::feature_args::{
    CancelArgs, ConfigCommand, EventsArgs, FailedArgs, LimitArgs, PriorityArgs, RecurCommand, SettleArgs,
    StatsArgs, TagCommand,
};

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

/// `run`: the supervisor and its workers.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Queues to serve, in order (comma-separated).
    #[arg(
        long,
        short = 'q',
        default_value = "default",
        env = "JOBWORKER_QUEUES",
        value_delimiter = ','
    )]
    pub queues: Vec<String>,
    /// Worker processes (default: the number of CPUs); 0 runs one worker
    /// in this process without forking.
    #[arg(long, short = 'w', env = "JOBWORKER_WORKERS")]
    pub workers: Option<usize>,
    /// Jobs each worker runs at once.
    #[arg(long, short = 'c', default_value_t = 1, env = "JOBWORKER_CONCURRENCY")]
    pub concurrency: usize,
    /// Directory holding `jobworker-workers/sandbox-<k>` (kept; two
    /// supervisors cannot share one). Default: a directory of this run's
    /// own, `$XDG_RUNTIME_DIR/jobworker/<name>` (else under the temp dir),
    /// removed at exit.
    #[arg(long, env = "JOBWORKER_WORKDIR")]
    pub workdir: Option<PathBuf>,
    /// This supervisor's name: names its default work directory (default:
    /// its pid).
    #[arg(long, env = "JOBWORKER_NAME")]
    pub name: Option<String>,
    /// Lease length in seconds (extended every third of it while a job
    /// runs). Default: the board's `expiry` config, else 30.
    #[arg(long, env = "JOBWORKER_EXPIRY")]
    pub expiry: Option<f64>,
    /// Seconds in-flight jobs may finish after TERM/INT. Default: the
    /// board's `grace` config, else 30.
    #[arg(long, env = "JOBWORKER_GRACE")]
    pub grace: Option<f64>,
    /// Longest idle wait in seconds between checks for work.
    #[arg(long, default_value_t = 5.0, env = "JOBWORKER_INTERVAL")]
    pub interval: f64,
    /// Timeout in seconds for handlers that set none (default: no limit).
    #[arg(long, env = "JOBWORKER_TIMEOUT")]
    pub timeout: Option<f64>,
    /// Stop once the queues hold no jobs.
    #[arg(long)]
    pub until_drained: bool,
    /// Show a progress bar on stderr.
    #[arg(long)]
    pub progress: bool,
}

/// Where the board is.
#[derive(Debug, Args)]
pub struct BoardArgs {
    /// Redis URL (redis://, rediss://, unix://; user:password@ allowed).
    /// Without it: a Redis on 127.0.0.1:6379 if one answers, otherwise a
    /// private redis-server started for this command.
    #[arg(long, global = true, env = "JOBWORKER_REDIS_URL")]
    pub redis: Option<String>,
    /// Use the ZooKeeper board at `host:port[,host:port]/root` instead of
    /// Redis (queue Q lives at `<root>/Q/jobs`, taskflow's layout).
    #[arg(long, global = true, env = "JOBWORKER_ZOOKEEPER", conflicts_with_all = ["redis", "data_dir"])]
    pub zookeeper: Option<String>,
    /// The private board's directory (its redis-server, unix socket and
    /// append-only file). Default: `$XDG_DATA_HOME/jobworker`, else
    /// `~/.local/share/jobworker`, used when no --redis is given and nothing
    /// answers on 127.0.0.1:6379.
    #[arg(long, global = true, env = "JOBWORKER_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Store queue Q under namespace NS instead of `jw:{Q}` (repeatable),
    /// e.g. `--namespace legacy=taskflow` to share taskflow's default board.
    #[arg(
        long = "namespace",
        global = true,
        value_name = "Q=NS",
        env = "JOBWORKER_NAMESPACES",
        value_delimiter = ','
    )]
    pub namespaces: Vec<String>,
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

/// `server`.
#[derive(Debug, Subcommand)]
pub enum ServerCommand {
    /// Whether the private board's redis-server runs, and where.
    Status,
    /// Stop the private board's redis-server (its data stays; the next
    /// command starts it again).
    Stop,
}

/// A queue.
#[derive(Debug, Args)]
pub struct QueueArg {
    /// The queue.
    #[arg(long, short, default_value = "default", env = "JOBWORKER_QUEUE")]
    pub queue: String,
}

/// `post`.
#[derive(Debug, Args)]
pub struct PostArgs {
    /// Job name (selects the handler).
    pub name: String,
    /// The queue (default: the linked handler's queue, else `default`).
    #[arg(long, short, env = "JOBWORKER_QUEUE")]
    pub queue: Option<String>,
    /// Arguments as JSON (stored as msgpack): inline, `@FILE`, or `-` to
    /// read them from stdin.
    #[arg(long, default_value = "null", conflicts_with = "from")]
    pub args: String,
    /// Post one job per line of this file (`-`: stdin), each line the job's
    /// arguments as JSON; pipelined in batches, with a progress bar.
    #[arg(long, value_name = "FILE.jsonl", conflicts_with = "count")]
    pub from: Option<String>,
    /// Priority: an integer (higher first) or a taskflow name.
    #[arg(long, default_value = "NORMAL", allow_hyphen_values = true)]
    pub priority: String,
    /// Seconds before the job becomes claimable.
    #[arg(long)]
    pub delay: Option<f64>,
    /// Tries before the job is trashed (default: the linked handler's,
    /// else 5).
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// Job id (a uuid is generated when absent).
    #[arg(long)]
    pub id: Option<String>,
    /// Post this many copies (ids generated).
    #[arg(long, default_value_t = 1)]
    pub count: usize,
    /// Tag (repeatable).
    #[arg(long)]
    pub tag: Vec<String>,
    /// Run only after this job is consumed: `ID` in the same queue or
    /// `QUEUE/ID` (repeatable).
    #[arg(long)]
    pub depends: Vec<String>,
    /// Unique key: while it holds, posting with it again returns the
    /// existing job's id.
    #[arg(long)]
    pub unique: Option<String>,
    /// How long the unique key holds, in seconds.
    #[arg(long, default_value_t = 3600.0, requires = "unique")]
    pub unique_ttl: f64,
    /// Track the job from the start.
    #[arg(long)]
    pub track: bool,
    /// taskflow's logbook name (`book`), with `--book-uuid`: a Python
    /// conductor needs it to run the job.
    #[arg(long, requires = "book_uuid")]
    pub book_name: Option<String>,
    /// taskflow's logbook uuid (`book`), with `--book-name`.
    #[arg(long, requires = "book_name")]
    pub book_uuid: Option<String>,
}

/// `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The queue.
    #[command(flatten)]
    pub queue: QueueArg,
    /// Only this state (ready, scheduled, waiting, claimed, completed, trashed,
    /// cancelled, quarantined).
    #[arg(long)]
    pub state: Option<String>,
    /// Entries to skip.
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
    /// Entries to show.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

/// A job in a queue.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// The job id.
    pub id: String,
    /// The job's queue.
    #[command(flatten)]
    pub queue: JobQueueArg,
}

/// The queue of jobs named by id: found from the id when not given.
#[derive(Debug, Args)]
pub struct JobQueueArg {
    /// The job's queue (default: the queue that holds the job; giving it
    /// saves a lookup).
    #[arg(long, short, env = "JOBWORKER_QUEUE")]
    pub queue: Option<String>,
}

impl JobQueueArg {
    /// The queue of job `id`: the one given, else the only queue that holds
    /// it (`find` lists them).
    pub(crate) async fn of<F>(&self, id: &str, find: impl FnOnce() -> F) -> crate::Result<String>
    where
        F: std::future::Future<Output = crate::Result<Vec<String>>>,
    {
        if let Some(q) = &self.queue {
            return Ok(q.clone());
        }
        let mut found = find().await?;
        match found.len() {
            0 => Err(crate::Error::new(
                crate::ErrorKind::NotFound,
                format!("job {id} is not in any queue of this board"),
            )),
            1 => Ok(found.remove(0)),
            _ => Err(crate::Error::invalid(format!(
                "job {id} is in several queues ({}): give -q QUEUE",
                found.join(", ")
            ))),
        }
    }
}

/// `claim`.
#[derive(Debug, Args)]
pub struct ClaimArgs {
    /// Queues, in the order they are served (comma-separated).
    #[arg(long, short, default_value = "default", value_delimiter = ',')]
    pub queue: Vec<String>,
    /// Claim this one job instead of the next ones in order.
    #[arg(long)]
    pub id: Option<String>,
    /// Owner string written on the job.
    #[arg(long, env = "JOBWORKER_OWNER")]
    pub owner: Option<String>,
    /// Lease length in seconds.
    #[arg(long, default_value_t = 60.0)]
    pub expiry: f64,
    /// With `--id`: no expiry, as taskflow's claim without one (held until
    /// released; on ZooKeeper, as long as this command's session).
    #[arg(long, requires = "id", conflicts_with = "expiry")]
    pub no_expiry: bool,
    /// How many jobs to take.
    #[arg(long, default_value_t = 1)]
    pub count: usize,
}

/// A lease: job, owner and fencing token.
#[derive(Debug, Args)]
pub struct LeaseArgs {
    /// The job id.
    pub id: String,
    /// The queue.
    #[command(flatten)]
    pub queue: QueueArg,
    /// The owner string of the claim.
    #[arg(long, env = "JOBWORKER_OWNER")]
    pub owner: String,
    /// The fencing token of the claim (printed by `claim`): the verb is
    /// refused if the job was claimed again since.
    #[arg(long, required_unless_present = "any_token")]
    pub token: Option<u64>,
    /// Skip the fencing check: any claim by `--owner` will do (for claims
    /// made by taskflow, which have no token).
    #[arg(long, conflicts_with = "token")]
    pub any_token: bool,
}

/// `extend`.
#[derive(Debug, Args)]
pub struct ExtendArgs {
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// New lease length in seconds from now.
    #[arg(long, default_value_t = 60.0)]
    pub expiry: f64,
}

/// `abandon`.
#[derive(Debug, Args)]
pub struct AbandonArgs {
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// Count a failed attempt and retry after this many seconds.
    #[arg(long)]
    pub retry_after: Option<f64>,
    /// The failure to record with --retry-after.
    #[arg(long, default_value = "abandoned from the command line")]
    pub error: String,
}

/// `trash`.
#[derive(Debug, Args)]
pub struct TrashArgs {
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// Why the job is given up.
    #[arg(long, default_value = "trashed from the command line")]
    pub reason: String,
}

/// `bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// No-op jobs per drain run.
    #[arg(long, default_value_t = 20_000)]
    pub jobs: usize,
    /// Worker processes.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Concurrency per worker.
    #[arg(long, default_value_t = 50)]
    pub concurrency: usize,
    /// Run the private redis-server with appendonly yes, appendfsync everysec.
    #[arg(long)]
    pub aof: bool,
    /// Skip the claim-cost measurement (100 vs 100,000 queued).
    #[arg(long)]
    pub no_claim_cost: bool,
}
