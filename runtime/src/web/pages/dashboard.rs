//! `GET /`: every queue × state, throughput and the day's wait and run
//! times, live workers, the oldest ready job of each queue.

use std::collections::BTreeMap;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use futures_util::future::join_all;
use maud::{html, Markup};

use crate::board::{Admin, Inspect, Minute, Presence, QueueOverview, STATES};
use crate::error::Result;
use crate::stats::Timing;
use crate::web::layout::{respond, unsupported, Nav, Shell};
use crate::web::pages::Message;
use crate::web::state::AppState;
use crate::web::{charts, fmt, queues};

/// Minutes of throughput on the dashboard.
const MINUTES: usize = 60;

/// `GET /`.
pub(crate) async fn get(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(m): Query<Message>,
) -> Response {
    let shell = Shell {
        title: "Dashboard",
        nav: Nav::Dashboard,
        live: Some("/live".into()),
        message: m.msg.as_deref(),
    };
    respond(&state, &headers, shell, render(&state).await).await
}

/// The dashboard's body (also what the benchmark times).
pub(crate) async fn render(state: &AppState) -> Result<Markup> {
    let queues = queues::known(state).await?;
    let board = &state.board;
    let (overview, workers, now, minutes, timings) = tokio::join!(
        board.overview(&queues),
        board.live_workers(),
        board.server_ms(),
        throughput(state, &queues),
        timings(state, &queues),
    );
    let (overview, workers, now) = (overview?, workers?, now?);
    Ok(html! {
        h1 { "Dashboard" }
        div data-live-part="dashboard" {
            p { strong { (workers.len()) } " workers alive · " (queues.len()) " queues · server time " (fmt::time(now)) " UTC" }
            (counts_table(&overview, now))
            div.grid {
                div.card { h2 { "Throughput" } (match minutes { Ok(m) => charts::throughput(&m), Err(e) => unsupported(&e) }) }
                @match timings {
                    Ok((wait, run)) => {
                        div.card { h2 { "Wait (ready → claimed)" } (charts::timing("wait", &wait)) }
                        div.card { h2 { "Run (claimed → consumed)" } (charts::timing("run", &run)) }
                    }
                    Err(e) => div.card { h2 { "Wait and run times" } (unsupported(&e)) },
                }
            }
        }
    })
}

fn counts_table(overview: &[QueueOverview], now: i64) -> Markup {
    html! {
        table.counts {
            thead { tr {
                th { "queue" }
                @for s in STATES { th.n { (s.as_str()) } }
                th.n { "oldest ready" }
            } }
            tbody {
                @for o in overview {
                    tr {
                        td {
                            a href=(fmt::queue_url(&o.queue)) { (o.queue) }
                            @if o.settings.is_some_and(|s| s.paused) { " " span.paused { "paused" } }
                        }
                        @for s in STATES {
                            td.n { a href={(fmt::queue_url(&o.queue)) "?state=" (s.as_str())} { (fmt::count(o.counts.get(s))) } }
                        }
                        td.n { (o.oldest_ready_ms.map(|t| fmt::age(now - t)).unwrap_or_else(|| "—".into())) }
                    }
                }
                @if overview.is_empty() { tr { td colspan="10" { "No queues yet: post a job (jobworker post QUEUE NAME)." } } }
            }
        }
    }
}

/// Every queue's throughput, added up per minute.
async fn throughput(state: &AppState, queues: &[String]) -> Result<Vec<Minute>> {
    let all = join_all(queues.iter().map(|q| state.board.throughput(q, MINUTES))).await;
    let mut sum: Vec<Minute> = Vec::new();
    for per_queue in all {
        let per_queue = per_queue?;
        if sum.is_empty() {
            sum = per_queue;
            continue;
        }
        for (total, m) in sum.iter_mut().zip(per_queue) {
            total.completed += m.completed;
            total.failed += m.failed;
        }
    }
    if sum.is_empty() {
        let now = state.board.server_ms().await? / 60_000;
        sum = (now - MINUTES as i64 + 1..=now)
            .map(|m| Minute {
                at_ms: m * 60_000,
                completed: 0,
                failed: 0,
            })
            .collect();
    }
    Ok(sum)
}

/// Today's wait and run times of every queue together.
async fn timings(state: &AppState, queues: &[String]) -> Result<(Timing, Timing)> {
    let all = join_all(queues.iter().map(|q| state.board.stats(q, None))).await;
    let (mut wait, mut run) = (Vec::new(), Vec::new());
    for s in all {
        let s = s?;
        wait.push(s.wait);
        run.push(s.run);
    }
    Ok((merge(&wait), merge(&run)))
}

/// Several queues' timings as one (counts and buckets added, means
/// weighted).
fn merge(parts: &[Timing]) -> Timing {
    let count: u64 = parts.iter().map(|t| t.count).sum();
    let mean_ms = if count == 0 {
        0.0
    } else {
        parts.iter().map(|t| t.mean_ms * t.count as f64).sum::<f64>() / count as f64
    };
    let mut buckets: BTreeMap<String, u64> = BTreeMap::new();
    for t in parts {
        for (b, n) in &t.histogram {
            *buckets.entry(b.clone()).or_default() += n;
        }
    }
    Timing {
        count,
        mean_ms,
        std_dev_ms: 0.0,
        histogram: buckets.into_iter().collect(),
    }
}
