//! Running the operator commands built on the qless-style features.

use std::time::Duration;

use futures_util::StreamExt;

use crate::board::Board;
use crate::board::{Admin, AnyBoard, Events};
use crate::cli::args::{Command, JobQueueArg, QueueArg};
use crate::cli::commands::json_to_msgpack;
use crate::cli::feature_args::{
    ConfigCommand, FailedArgs, RecurAddArgs, RecurCommand, SettleArgs, TagCommand,
};
use crate::cli::output;
use crate::cli::output::outln;
use crate::error::{Error, Result};
use crate::job::{JobId, Page, Priority};
use crate::recurring::RecurringJob;
use crate::schedule::Rule;
use crate::stats::parse_day;

fn to_json<T: serde::Serialize>(value: &T) -> Result<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| Error::codec(e.to_string()))
}

fn page(limit: usize) -> Page {
    Page { offset: 0, limit }
}

/// A duration with a unit: `250ms`, `30s`, `5m`, `2h`, `1d` (a bare number
/// is seconds).
pub(crate) fn parse_span(text: &str) -> Result<Duration> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => f64::NAN,
    };
    number
        .parse::<f64>()
        .ok()
        .and_then(|n| Duration::try_from_secs_f64(n * scale).ok())
        .ok_or_else(|| {
            Error::invalid(format!(
                "{text:?} is not a duration like 500ms, 30s, 5m, 2h or 1d"
            ))
        })
}

/// Runs a feature command (the other commands are run by
/// `commands::execute`).
pub(crate) async fn execute(board: &AnyBoard, command: &Command, json: bool) -> Result<()> {
    match command {
        Command::Priority(a) => priority(board, &a.queue, &a.id, &a.priority, json).await,
        Command::Cancel(a) => cancel(board, &a.queue, &a.ids, a.with_dependents, json).await,
        Command::Tag(t) => tag(board, t, json).await,
        Command::Track(a) => tracking(board, &a.queue, &a.id, true, json).await,
        Command::Untrack(a) => tracking(board, &a.queue, &a.id, false, json).await,
        Command::Failed(a) => failed(board, a, json).await,
        Command::Retry(a) => settle(board, a, false, json).await,
        Command::Purge(a) => settle(board, a, true, json).await,
        Command::Recur(r) => recur(board, r, json).await,
        Command::Pause(q) => board
            .pause(&q.queue)
            .await
            .map(|()| say(json, "paused", &q.queue)),
        Command::Resume(q) => board
            .resume(&q.queue)
            .await
            .map(|()| say(json, "resumed", &q.queue)),
        Command::Limit(a) => {
            let limit = if a.none { None } else { a.limit };
            board.set_limit(&a.queue.queue, limit).await.map(|()| {
                let what = limit.map_or("no limit".to_owned(), |n| format!("limit {n}"));
                say(json, &what, &a.queue.queue)
            })
        }
        Command::Queues => queues(board, json).await,
        Command::Stats(a) => stats(board, &a.queue, a.day.as_deref(), json).await,
        Command::Events(a) => events(board, a.tracked, a.count).await,
        Command::History(a) => history(board, &a.queue, &a.id, json).await,
        Command::Config(c) => config(board, c, json).await,
        other => Err(Error::invalid(format!("{other:?} is not a feature command"))),
    }
}

fn say(json: bool, what: &str, subject: &str) {
    if json {
        output::json(&serde_json::json!({ "result": what, "subject": subject }));
    } else {
        outln!("{what} {subject}");
    }
}

/// The queue of job `id` (`q`'s, or the one that holds it).
async fn queue_of(board: &AnyBoard, q: &JobQueueArg, id: &str) -> Result<String> {
    let job = JobId::from(id);
    q.of(id, || board.queues_of(&job)).await
}

