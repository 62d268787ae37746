//! `jobworker post`: one job, `--count` copies of it, or one job per line
//! of `--from FILE.jsonl`. Arguments come inline, from `@FILE` or from `-`
//! (stdin). The linked handler of the job's name gives the queue and the
//! number of tries unless flags say otherwise; a name no linked handler has
//! is posted with a warning (another binary may run it). Many jobs go in
//! pipelined batches, with a progress bar on a terminal.

use std::io::{BufRead, BufReader, Read};

use clap::Args;

use crate::board::{AnyBoard, Board};
use crate::cli::output::{self, outln};
use crate::cli::values::{json_to_msgpack, seconds};
use crate::error::{Error, Result};
use crate::handler::Registry;
use crate::job::{NewJob, Priority, DEFAULT_MAX_ATTEMPTS};

/// Jobs per pipelined batch when posting many.
const BATCH: usize = 1000;

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

/// Runs `post`.
pub(crate) async fn run(board: &AnyBoard, a: &PostArgs, json: bool) -> Result<()> {
    let registry = Registry::load()?;
    let handler = registry.get(&a.name);
    let queue = a
        .queue
        .clone()
        .or_else(|| handler.map(|h| h.queue.to_owned()))
        .unwrap_or_else(|| "default".to_owned());
    let max_attempts = a
        .max_attempts
        .or_else(|| handler.and_then(|h| h.max_attempts))
        .unwrap_or(DEFAULT_MAX_ATTEMPTS);
    let template = template(a, max_attempts)?;
    let args = match &a.from {
        Some(path) => lines(path)?,
        None => vec![read_args(&a.args)?],
    };
    let count = if a.from.is_some() { args.len() } else { a.count };
    if (count > 1 || a.from.is_some()) && a.id.is_some() {
        return Err(Error::invalid(
            "--id posts one job: it cannot be combined with --count or --from",
        ));
    }
    let job_at = |i: usize| {
        let value = &args[if a.from.is_some() { i } else { 0 }];
        template.clone().args_value(json_to_msgpack(value))
    };
    if count == 1 && a.from.is_none() {
        let id = board.post(&queue, job_at(0)).await?;
        if json {
            output::json(&serde_json::json!({ "id": id.as_str(), "queue": queue, "name": a.name }));
        } else {
            outln!("{id}");
        }
    } else {
        post_many(board, &queue, &a.name, count, job_at, json).await?;
    }
    // Said once the post went through: a post refused says only why.
    if handler.is_none() && !registry.is_empty() {
        eprintln!(
            "jobworker: warning: no handler named {:?} is linked into this binary; posted anyway \
             (another binary may run it; `jobworker handlers` lists these)",
            a.name
        );
    }
    Ok(())
}

/// Posts `count` jobs (`job_at(i)` is the i-th) in pipelined batches,
/// with a progress bar; prints each id with `--json`, else a summary.
async fn post_many(
    board: &AnyBoard,
    queue: &str,
    name: &str,
    count: usize,
    job_at: impl Fn(usize) -> NewJob,
    json: bool,
) -> Result<()> {
    let bar = indicatif::ProgressBar::new(count as u64).with_message(format!("posting to {queue}"));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} jobs, {per_sec}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("#>."),
    );
    let (mut posted, mut failed) = (0usize, Vec::new());
    for start in (0..count).step_by(BATCH) {
        let jobs: Vec<NewJob> = (start..(start + BATCH).min(count)).map(&job_at).collect();
        for (i, result) in board.post_many(queue, &jobs).await?.into_iter().enumerate() {
            match result {
                Ok(id) => {
                    posted += 1;
                    if json {
                        bar.suspend(|| {
                            output::json(
                                &serde_json::json!({ "id": id.as_str(), "queue": queue, "name": name }),
                            )
                        });
                    }
                }
                Err(e) => failed.push(format!("job {} of {count}: {e}", start + i + 1)),
            }
        }
        bar.set_position((start + jobs.len()) as u64);
    }
    bar.finish_and_clear();
    if !json {
        outln!("posted {posted} {name} jobs to queue {queue}");
    }
    match failed.first() {
        None => Ok(()),
        Some(first) => Err(Error::invalid(format!(
            "{} of {count} posts failed (each error says whether its job may be on the board); the first: {first}",
            failed.len()
        ))),
    }
}

/// The job of every post, without its arguments.
fn template(a: &PostArgs, max_attempts: u32) -> Result<NewJob> {
    let mut job = NewJob::new(&a.name)
        .priority(Priority::parse(&a.priority)?)
        .max_attempts(max_attempts);
    if let Some(d) = a.delay {
        job = job.delay(seconds(d, "--delay")?);
    }
    if let Some(id) = &a.id {
        job = job.id(id.as_str());
    }
    for t in &a.tag {
        job = job.tag(t);
    }
    for d in &a.depends {
        job = match d.split_once('/') {
            Some((queue, id)) => job.depends_on_in(queue, id),
            None => job.depends_on(d.as_str()),
        };
    }
    if let Some(key) = &a.unique {
        job = job.unique(key, seconds(a.unique_ttl, "--unique-ttl")?);
    }
    if a.track {
        job = job.track();
    }
    if let (Some(name), Some(uuid)) = (&a.book_name, &a.book_uuid) {
        job = job.book(name, uuid);
    }
    job.validate()?;
    Ok(job)
}

/// `--args`: inline JSON, `@FILE`, or `-` for stdin.
fn read_args(text: &str) -> Result<serde_json::Value> {
    let (what, body) = match text {
        "-" => {
            let mut body = String::new();
            std::io::stdin()
                .read_to_string(&mut body)
                .map_err(|e| Error::io("cannot read --args from stdin", e))?;
            ("stdin".to_owned(), body)
        }
        _ => match text.strip_prefix('@') {
            Some(path) => (
                path.to_owned(),
                std::fs::read_to_string(path)
                    .map_err(|e| Error::invalid(format!("cannot read --args file {path}: {e}")))?,
            ),
            None => return parse(text, "--args"),
        },
    };
    parse(&body, &format!("--args from {what}"))
}

fn parse(text: &str, what: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| Error::invalid(format!("{what} is not JSON: {e}")))
}

/// `--from`: one job's arguments (JSON) per line of a file, or of stdin
/// for `-`; blank lines are skipped.
fn lines(path: &str) -> Result<Vec<serde_json::Value>> {
    let reader: Box<dyn Read> = match path {
        "-" => Box::new(std::io::stdin()),
        _ => Box::new(
            std::fs::File::open(path)
                .map_err(|e| Error::invalid(format!("cannot open --from file {path}: {e}")))?,
        ),
    };
    let mut out = Vec::new();
    for (n, line) in BufReader::new(reader).lines().enumerate() {
        let line = line.map_err(|e| Error::io(&format!("cannot read --from {path}"), e))?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse(&line, &format!("line {} of --from {path}", n + 1))?);
    }
    if out.is_empty() {
        return Err(Error::invalid(format!("--from {path} holds no jobs")));
    }
    Ok(out)
}
