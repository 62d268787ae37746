//! Running one command against the board.

use std::time::Duration;

use crate::board::{Admin, AnyBoard, Board, BoardSpec, Presence};
use crate::cli::args::{AbandonArgs, ClaimArgs, Cli, Command, ListArgs};
use crate::cli::output::outln;
use crate::cli::{output, server};
use crate::error::{Error, Result};
use crate::job::{Abandon, JobId, JobState, Lease, ListFilter, Page};
use crate::redis::RedisBoard;

/// Runs `cli.command`.
pub(crate) async fn execute(cli: &Cli) -> Result<()> {
    if let Some(Command::Bench(a)) = &cli.command {
        return bench(cli, a).await;
    }
    let spec = server::spec(&cli.board)?;
    let board = spec.connect().await?;
    let json = cli.json;
    let Some(command) = &cli.command else {
        return Ok(());
    };
    match command {
        Command::Run(_) | Command::Handlers | Command::Bench(_) => Ok(()),
        Command::Workers => workers(&board, json).await,
        Command::Post(a) => crate::cli::post::post(&board, a, json).await,
        Command::List(a) => list(&board, a, json).await,
        Command::Show(a) => {
            let id = JobId::from(a.id.as_str());
            let queue = a.queue.of(&a.id, || board.queues_of(&id)).await?;
            let info = board.show(&queue, &id).await?;
            if json {
                output::json(&serde_json::to_value(&info).map_err(|e| Error::codec(e.to_string()))?);
            } else {
                output::job_text(&info);
            }
            Ok(())
        }
        Command::Count(q) => {
            let n = board.job_count(&q.queue).await?;
            if json {
                output::json(&serde_json::json!({ "queue": q.queue, "count": n }));
            } else {
                outln!("{n}");
            }
            Ok(())
        }
        Command::Claim(a) => claim(&board, a, json).await,
        Command::Extend(a) => {
            board
                .extend(&lease(&a.lease), seconds(a.expiry, "--expiry")?)
                .await?;
            done(json, "extended", &a.lease.id)
        }
        Command::Consume(a) => {
            board.consume(&lease(a)).await?;
            done(json, "consumed", &a.id)
        }
        Command::Abandon(a) => abandon(&board, a, json).await,
        Command::Trash(a) => {
            board.trash(&lease(&a.lease), &a.reason).await?;
            done(json, "trashed", &a.lease.id)
        }
        Command::Reap(q) => {
            let r = board.reap(&q.queue).await?;
            if json {
                output::json(&serde_json::to_value(r).map_err(|e| Error::codec(e.to_string()))?);
            } else {
                outln!(
                    "promoted {}, recovered {} expired leases, indexed {}",
                    r.promoted,
                    r.stalled,
                    r.indexed
                );
            }
            Ok(())
        }
        feature => crate::cli::features::execute(&board, feature, json).await,
    }
}

pub(crate) fn seconds(value: f64, flag: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| Error::invalid(format!("{flag} must be a non-negative number of seconds")))
}

fn lease(a: &crate::cli::args::LeaseArgs) -> Lease {
    Lease {
        queue: a.queue.queue.clone(),
        job: JobId::from(a.id.as_str()),
        owner: a.owner.clone(),
        // Token 0 skips the fencing check (`--any-token`).
        token: a.token.unwrap_or(0),
    }
}

fn done(json: bool, what: &str, id: &str) -> Result<()> {
    if json {
        output::json(&serde_json::json!({ "id": id, "result": what }));
    } else {
        outln!("{what} {id}");
    }
    Ok(())
}