/// `ids` grouped by their queue (`q`'s, or each one's own).
async fn by_queue(board: &AnyBoard, q: &JobQueueArg, ids: &[String]) -> Result<Vec<(String, Vec<JobId>)>> {
    let mut groups: Vec<(String, Vec<JobId>)> = Vec::new();
    for id in ids {
        let queue = queue_of(board, q, id).await?;
        match groups.iter_mut().find(|(g, _)| *g == queue) {
            Some((_, list)) => list.push(JobId::from(id.as_str())),
            None => groups.push((queue, vec![JobId::from(id.as_str())])),
        }
    }
    Ok(groups)
}

async fn priority(board: &AnyBoard, q: &JobQueueArg, id: &str, prio: &str, json: bool) -> Result<()> {
    let prio = Priority::parse(prio)?;
    let queue = queue_of(board, q, id).await?;
    let state = board.set_priority(&queue, &JobId::from(id), prio).await?;
    say(json, &format!("priority {} ({state})", prio.0), id);
    Ok(())
}

async fn cancel(board: &AnyBoard, q: &JobQueueArg, list: &[String], deps: bool, json: bool) -> Result<()> {
    for (queue, jobs) in by_queue(board, q, list).await? {
        for (queue, id) in board.cancel(&queue, &jobs, deps).await? {
            say(json, "cancelled", &format!("{queue}/{id}"));
        }
    }
    Ok(())
}

async fn tag(board: &AnyBoard, t: &TagCommand, json: bool) -> Result<()> {
    match t {
        TagCommand::Add(c) | TagCommand::Remove(c) => {
            let tags: Vec<&str> = c.tags.iter().map(String::as_str).collect();
            let id = JobId::from(c.id.as_str());
            let queue = queue_of(board, &c.queue, &c.id).await?;
            let now = if matches!(t, TagCommand::Add(_)) {
                board.tag(&queue, &id, &tags).await?
            } else {
                board.untag(&queue, &id, &tags).await?
            };
            if json {
                output::json(&serde_json::json!({ "id": c.id, "tags": now }));
            } else {
                outln!("{} tags: {}", c.id, now.join(" "));
            }
        }
        TagCommand::Find { tag, queue, limit } => {
            let found = board.tagged(&queue.queue, tag, page(*limit)).await?;
            if json {
                output::json(&to_json(&found.iter().map(JobId::as_str).collect::<Vec<_>>())?);
            } else {
                found.iter().for_each(|id| outln!("{id}"));
            }
        }
        TagCommand::Top { queue, limit } => {
            let top = board.top_tags(&queue.queue, page(*limit)).await?;
            if json {
                output::json(&to_json(&top)?);
            } else {
                top.iter().for_each(|(tag, n)| outln!("{n:>8}  {tag}"));
            }
        }
    }
    Ok(())
}

async fn tracking(board: &AnyBoard, q: &JobQueueArg, id: &str, on: bool, json: bool) -> Result<()> {
    let job = JobId::from(id);
    let queue = queue_of(board, q, id).await?;
    if on {
        board.track(&queue, &job).await?;
    } else {
        board.untrack(&queue, &job).await?;
    }
    say(json, if on { "tracking" } else { "untracked" }, id);
    Ok(())
}

async fn failed(board: &AnyBoard, a: &FailedArgs, json: bool) -> Result<()> {
    let queues = if a.queue.is_empty() {
        board.queues().await?
    } else {
        a.queue.clone()
    };
    if let Some(group) = &a.group {
        for queue in &queues {
            let jobs = board.failed_jobs(queue, group, page(a.limit)).await?;
            for id in jobs {
                let info = board.show(queue, &id).await?;
                if json {
                    output::json(&to_json(&info)?);
                } else {
                    outln!(
                        "{queue}/{id}  {}  {}",
                        info.name,
                        info.reason.as_deref().unwrap_or("-")
                    );
                }
            }
        }
        return Ok(());
    }
    let mut groups = Vec::new();
    for queue in &queues {
        groups.extend(board.failed(queue).await?);
    }
    if json {
        output::json(&to_json(&groups)?);
    } else if groups.is_empty() {
        outln!("no failed jobs");
    } else {
        let rows = groups
            .iter()
            .map(|g| [g.queue.clone(), g.group.clone(), g.count.to_string()]);
        output::table(&["QUEUE", "GROUP", "JOBS"], rows);
    }
    Ok(())
}

