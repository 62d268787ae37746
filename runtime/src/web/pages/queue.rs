//! `GET /queues` and `GET /queues/<queue>?state=&offset=&name=&tag=`: a
//! queue's jobs in one state, one page at a time (each page is one ranged
//! read of the state's index: O(log n + page) on Redis), filtered by job
//! name or tag; pause, resume and the limit; its recurring templates.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};
use serde::Deserialize;

use crate::board::{Admin, Board, Inspect, QueueOverview, STATES};
use crate::error::Result;
use crate::job::{JobId, JobInfo, JobState, ListFilter, Page};
use crate::web::layout::{action, respond, unsupported, Nav, Shell};
use crate::web::pages::PAGE;
use crate::web::state::AppState;
use crate::web::{fmt, queues};

/// Entries a name filter looks at per page, at most (it reads the listing
/// in order and keeps the matches: the cost stays bounded on a big queue).
pub(crate) const SCAN: usize = 2000;

/// The queue page's query.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct QueueQuery {
    state: Option<String>,
    #[serde(default)]
    offset: usize,
    name: Option<String>,
    tag: Option<String>,
    msg: Option<String>,
}

impl QueueQuery {
    /// The ready jobs from `offset` (the benchmark's pages).
    pub(crate) fn at(offset: usize) -> QueueQuery {
        QueueQuery {
            offset,
            ..QueueQuery::default()
        }
    }
}

/// `GET /queues`: to the dashboard, which lists them all.
pub(crate) async fn index() -> Response {
    Redirect::to("/").into_response()
}

/// `GET /queues/<queue>`.
pub(crate) async fn get(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(queue): Path<String>,
    Query(q): Query<QueueQuery>,
) -> Response {
    let title = format!("Queue {queue}");
    let live = format!("/live?queue={}", fmt::query(&queue));
    let shell = Shell {
        title: &title,
        nav: Nav::Queues,
        live: Some(live),
        message: q.msg.as_deref(),
    };
    respond(&state, &headers, shell, render(&state, &queue, &q).await).await
}

/// The queue page's body.
pub(crate) async fn render(state: &AppState, queue: &str, q: &QueueQuery) -> Result<Markup> {
    let st = match q.state.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => JobState::parse(s)?,
        None => JobState::Ready,
    };
    let overview = state.board.overview(&[queue.to_owned()]).await?.remove(0);
    let name = q.name.as_deref().filter(|s| !s.is_empty());
    let tag = q.tag.as_deref().filter(|s| !s.is_empty());
    let (jobs, next) = match (tag, name) {
        (Some(tag), _) => tagged(state, queue, tag, q.offset).await?,
        (None, Some(name)) => by_name(state, queue, st, name, q.offset).await?,
        (None, None) => {
            let jobs = state
                .board
                .list(
                    queue,
                    ListFilter::State(st),
                    Page {
                        offset: q.offset,
                        limit: PAGE,
                    },
                )
                .await?;
            let next = (jobs.len() == PAGE).then_some(q.offset + PAGE);
            (jobs, next)
        }
    };
    let recurring = state.board.recurring(queue).await;
    let known = queues::known(state).await.unwrap_or_default();
    Ok(html! {
        h1 { "Queue " (queue) @if !known.iter().any(|k| k == queue) { " " span.na { "(not on the board yet)" } } }
        (tabs(&overview, st))
        (settings(state, &overview))
        (filters(queue, st, name, tag))
        @if let (None, Some(name)) = (tag, name) {
            p.na { "Jobs named " code { (name) } " among entries " (q.offset + 1) "–" (next.unwrap_or(q.offset + SCAN)) " of the " (st.as_str()) " listing (a name filter reads at most " (SCAN) " entries per page)." }
        }
        (jobs_table(state, queue, &jobs, QUEUE_OPS))
        (pager(queue, st, name, tag, q.offset, next))
        h2 { "Recurring templates" }
        @match recurring {
            Ok(list) if list.is_empty() => p.na { "None." },
            Ok(list) => table { thead { tr { th { "id" } th { "job name" } th { "rule" } th { "next" } th.n { "runs" } th.n { "priority" } th { "tags" } } }
                tbody { @for r in &list { tr { td { (r.id) } td { (r.name) } td { code { (r.rule) } } td { (fmt::time(r.next_ms)) } td.n { (r.runs) } td.n { (r.priority) } td { (r.tags.join(", ")) } } } } },
            Err(e) => (unsupported(&e)),
        }
    })
}

fn tabs(o: &QueueOverview, current: JobState) -> Markup {
    let base = fmt::queue_url(&o.queue);
    html! {
        nav.tabs data-live-part="tabs" {
            @for s in STATES {
                a href={(base) "?state=" (s.as_str())} class=[(s == current).then_some("on")] {
                    (s.as_str()) " (" (fmt::count(o.counts.get(s))) ")"
                }
                " · "
            }
        }
    }
}

