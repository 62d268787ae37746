//! `jobworker bench --dashboard`: the web app's server time on a big board
//! (1,000,000 jobs over 20 queues by default): the dashboard, and a
//! queue's first and last page, side by side with Redis' own limit (a
//! round trip of `PING`, and the dashboard's counting reads pipelined).

use std::time::{Duration, Instant};

use futures_util::future::try_join_all;

use crate::board::{AnyBoard, Board, ClaimRequest, QueueOverview};
use crate::error::Result;
use crate::job::{NewJob, Priority};
use crate::redis::RedisBoard;
use crate::web::pages::{dashboard, queue};
use crate::web::state::{AppState, WebOptions};

/// Renders measured per figure.
const RUNS: usize = 30;

/// What the dashboard benchmark prints.
#[derive(Debug, serde::Serialize)]
pub(crate) struct DashboardFigures {
    pub jobs: usize,
    pub queues: usize,
    pub fill_s: f64,
    pub used_memory_mb: f64,
    /// Median and slowest server time, in ms.
    pub dashboard_ms: (f64, f64),
    pub first_page_ms: (f64, f64),
    pub last_page_ms: (f64, f64),
    pub ping_ms: (f64, f64),
    pub counts_pipelined_ms: (f64, f64),
}

/// Fills a board with `jobs` jobs over `queues` queues (three priorities;
/// in each queue some claimed, completed and trashed), then times the
/// pages.
pub(crate) async fn dashboard(
    board: &RedisBoard,
    jobs: usize,
    queues: usize,
    progress: &dyn Fn(&str),
) -> Result<DashboardFigures> {
    let names: Vec<String> = (0..queues).map(|i| format!("dash-{i:02}")).collect();
    progress(&format!("posting {jobs} jobs over {queues} queues"));
    let start = Instant::now();
    try_join_all(names.iter().map(|q| fill(board, q, jobs / queues))).await?;
    let fill_s = start.elapsed().as_secs_f64();
    let used_memory_mb = used_memory(board).await? as f64 / 1_048_576.0;
    let any = AnyBoard::Redis(board.clone());
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let state = AppState::new(any, WebOptions::default(), stop)?;
    progress("timing the dashboard");
    let dashboard_ms = time(|| async { dashboard::render(&state).await.map(drop) }).await?;
    let ready = crate::board::Inspect::overview(board, &names[..1]).await?[0]
        .counts
        .ready
        .unwrap_or(0) as usize;
    let last = ready.saturating_sub(super::pages::PAGE);
    let first_page_ms = time(|| async {
        queue::render(&state, &names[0], &queue::QueueQuery::at(0))
            .await
            .map(drop)
    })
    .await?;
    let last_page_ms = time(|| async {
        queue::render(&state, &names[0], &queue::QueueQuery::at(last))
            .await
            .map(drop)
    })
    .await?;
    progress("timing Redis' own limit");
    let ping_ms = time(|| async {
        redis::cmd("PING")
            .query_async::<String>(&mut board.connection())
            .await
            .map(drop)
            .map_err(Into::into)
    })
    .await?;
    let counts_pipelined_ms = time(|| async { counts_pipelined(board, &names).await }).await?;
    let check: Vec<QueueOverview> = crate::board::Inspect::overview(&state.board, &names).await?;
    let total: u64 = check
        .iter()
        .map(|o| {
            o.counts.ready.unwrap_or(0)
                + o.counts.claimed.unwrap_or(0)
                + o.counts.completed.unwrap_or(0)
                + o.counts.trashed.unwrap_or(0)
        })
        .sum();
    progress(&format!("the board holds {total} jobs in the dashboard's counts"));
    Ok(DashboardFigures {
        jobs,
        queues,
        fill_s,
        used_memory_mb,
        dashboard_ms,
        first_page_ms,
        last_page_ms,
        ping_ms,
        counts_pipelined_ms,
    })
}

/// Posts `n` jobs to `q` in batches, then claims 500, consumes 250 and
/// trashes 50 of them (so every count and chart has something).
async fn fill(board: &RedisBoard, q: &str, n: usize) -> Result<()> {
    let prios = [Priority::NORMAL, Priority::HIGH, Priority::LOW];
    let mut left = n;
    let mut i = 0;
    while left > 0 {
        let take = left.min(1000);
        let batch: Vec<NewJob> = (0..take)
            .map(|k| NewJob::new("dash").priority(prios[(i + k) % 3]))
            .collect();
        for r in Board::post_many(board, q, &batch).await? {
            r?;
        }
        left -= take;
        i += take;
    }
    let request = ClaimRequest {
        queues: &[q],
        who: "bench-dash",
        expiry: Duration::from_secs(3600),
        count: 500.min(n).max(1),
        holding: 0,
        hand_off: None,
    };
    let claimed = board.claim_with(&request).await?;
    for (k, c) in claimed.into_iter().enumerate() {
        if k < 250 {
            board.consume(c.lease).await.map_err(crate::Error::from)?;
        } else if k < 300 {
            board.trash(c.lease, "bench").await.map_err(crate::Error::from)?;
        }
    }
    Ok(())
}

/// The dashboard's counting reads of every queue in one pipeline (what
/// Redis needs at the least to answer them).
async fn counts_pipelined(board: &RedisBoard, names: &[String]) -> Result<()> {
    let mut pipe = redis::pipe();
    for q in names {
        let keys = board.keys(q)?;
        pipe.zcard(keys.ready())
            .zcard(keys.scheduled())
            .zcard(keys.waiting())
            .zcard(keys.leases())
            .zcard(keys.completed())
            .hlen(keys.trash())
            .zcard(keys.cancelled())
            .hlen(keys.quarantine());
    }
    pipe.query_async::<()>(&mut board.connection()).await?;
    Ok(())
}

async fn used_memory(board: &RedisBoard) -> Result<u64> {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut board.connection())
        .await?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0))
}

/// Median and slowest of [`RUNS`] runs, in ms.
async fn time<F, Fut>(mut f: F) -> Result<(f64, f64)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut ms = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let start = Instant::now();
        f().await?;
        ms.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    Ok((ms[RUNS / 2], ms[RUNS - 1]))
}

impl DashboardFigures {
    /// The figures as a table.
    pub(crate) fn print_table(&self) {
        println!(
            "jobworker bench --dashboard: {} jobs over {} queues (posted in {:.1} s; redis used_memory {:.0} MB); server time, median / slowest of {RUNS}:",
            self.jobs, self.queues, self.fill_s, self.used_memory_mb
        );
        let row = |k: &str, (m, x): (f64, f64)| println!("  {k:<44} {m:>8.2} ms {x:>8.2} ms");
        row("dashboard (every queue × state, charts)", self.dashboard_ms);
        row("queue page, first page of 50", self.first_page_ms);
        row("queue page, last page of the ready jobs", self.last_page_ms);
        row("redis' own limit: PING round trip", self.ping_ms);
        row(
            "redis' own limit: the counts, one pipeline",
            self.counts_pipelined_ms,
        );
        println!(
            "  dashboard / pipelined counts: {:.1}×",
            self.dashboard_ms.0 / self.counts_pipelined_ms.0.max(0.001)
        );
    }
}