async fn settle(board: &AnyBoard, a: &SettleArgs, purge: bool, json: bool) -> Result<()> {
    let verb = if purge { "purged" } else { "retried" };
    if a.all || a.group.is_some() {
        // Without -q: every queue jobworker posted to.
        let queues = match &a.queue.queue {
            Some(q) => vec![q.clone()],
            None => board.queues().await?,
        };
        for queue in &queues {
            let n = board.settle_failed(queue, a.group.as_deref(), purge).await?;
            say(json, &format!("{verb} {n} jobs of"), queue);
        }
        return Ok(());
    }
    if a.ids.is_empty() {
        return Err(Error::invalid("name job ids, or use --group GROUP or --all"));
    }
    let mut missing = Vec::new();
    for (queue, jobs) in by_queue(board, &a.queue, &a.ids).await? {
        let results = if purge {
            board.purge(&queue, &jobs).await?
        } else {
            board.retry(&queue, &jobs).await?
        };
        for (id, r) in jobs.iter().zip(results) {
            match r {
                Ok(()) => say(json, verb, id.as_str()),
                Err(_) => missing.push(format!("{queue}/{id}")),
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::new(
        crate::error::ErrorKind::NotFound,
        format!("not in the trash: {}", missing.join(", ")),
    ))
}

async fn recur(board: &AnyBoard, r: &RecurCommand, json: bool) -> Result<()> {
    match r {
        RecurCommand::Add(a) => {
            let id = board.recur(&a.queue.queue, recurring_job(a)?).await?;
            say(json, "recurring", &id);
        }
        RecurCommand::List(q) => {
            let list = board.recurring(&q.queue).await?;
            if json {
                output::json(&to_json(&list)?);
            } else if list.is_empty() {
                outln!("no recurring jobs in queue {}", q.queue);
            } else {
                let rows = list.iter().map(|t| {
                    [
                        t.id.clone(),
                        t.name.clone(),
                        t.rule.clone(),
                        output::time(t.next_ms),
                        t.runs.to_string(),
                    ]
                });
                output::table(&["ID", "NAME", "RULE", "NEXT", "RUNS"], rows);
            }
        }
        RecurCommand::Remove { id, queue } => {
            board.unrecur(&queue.queue, id).await?;
            say(json, "removed", id);
        }
    }
    Ok(())
}

fn recurring_job(a: &RecurAddArgs) -> Result<RecurringJob> {
    let rule = match (&a.every, &a.cron) {
        (Some(every), None) => Rule::every(parse_span(every)?)?,
        (None, Some(cron)) => Rule::cron(cron, &a.tz)?,
        _ => return Err(Error::invalid("give exactly one of --every and --cron")),
    };
    let args: serde_json::Value =
        serde_json::from_str(&a.args).map_err(|e| Error::invalid(format!("--args is not JSON: {e}")))?;
    let mut job = RecurringJob::new(&a.name, rule)
        .priority(Priority::parse(&a.priority)?)
        .max_attempts(a.max_attempts)
        .backlog(a.backlog);
    job.args = json_to_msgpack(&args);
    if let Some(offset) = &a.offset {
        job = job.offset(parse_span(offset)?);
    }
    for t in &a.tag {
        job = job.tag(t);
    }
    if let Some(id) = &a.id {
        job = job.id(id);
    }
    Ok(job)
}

async fn queues(board: &AnyBoard, json: bool) -> Result<()> {
    let mut rows = Vec::new();
    for queue in board.queues().await? {
        let settings = board.settings(&queue).await?;
        let count = board.job_count(&queue).await?;
        rows.push(serde_json::json!({
            "queue": queue, "listed": count, "paused": settings.paused, "limit": settings.limit,
        }));
    }
    if json {
        output::json(&serde_json::Value::Array(rows));
    } else {
        let rows = rows.iter().map(|r| {
            [
                r["queue"].as_str().unwrap_or("").to_owned(),
                r["listed"].to_string(),
                if r["paused"] == true { "yes" } else { "no" }.to_owned(),
                r["limit"].as_u64().map_or("-".to_owned(), |n| n.to_string()),
            ]
        });
        output::table(&["QUEUE", "LISTED", "PAUSED", "LIMIT"], rows);
    }
    Ok(())
}

async fn stats(board: &AnyBoard, q: &QueueArg, day: Option<&str>, json: bool) -> Result<()> {
    let day = day.map(parse_day).transpose()?;
    let s = board.stats(&q.queue, day).await?;
    if json {
        output::json(&to_json(&s)?);
        return Ok(());
    }
    outln!(
        "queue {}  day {}  failed {}  retried {}",
        s.queue,
        s.day,
        s.failed,
        s.retried
    );
    for (what, t) in [("wait", &s.wait), ("run", &s.run)] {
        outln!(
            "{what:<5} count {}  mean {:.1} ms  std-dev {:.1} ms",
            t.count,
            t.mean_ms,
            t.std_dev_ms
        );
        let buckets: Vec<String> = t.histogram.iter().map(|(b, n)| format!("{b}:{n}")).collect();
        if !buckets.is_empty() {
            outln!("      {}", buckets.join(" "));
        }
    }
    Ok(())
}

async fn events(board: &AnyBoard, tracked: bool, count: Option<usize>) -> Result<()> {
    let mut stream = Box::pin(board.events(tracked).await?);
    eprintln!(
        "jobworker: listening for {} events",
        if tracked { "tracked jobs'" } else { "all" }
    );
    let mut seen = 0;
    while let Some(event) = stream.next().await {
        output::json(&event);
        seen += 1;
        if count.is_some_and(|n| seen >= n) {
            return Ok(());
        }
    }
    Err(Error::unavailable("the event subscription was closed"))
}

/// A job's history: one JSON object per event with `--json` (times in ms
/// since the epoch), else a table with RFC 3339 times.
async fn history(board: &AnyBoard, q: &JobQueueArg, id: &str, json: bool) -> Result<()> {
    let queue = queue_of(board, q, id).await?;
    let events = board.history(&queue, &JobId::from(id)).await?;
    if json {
        events.iter().for_each(output::json);
        return Ok(());
    }
    let rows = events.iter().map(|e| {
        let details: Vec<String> = e
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| !matches!(k.as_str(), "event" | "at" | "job" | "queue"))
            .map(|(k, v)| format!("{k}={}", v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
            .collect();
        [
            e["at"].as_i64().map_or_else(|| "-".to_owned(), output::time),
            e["event"].as_str().unwrap_or("-").to_owned(),
            output::cut(&details.join(" ")),
        ]
    });
    output::table(&["TIME", "EVENT", "DETAILS"], rows);
    Ok(())
}

async fn config(board: &AnyBoard, c: &ConfigCommand, json: bool) -> Result<()> {
    match c {
        ConfigCommand::Get { key } => {
            let mut all: Vec<(String, String)> = board.config().await?.into_iter().collect();
            all.sort();
            all.retain(|(k, _)| key.as_ref().is_none_or(|want| want == k));
            if json {
                output::json(&to_json(
                    &all.into_iter().collect::<std::collections::BTreeMap<_, _>>(),
                )?);
            } else {
                all.iter().for_each(|(k, v)| outln!("{k} = {v}"));
            }
        }
        ConfigCommand::Set { key, value } => {
            board.set_config(key, Some(value)).await?;
            say(json, &format!("set {key} ="), value);
        }
        ConfigCommand::Unset { key } => {
            board.set_config(key, None).await?;
            say(json, "unset", key);
        }
    }
    Ok(())
}