fn settings(state: &AppState, o: &QueueOverview) -> Markup {
    let q = o.queue.as_str();
    let Some(s) = o.settings else {
        return html! { p.na { "Pause and limits are not available on this board." } };
    };
    html! {
        div.bar data-live-part="settings" {
            @if s.paused { span.paused #queue-state { "paused" } } @else { span #queue-state { "running" } }
            " · limit: " (s.limit.map(|l| l.to_string()).unwrap_or_else(|| "none".into())) " "
            @if s.paused {
                (action(state, "/act/queue", &[("queue", q), ("op", "resume")], "resume", "primary"))
            } @else {
                (action(state, "/act/queue", &[("queue", q), ("op", "pause")], "pause", "danger"))
            }
            @if state.auth.enabled() {
                form.inline method="post" action="/act/queue" {
                    input type="hidden" name="csrf" value=(state.auth.csrf);
                    input type="hidden" name="queue" value=(q);
                    input type="hidden" name="op" value="limit";
                    input type="number" name="value" min="0" placeholder="0 = none" size="6";
                    button { "set limit" }
                }
            }
        }
    }
}

fn filters(queue: &str, st: JobState, name: Option<&str>, tag: Option<&str>) -> Markup {
    html! {
        form.bar method="get" action=(fmt::queue_url(queue)) {
            input type="hidden" name="state" value=(st.as_str());
            label { "job name " input type="text" name="name" value=(name.unwrap_or("")); }
            label { "tag " input type="text" name="tag" value=(tag.unwrap_or("")); }
            button { "filter" }
            @if name.is_some() || tag.is_some() { a href={(fmt::queue_url(queue)) "?state=" (st.as_str())} { "clear" } }
        }
    }
}

/// What a selection of a queue's jobs can be given: (op, label, class).
pub(crate) const QUEUE_OPS: &[(&str, &str, &str)] = &[
    ("retry", "retry", ""),
    ("cancel", "cancel", "danger"),
    ("trash", "trash", "danger"),
];

/// The jobs of a page, with a selection for the bulk actions `ops`.
pub(crate) fn jobs_table(
    state: &AppState,
    queue: &str,
    jobs: &[JobInfo],
    ops: &[(&str, &str, &str)],
) -> Markup {
    let enabled = state.auth.enabled();
    html! {
        form method="post" action="/act/jobs" {
            @if enabled {
                input type="hidden" name="csrf" value=(state.auth.csrf);
                input type="hidden" name="queue" value=(queue);
                div.bar {
                    "selected: "
                    @for (op, label, class) in ops {
                        button name="op" value=(op) class=(class) { (label) }
                    }
                }
            }
            table.jobs {
                thead { tr {
                    @if enabled { th { input type="checkbox" data-select-all title="select all on this page"; } }
                    th { "job" } th { "name" } th { "state" } th.n { "priority" } th.n { "attempts" } th { "tags" } th { "owner / when / reason" }
                } }
                tbody {
                    @for j in jobs {
                        tr {
                            @if enabled { td { input type="checkbox" name="ids" value=(j.id); } }
                            td { a href=(fmt::job_url(queue, &j.id)) { code { (j.id) } } }
                            td { (j.name) }
                            td { span class={"state " (j.state.as_str())} { (j.state.as_str()) } }
                            td.n { (j.priority) }
                            td.n { (j.attempts) "/" (j.max_attempts) }
                            td { (j.tags.join(", ")) }
                            td {
                                @if let Some(o) = &j.owner { code { (o) } " " }
                                @if let Some(t) = j.run_at_ms { "runs at " (fmt::time(t)) " " }
                                @if let Some(r) = &j.reason { span.error { (r) } }
                            }
                        }
                    }
                    @if jobs.is_empty() { tr { td colspan="8" { "No jobs here." } } }
                }
            }
        }
    }
}

fn pager(
    queue: &str,
    st: JobState,
    name: Option<&str>,
    tag: Option<&str>,
    offset: usize,
    next: Option<usize>,
) -> Markup {
    let link = |off: usize| {
        let mut u = format!("{}?state={}&offset={off}", fmt::queue_url(queue), st.as_str());
        if let Some(n) = name {
            u += &format!("&name={}", fmt::query(n));
        }
        if let Some(t) = tag {
            u += &format!("&tag={}", fmt::query(t));
        }
        u
    };
    html! {
        div.pager {
            @if offset > 0 { a href=(link(offset.saturating_sub(PAGE))) { "← previous" } }
            span.na { "from entry " (offset + 1) }
            @if let Some(n) = next { a #next-page href=(link(n)) { "next →" } }
        }
    }
}

/// A page of the jobs carrying `tag` (any state).
async fn tagged(
    state: &AppState,
    queue: &str,
    tag: &str,
    offset: usize,
) -> Result<(Vec<JobInfo>, Option<usize>)> {
    let ids = state
        .board
        .tagged(queue, tag, Page { offset, limit: PAGE })
        .await?;
    let next = (ids.len() == PAGE).then_some(offset + PAGE);
    Ok((shown(state, queue, &ids).await, next))
}

/// Up to a page of jobs named `name`, reading at most [`SCAN`] entries of
/// the listing from `offset`; the next offset is where reading stopped.
async fn by_name(
    state: &AppState,
    queue: &str,
    st: JobState,
    name: &str,
    offset: usize,
) -> Result<(Vec<JobInfo>, Option<usize>)> {
    const CHUNK: usize = 200;
    let mut found = Vec::new();
    let mut at = offset;
    while at < offset + SCAN && found.len() < PAGE {
        let chunk = state
            .board
            .list(
                queue,
                ListFilter::State(st),
                Page {
                    offset: at,
                    limit: CHUNK,
                },
            )
            .await?;
        let len = chunk.len();
        for (i, j) in chunk.into_iter().enumerate() {
            if j.name == name {
                found.push(j);
                if found.len() == PAGE {
                    return Ok((found, Some(at + i + 1)));
                }
            }
        }
        at += len;
        if len < CHUNK {
            return Ok((found, None));
        }
    }
    Ok((found, Some(at)))
}

/// The jobs of `ids` (those still on the board).
pub(crate) async fn shown(state: &AppState, queue: &str, ids: &[JobId]) -> Vec<JobInfo> {
    let all = futures_util::future::join_all(ids.iter().map(|id| state.board.show(queue, id))).await;
    all.into_iter().filter_map(|r| r.ok()).collect()
}