/// Converts command-line JSON into the msgpack value stored as arguments.
pub(crate) fn json_to_msgpack(v: &serde_json::Value) -> rmpv::Value {
    use serde_json::Value as J;
    match v {
        J::Null => rmpv::Value::Nil,
        J::Bool(b) => rmpv::Value::Boolean(*b),
        J::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => rmpv::Value::from(u),
            (None, Some(i)) => rmpv::Value::from(i),
            _ => rmpv::Value::F64(n.as_f64().unwrap_or(0.0)),
        },
        J::String(s) => rmpv::Value::from(s.as_str()),
        J::Array(items) => rmpv::Value::Array(items.iter().map(json_to_msgpack).collect()),
        J::Object(map) => rmpv::Value::Map(
            map.iter()
                .map(|(k, v)| (rmpv::Value::from(k.as_str()), json_to_msgpack(v)))
                .collect(),
        ),
    }
}

async fn list(board: &AnyBoard, a: &ListArgs, json: bool) -> Result<()> {
    let filter = match &a.state {
        Some(s) => ListFilter::State(JobState::parse(s)?),
        None => ListFilter::Live,
    };
    let jobs = board
        .list(
            &a.queue.queue,
            filter,
            Page {
                offset: a.offset,
                limit: a.limit,
            },
        )
        .await?;
    if json {
        output::json(&serde_json::to_value(&jobs).map_err(|e| Error::codec(e.to_string()))?);
    } else {
        output::jobs_text(&jobs);
    }
    Ok(())
}

async fn claim(board: &AnyBoard, a: &ClaimArgs, json: bool) -> Result<()> {
    let owner = a.owner.clone().unwrap_or_else(default_owner);
    let expiry = seconds(a.expiry, "--expiry")?;
    let claimed = match &a.id {
        Some(id) => {
            let [queue] = a.queue.as_slice() else {
                return Err(Error::invalid("--id needs exactly one --queue"));
            };
            let expiry = (!a.no_expiry).then_some(expiry);
            vec![
                board
                    .claim_job(queue, &JobId::from(id.as_str()), &owner, expiry)
                    .await?,
            ]
        }
        None => {
            let queues: Vec<&str> = a.queue.iter().map(String::as_str).collect();
            board.claim(&queues, &owner, expiry, a.count).await?
        }
    };
    if json {
        output::json(&serde_json::Value::Array(
            claimed.iter().map(output::claimed_json).collect(),
        ));
    } else if claimed.is_empty() {
        outln!("nothing to claim");
    } else {
        claimed.iter().for_each(output::claimed_text);
    }
    Ok(())
}

async fn abandon(board: &AnyBoard, a: &AbandonArgs, json: bool) -> Result<()> {
    let how = match a.retry_after {
        Some(s) => Abandon::Retry {
            delay: seconds(s, "--retry-after")?,
            error: a.error.clone(),
        },
        None => Abandon::Release,
    };
    let state = board.abandon(&lease(&a.lease), how).await?;
    if json {
        output::json(
            &serde_json::json!({ "id": a.lease.id, "result": "abandoned", "state": state.as_str() }),
        );
    } else {
        outln!("abandoned {} (now {state})", a.lease.id);
    }
    Ok(())
}

/// `<host>:<pid>`, the owner string used when none is given.
pub(crate) fn default_owner() -> String {
    format!("{}:{}", crate::worker::hostname(), std::process::id())
}

/// `jobworker handlers`: the handlers linked into this binary.
pub(crate) fn handlers(json: bool) -> Result<()> {
    let registry = crate::handler::Registry::load()?;
    if json {
        let list: Vec<serde_json::Value> = registry
            .iter()
            .map(|h| {
                serde_json::json!({
                    "name": h.name, "queue": h.queue,
                    "timeout_ms": h.timeout.map(|t| t.as_millis() as u64),
                    "max_attempts": h.max_attempts,
                    "kind": format!("{:?}", h.run),
                    "location": format!("{}:{}", h.file, h.line),
                })
            })
            .collect();
        output::json(&serde_json::Value::Array(list));
    } else if registry.is_empty() {
        outln!("no handlers are linked into this binary");
    } else {
        let rows = registry.iter().map(|h| {
            [
                h.name.to_owned(),
                h.queue.to_owned(),
                h.timeout.map_or("-".to_owned(), |t| format!("{t:?}")),
                h.max_attempts.map_or("-".to_owned(), |n| n.to_string()),
                format!("{:?}", h.run),
                format!("{}:{}", h.file, h.line),
            ]
        });
        output::table(&["NAME", "QUEUE", "TIMEOUT", "MAX ATTEMPTS", "KIND", "AT"], rows);
    }
    Ok(())
}

