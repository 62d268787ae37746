//! `GET /quarantine`: postings nobody could decode, per queue, with the
//! reason (a page per queue).

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use futures_util::future::join_all;
use maud::{html, Markup};

use crate::board::Board;
use crate::error::Result;
use crate::job::{JobState, ListFilter, Page};
use crate::web::layout::{respond, Nav, Shell};
use crate::web::pages::{Message, PAGE};
use crate::web::state::AppState;
use crate::web::{fmt, queues};

/// `GET /quarantine`.
pub(crate) async fn get(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(m): Query<Message>,
) -> Response {
    let shell = Shell {
        title: "Quarantine",
        nav: Nav::Quarantine,
        live: None,
        message: m.msg.as_deref(),
    };
    respond(&state, &headers, shell, render(&state).await).await
}

async fn render(state: &AppState) -> Result<Markup> {
    let queues = queues::known(state).await?;
    let page_of = |q: &String| {
        let q = q.clone();
        async move {
            let jobs = state
                .board
                .list(
                    &q,
                    ListFilter::State(JobState::Quarantined),
                    Page {
                        offset: 0,
                        limit: PAGE,
                    },
                )
                .await;
            (q, jobs)
        }
    };
    let all = join_all(queues.iter().map(page_of)).await;
    let mut rows = Vec::new();
    for (q, jobs) in all {
        for j in jobs? {
            rows.push((q.clone(), j));
        }
    }
    Ok(html! {
        h1 { "Quarantine" }
        p.na { "Postings nobody could decode were moved aside here with the reason (the first " (PAGE) " of each queue)." }
        table #quarantine {
            thead { tr { th { "queue" } th { "posting" } th { "reason" } } }
            tbody {
                @for (q, j) in &rows {
                    tr { td { a href=(fmt::queue_url(q)) { (q) } } td { code { (j.id) } } td { span.error { (j.reason.as_deref().unwrap_or("")) } } }
                }
                @if rows.is_empty() { tr { td colspan="3" { "Nothing quarantined." } } }
            }
        }
    })
}
