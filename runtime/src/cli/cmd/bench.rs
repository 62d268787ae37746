//! `jobworker bench`: speed and memory, on the given Redis or on a private
//! redis-server; with `--zookeeper`, the ZooKeeper board next to it.

use clap::Args;

use crate::board::{AnyBoard, BoardSpec};
use crate::cli::output;
use crate::cli::server::BoardArgs;
use crate::error::{Error, Result};
use crate::redis::RedisBoard;

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
    /// Measure the web app instead: its server time on a board of
    /// --dashboard-jobs jobs over --dashboard-queues queues.
    #[arg(long)]
    pub dashboard: bool,
    /// Jobs on the board of --dashboard.
    #[arg(long, default_value_t = 1_000_000)]
    pub dashboard_jobs: usize,
    /// Queues on the board of --dashboard.
    #[arg(long, default_value_t = 20)]
    pub dashboard_queues: usize,
}

/// `jobworker bench`: on the given Redis, or on a private redis-server
/// (TCP, optionally with AOF) that is stopped afterwards.
pub(crate) async fn run(board: &BoardArgs, a: &BenchArgs, json: bool) -> Result<()> {
    use crate::embedded::{RedisServer, ServerOptions};
    if a.aof && board.redis.is_some() {
        return Err(Error::invalid(
            "--aof configures the private redis-server; leave out --redis to use it",
        ));
    }
    let server = match &board.redis {
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
    let url = board
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
    if let Some(zk) = &board.zookeeper {
        return zookeeper(zk, &opts, json, &progress).await;
    }
    let redis = RedisBoard::connect(&url).await?;
    if redis.options().on_cluster() {
        return Err(Error::invalid(
            "jobworker bench measures one redis-server (its INFO and commandstats); for a redis cluster \
             run scripts/bench-cluster",
        ));
    }
    if a.dashboard {
        let queues = a.dashboard_queues.max(1);
        let figures = crate::web::bench::dashboard(&redis, a.dashboard_jobs, queues, &progress).await?;
        if json {
            output::json(&output::to_json(&figures)?);
        } else {
            figures.print_table();
        }
        return Ok(());
    }
    let figures = crate::bench::run(&redis, &opts, &progress).await?;
    if json {
        output::json(&output::to_json(&figures)?);
    } else {
        figures.print_table();
    }
    drop(server);
    Ok(())
}

/// `jobworker bench --zookeeper`: the figures both boards give, on
/// ZooKeeper and on the private Redis in the same run.
async fn zookeeper(
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
        ("JOBWORKER_ZOOKEEPER", zk),
        opts,
        progress,
    )
    .await?;
    let redis = AnyBoard::Redis(RedisBoard::connect(&opts.url).await?);
    let redis_fig = measure_board(
        "Redis",
        &redis,
        ("JOBWORKER_REDIS_URL", &opts.url),
        opts,
        progress,
    )
    .await?;
    if json {
        output::json(&serde_json::json!({ "zookeeper": zk_fig, "redis": redis_fig }));
    } else {
        print_side_by_side(opts, &zk_fig, &redis_fig);
    }
    Ok(())
}