async fn workers(board: &AnyBoard, json: bool) -> Result<()> {
    let list = board.live_workers().await?;
    if json {
        output::json(&serde_json::to_value(&list).map_err(|e| Error::codec(e.to_string()))?);
    } else if list.is_empty() {
        outln!("no live workers");
    } else {
        let now = board.server_ms().await?.max(0) as u64;
        let rows = list.iter().map(|w| {
            [
                w.owner.clone(),
                w.host.clone(),
                w.pid.to_string(),
                w.queues.join(","),
                w.jobs.len().to_string(),
                output::time(w.started_ms as i64),
                format!("{:.1}s ago", now.saturating_sub(w.beat_ms) as f64 / 1000.0),
            ]
        });
        output::table(
            &["OWNER", "HOST", "PID", "QUEUES", "JOBS", "STARTED", "BEAT"],
            rows,
        );
    }
    Ok(())
}

/// `jobworker bench`: on the given Redis, or on a private redis-server
/// (TCP, optionally with AOF) that is stopped afterwards.
async fn bench(cli: &Cli, a: &crate::cli::args::BenchArgs) -> Result<()> {
    use crate::embedded::{RedisServer, ServerOptions};
    if a.aof && cli.board.redis.is_some() {
        return Err(Error::invalid(
            "--aof configures the private redis-server; leave out --redis to use it",
        ));
    }
    let server = match &cli.board.redis {
        Some(_) => None,
        None => {
            let s = RedisServer::start(ServerOptions {
                appendonly: a.aof,
                ..ServerOptions::default()
            })?;
            eprintln!(
                "jobworker: bench on a private redis-server (pid {}) at {}",
                s.pid(),
                s.url()
            );
            Some(s)
        }
    };
    let url = cli
        .board
        .redis
        .clone()
        .unwrap_or_else(|| server.as_ref().map(|s| s.url()).unwrap_or_default());
    let opts = crate::bench::BenchOptions {
        jobs: a.jobs,
        workers: a.workers,
        concurrency: a.concurrency,
        claim_cost: !a.no_claim_cost,
        url: url.clone(),
        aof: a.aof,
    };
    let progress = |step: &str| eprintln!("jobworker bench: {step}");
    if let Some(zk) = &cli.board.zookeeper {
        return bench_zookeeper(zk, &opts, cli.json, &progress).await;
    }
    let board = RedisBoard::connect(&url).await?;
    let figures = crate::bench::run(&board, &opts, &progress).await?;
    if cli.json {
        output::json(&serde_json::to_value(&figures).map_err(|e| Error::codec(e.to_string()))?);
    } else {
        figures.print_table();
    }
    drop(server);
    Ok(())
}

/// `jobworker bench --zookeeper`: the figures both boards give, on
/// ZooKeeper and on the private Redis in the same run.
async fn bench_zookeeper(
    zk: &str,
    opts: &crate::bench::BenchOptions,
    json: bool,
    progress: &dyn Fn(&str),
) -> Result<()> {
    use crate::bench::{measure_board, print_side_by_side};
    let spec = BoardSpec::ZooKeeper(crate::zookeeper::ZooKeeperOptions::new(zk));
    let zk_fig = measure_board(
        "ZooKeeper",
        &spec.connect().await?,
        &["--zookeeper", zk],
        opts,
        progress,
    )
    .await?;
    let redis = AnyBoard::Redis(RedisBoard::connect(&opts.url).await?);
    let redis_fig = measure_board("Redis", &redis, &["--redis", &opts.url], opts, progress).await?;
    if json {
        output::json(&serde_json::json!({ "zookeeper": zk_fig, "redis": redis_fig }));
    } else {
        print_side_by_side(opts, &zk_fig, &redis_fig);
    }
    Ok(())
}
