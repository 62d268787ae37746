//! The board's metrics for Prometheus: [`render`] reads a board now and
//! writes what it read in the OpenMetrics text format, for the web app's
//! `GET /metrics` (served with [`CONTENT_TYPE`]).
//!
//! It reads the board only through its capability traits
//! ([`Inspect`](crate::board::Inspect)'s overview,
//! [`Admin`](crate::board::Admin)'s statistics, failure groups and clock,
//! [`Presence`](crate::board::Presence)'s live workers), never by backend.
//! Each scrape is one snapshot, read first (concurrently) and then written:
//! nothing is kept between scrapes, so a queue left out of `queues` simply
//! has no samples. `docs/metrics.md` says the same for operators, with the
//! Grafana dashboard.
//!
//! # Metrics
//!
//! All are named `jobworker_…`; the label `queue` is the queue.
//!
//! | metric | type | labels | what |
//! | --- | --- | --- | --- |
//! | `jobs` | gauge | `queue`, `state` | jobs in each [state](crate::board::STATES) the backend keeps |
//! | `queue_paused` | gauge | `queue` | 1 while the queue is paused, else 0 |
//! | `queue_limit` | gauge | `queue` | the queue's limit on claimed jobs, when one is set |
//! | `oldest_ready_age_seconds` | gauge | `queue` | how long the oldest ready job has waited |
//! | `jobs_completed_total` | counter | `queue` | jobs consumed today (UTC) |
//! | `jobs_failed_total` | counter | `queue` | jobs trashed today (UTC) |
//! | `jobs_retried_total` | counter | `queue` | tries retried, trashed jobs put back, today (UTC) |
//! | `wait_seconds` | histogram | `queue` | today's waits, ready → claimed |
//! | `run_seconds` | histogram | `queue` | today's runs, claimed → consumed |
//! | `trashed_jobs` | gauge | `queue`, `group` | jobs in the trash by failure group |
//! | `workers_alive` | gauge | | live workers on the board |
//! | `workers_alive_by_queue` | gauge | `queue` | live workers serving the queue |
//! | `jobs_held` | gauge | | jobs the live workers hold |
//!
//! The oldest ready job's age is on the server's clock, and 0 when none is
//! ready. A worker's entry names its jobs but not their queues, so the
//! jobs held are a total; per queue, `jobworker_jobs{state="claimed"}` is
//! the jobs held under a lease.
//!
//! # The daily statistics reset at 00:00 UTC
//!
//! The `_total` counters and the two histograms are the board's statistics
//! of the current UTC day
//! ([`Admin::stats`](crate::board::Admin::stats)`(queue, None)`): they
//! start again from zero at 00:00 UTC. Prometheus' `rate()` and
//! `increase()` take that drop for a counter reset, so rates stay right; a
//! raw value is "so far today", not "since the board began".
//!
//! The histograms keep qless's buckets as `le` bounds in seconds: `sN`
//! (N to N+1 s) is `le="N+1"`, `mN` is `(N+1)*60`, `hN` is `(N+1)*3600`,
//! `d1`–`d6` are `(N+1)*86400`, and `d7` (a week and more) is `+Inf`; the
//! bounds are always all written, so `histogram_quantile` sees one set. A
//! qless bound excludes its end, so a run of exactly 2 s counts under
//! `le="3"`. The sum is the day's mean times its count.
//!
//! # Crashes and lost leases
//!
//! The board keeps no counter of lost leases or crashed workers. Their jobs
//! show in the trash's failure groups (`jobworker_trashed_jobs`): `stalled`
//! (a lease expired and the job's attempts ran out), `crashed` (its worker
//! died holding it), `poison-pill` (it crashed workers too often),
//! `timeout`; a lost lease that still had attempts left is counted in
//! `jobworker_jobs_retried_total`. Each supervisor counts the crashes
//! themselves in its own metrics, served on its own endpoint, not here:
//! `jobworker_supervisor_workers_alive`,
//! `jobworker_supervisor_respawns_total`,
//! `jobworker_supervisor_worker_crashes_total`.
//!
//! # Backends
//!
//! What a backend does not keep is left out, never written as zero: a state
//! it does not keep (ZooKeeper's `waiting` and `cancelled`), settings,
//! statistics and failure groups where its capability answers with an
//! [`is_unsupported`](crate::Error::is_unsupported) error (ZooKeeper's).
//! Any other error (the board unreachable) fails the whole render.

mod buckets;
mod encode;
mod snapshot;

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

use crate::board::AnyBoard;
use crate::error::{Error, Result};
use snapshot::Snapshot;

/// The content type of what [`render`] writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The board's metrics in the Prometheus text format (OpenMetrics), read now.
///
/// ```
/// # use jobworker::embedded::{RedisServer, ServerOptions};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> jobworker::Result<()> {
/// # let server = RedisServer::start(ServerOptions::default())?;
/// use jobworker::redis::RedisBoard;
/// use jobworker::{AnyBoard, Board, NewJob};
///
/// let board = RedisBoard::connect(&server.url()).await?;
/// board.post("emails", NewJob::new("welcome")).await?;
/// let text = jobworker::metrics::render(&AnyBoard::from(board), &["emails".to_owned()]).await?;
/// assert!(text.contains(r#"jobworker_jobs{queue="emails",state="ready"} 1"#), "{text}");
/// # Ok(())
/// # }
/// ```
///
/// `queues` are the queues to report (each gets its samples, zeros
/// included, whether or not it holds jobs). Fails only when the board
/// fails a read it supports (see the module docs).
pub async fn render(board: &AnyBoard, queues: &[String]) -> Result<String> {
    let snapshot = Snapshot::read(board, queues).await?;
    let mut registry = Registry::default();
    registry.register_collector(Box::new(snapshot));
    let mut text = String::new();
    encode(&mut text, &registry).map_err(|_| Error::codec("cannot write the board's metrics"))?;
    Ok(text)
}
