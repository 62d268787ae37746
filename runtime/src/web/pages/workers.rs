//! `GET /workers`: each live worker process (host, pid, slot, queues,
//! concurrency, started, last beat) and the jobs it runs, with how long they have run.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use maud::{html, Markup};

use crate::board::{Admin, Board, Presence};
use crate::error::Result;
use crate::job::JobId;
use crate::web::fmt;
use crate::web::layout::{respond, Nav, Shell};
use crate::web::pages::Message;
use crate::web::state::AppState;

/// `GET /workers`.
pub(crate) async fn get(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(m): Query<Message>,
) -> Response {
    let shell = Shell {
        title: "Workers",
        nav: Nav::Workers,
        live: Some("/live".into()),
        message: m.msg.as_deref(),
    };
    respond(&state, &headers, shell, render(&state).await).await
}

async fn render(state: &AppState) -> Result<Markup> {
    let workers = state.board.live_workers().await?;
    let now = state.board.server_ms().await?;
    let mut rows = Vec::new();
    for w in &workers {
        let mut jobs = Vec::new();
        for id in &w.jobs {
            jobs.push(running(state, &w.queues, id, now).await);
        }
        rows.push((w, jobs));
    }
    Ok(html! {
        h1 { "Workers" }
        table #workers data-live-part="workers" {
            thead { tr { th { "owner" } th { "host" } th.n { "pid" } th.n { "slot" } th { "queues" } th.n { "concurrency" } th { "started" } th { "last beat" } th { "running jobs" } } }
            tbody {
                @for (w, jobs) in &rows {
                    tr {
                        td { code { (w.owner) } }
                        td { (w.host) }
                        td.n { (w.pid) }
                        td.n { (w.slot) }
                        td { (w.queues.join(", ")) }
                        td.n { (w.concurrency) }
                        td { (fmt::time(w.started_ms as i64)) }
                        td { (fmt::age(now - w.beat_ms as i64)) " ago" }
                        td { @for j in jobs { (j) br; } @if jobs.is_empty() { span.na { "idle" } } }
                    }
                }
                @if rows.is_empty() { tr { td colspan="9" { "No live workers." } } }
            }
        }
    })
}

/// A running job: its link, name and how long since its claim.
async fn running(state: &AppState, queues: &[String], id: &str, now: i64) -> Markup {
    let id = JobId::from(id);
    for q in queues {
        if let Ok(j) = state.board.show(q, &id).await {
            let since = j
                .last_modified
                .as_deref()
                .and_then(|t| chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f").ok())
                .map(|t| fmt::age(now - t.and_utc().timestamp_millis()));
            return html! {
                a href=(fmt::job_url(q, id.as_str())) { code { (id.as_str()) } } " " (j.name)
                @if let Some(s) = since { " · running " (s) }
            };
        }
    }
    html! { code { (id.as_str()) } }
}
