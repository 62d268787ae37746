//! `GET /failed?queue=&group=&offset=`: trashed jobs by failure group in
//! every queue; one group's jobs a page at a time; retry or purge one job,
//! the selection, a group, or everything matching a filter (the whole
//! filter, not only the page shown).

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use futures_util::future::join_all;
use maud::{html, Markup};
use serde::Deserialize;

use crate::board::{Admin, FailureGroup};
use crate::error::Result;
use crate::job::Page;
use crate::web::layout::{action, respond, unsupported, Nav, Shell};
use crate::web::pages::queue::{jobs_table, shown};
use crate::web::pages::PAGE;
use crate::web::state::AppState;
use crate::web::{fmt, queues};

/// The failed page's query.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FailedQuery {
    queue: Option<String>,
    group: Option<String>,
    #[serde(default)]
    offset: usize,
    msg: Option<String>,
}

/// `GET /failed`.
pub(crate) async fn get(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<FailedQuery>,
) -> Response {
    let shell = Shell {
        title: "Failed",
        nav: Nav::Failed,
        live: Some("/live".into()),
        message: q.msg.as_deref(),
    };
    respond(&state, &headers, shell, render(&state, &q).await).await
}

async fn render(state: &AppState, q: &FailedQuery) -> Result<Markup> {
    let queues = queues::known(state).await?;
    let all = join_all(queues.iter().map(|queue| state.board.failed(queue))).await;
    let mut groups: Vec<FailureGroup> = Vec::new();
    for g in all {
        match g {
            Ok(g) => groups.extend(g),
            Err(e) if e.is_unsupported() => return Ok(html! { h1 { "Failed" } (unsupported(&e)) }),
            Err(e) => return Err(e),
        }
    }
    let queue = q.queue.as_deref().filter(|s| !s.is_empty());
    let group = q.group.as_deref().filter(|s| !s.is_empty());
    Ok(html! {
        h1 { "Failed" }
        (filter_form(state, &queues, queue, group))
        table #failure-groups data-live-part="groups" {
            thead { tr { th { "queue" } th { "group" } th.n { "jobs" } th { "" } } }
            tbody {
                @for g in &groups {
                    tr {
                        td { a href=(fmt::queue_url(&g.queue)) { (g.queue) } }
                        td { a href={"/failed?queue=" (fmt::query(&g.queue)) "&group=" (fmt::query(&g.group))} { (g.group) } }
                        td.n { (g.count) }
                        td {
                            (action(state, "/act/failed", &[("queue", &g.queue), ("group", &g.group), ("op", "retry")], "retry group", "primary"))
                            (action(state, "/act/failed", &[("queue", &g.queue), ("group", &g.group), ("op", "purge")], "purge group", "danger"))
                        }
                    }
                }
                @if groups.is_empty() { tr { td colspan="4" { "No failed jobs." } } }
            }
        }
        @if let (Some(queue), Some(group)) = (queue, group) { (group_jobs(state, queue, group, q.offset).await?) }
    })
}

/// "Retry / purge everything matching": a queue (or all) and a group (or
/// all).
fn filter_form(state: &AppState, queues: &[String], queue: Option<&str>, group: Option<&str>) -> Markup {
    html! {
        form.bar #failed-filter method="post" action="/act/failed" {
            @if state.auth.enabled() { input type="hidden" name="csrf" value=(state.auth.csrf); }
            label { "queue " select name="queue" {
                option value="" { "every queue" }
                @for q in queues { option value=(q) selected[Some(q.as_str()) == queue] { (q) } }
            } }
            label { "group " input type="text" name="group" value=(group.unwrap_or("")) placeholder="every group"; }
            @if state.auth.enabled() {
                button name="op" value="retry" class="primary" { "retry everything matching" }
                button name="op" value="purge" class="danger" { "purge everything matching" }
            }
        }
    }
}

async fn group_jobs(state: &AppState, queue: &str, group: &str, offset: usize) -> Result<Markup> {
    let ids = state
        .board
        .failed_jobs(queue, group, Page { offset, limit: PAGE })
        .await?;
    let jobs = shown(state, queue, &ids).await;
    let base = format!("/failed?queue={}&group={}", fmt::query(queue), fmt::query(group));
    Ok(html! {
        h2 { "Group " code { (group) } " of queue " (queue) }
        (jobs_table(state, queue, &jobs, &[("retry", "retry", "primary"), ("purge", "purge", "danger")]))
        div.pager {
            @if offset > 0 { a href={(base) "&offset=" (offset.saturating_sub(PAGE))} { "← previous" } }
            span.na { "from entry " (offset + 1) }
            @if ids.len() == PAGE { a #next-page href={(base) "&offset=" (offset + PAGE)} { "next →" } }
        }
    })
}
