//! `GET /queues/<queue>/jobs/<id>`: everything about one job (arguments,
//! taskflow details and book, state, attempts and their errors, history,
//! tags, dependencies both ways, owner, lease, fencing token) and what an
//! operator can do to it.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use maud::{html, Markup};

use crate::board::{Admin, Board, Dependencies, Inspect};
use crate::error::Result;
use crate::job::{JobId, JobInfo, JobState};
use crate::web::layout::{action, respond, unsupported, Nav, Shell};
use crate::web::pages::Message;
use crate::web::state::AppState;
use crate::web::{fmt, json_html};

/// `GET /queues/<queue>/jobs/<id>`.
pub(crate) async fn get(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((queue, id)): Path<(String, String)>,
    Query(m): Query<Message>,
) -> Response {
    let title = format!("Job {id}");
    let live = format!("/live?queue={}&job={}", fmt::query(&queue), fmt::query(&id));
    let shell = Shell {
        title: &title,
        nav: Nav::Queues,
        live: Some(live),
        message: m.msg.as_deref(),
    };
    let body = render(&state, &queue, &JobId::from(id.as_str())).await;
    respond(&state, &headers, shell, body).await
}

async fn render(state: &AppState, queue: &str, id: &JobId) -> Result<Markup> {
    let info = state.board.show(queue, id).await?;
    let (history, deps, now) = tokio::join!(
        state.board.history(queue, id),
        state.board.dependencies(queue, id),
        state.board.server_ms(),
    );
    let now = now?;
    Ok(html! {
        h1 { "Job " code { (info.id) } " " span class={"state " (info.state.as_str())} data-live-part="state" #job-state { (info.state.as_str()) } }
        p { "in queue " a href=(fmt::queue_url(queue)) { (queue) } " · " (info.name) }
        (actions(state, &info))
        div.grid {
            div.card data-live-part="facts" { h2 { "Facts" } (facts(&info, now)) }
            div.card { h2 { "Dependencies" } (match &deps { Ok(d) => dependencies(d), Err(e) => unsupported(e) }) }
        }
        h2 { "Arguments" }
        div #job-args { (json_html::render(&info.args)) }
        h2 { "taskflow details" }
        (json_html::render(&info.details))
        @if let Some(b) = &info.book { p { "logbook " code { (b.name) } " (" code { (b.uuid) } ")" } }
        div data-live-part="history" {
            h2 { "Attempts" }
            (attempts(&info, history.as_deref().unwrap_or(&[])))
            h2 { "History" }
            @match &history { Ok(h) => (timeline(h)), Err(e) => (unsupported(e)) }
        }
        h2 { "Live events" }
        ul #live-events {}
    })
}

fn facts(j: &JobInfo, now: i64) -> Markup {
    html! {
        dl.facts {
            dt { "state" } dd { (j.state.as_str()) }
            dt { "priority" } dd #job-priority { (j.priority) }
            dt { "attempts" } dd { (j.attempts) " of " (j.max_attempts) }
            dt { "owner" } dd { @if let Some(o) = &j.owner { code { (o) } } @else { "—" } }
            dt { "lease expires in" } dd { (j.expires_in_ms.map(fmt::age).unwrap_or_else(|| "—".into())) }
            dt { "fencing token" } dd { (j.token) }
            dt { "runs at" } dd { (j.run_at_ms.map(|t| format!("{} (in {})", fmt::time(t), fmt::age(t - now))).unwrap_or_else(|| "—".into())) }
            dt { "created" } dd { (j.created_on.as_deref().unwrap_or("—")) }
            dt { "last modified" } dd { (j.last_modified.as_deref().unwrap_or("—")) }
            dt { "sequence" } dd { (j.sequence.map(|s| s.to_string()).unwrap_or_else(|| "—".into())) }
            dt { "tags" } dd #job-tags { @if j.tags.is_empty() { "—" } @else { (j.tags.join(", ")) } }
            @if let Some(g) = &j.group { dt { "failure group" } dd { (g) } }
            @if let Some(r) = &j.reason { dt { "reason" } dd { pre.trace { (r) } } }
        }
    }
}

fn dependencies(d: &Dependencies) -> Markup {
    let list = |refs: &[(String, JobId)]| {
        html! {
            @if refs.is_empty() { span.na { "none" } }
            ul { @for (q, id) in refs { li { a href=(fmt::job_url(q, id.as_str())) { (q) " / " code { (id.as_str()) } } } } }
        }
    };
    html! {
        p { "waits for:" } (list(&d.depends_on))
        p { "needed by:" } (list(&d.dependents))
    }
}

/// Each failed try with its error (the history keeps the last 100 events;
/// the latest reason is also on the job).
fn attempts(j: &JobInfo, history: &[serde_json::Value]) -> Markup {
    let failures: Vec<&serde_json::Value> = history
        .iter()
        .filter(|e| {
            matches!(
                e.get("event").and_then(|v| v.as_str()),
                Some("failed" | "trashed" | "stalled" | "lease_lost")
            )
        })
        .collect();
    html! {
        @if failures.is_empty() && j.reason.is_none() { p.na { "No failed attempt." } }
        ol {
            @for e in &failures {
                li {
                    strong { (e.get("event").and_then(|v| v.as_str()).unwrap_or("")) }
                    @if let Some(n) = e.get("attempt") { " attempt " (n.to_string()) }
                    " at " (e.get("at").and_then(|v| v.as_i64()).map(fmt::time).unwrap_or_default())
                    @if let Some(r) = e.get("reason").and_then(|v| v.as_str()) { pre.trace { (r) } }
                }
            }
        }
    }
}

fn timeline(history: &[serde_json::Value]) -> Markup {
    html! {
        ol.timeline #job-history {
            @for e in history {
                li {
                    span.when { (e.get("at").and_then(|v| v.as_i64()).map(fmt::time).unwrap_or_default()) }
                    strong { (e.get("event").and_then(|v| v.as_str()).unwrap_or("?")) }
                    @for (k, v) in e.as_object().into_iter().flatten() {
                        @if !matches!(k.as_str(), "event" | "at" | "queue" | "job" | "reason") { " " span.na { (k) "=" } (v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string())) }
                    }
                }
            }
        }
    }
}

fn actions(state: &AppState, j: &JobInfo) -> Markup {
    if !state.auth.enabled() {
        return html! {};
    }
    let base = [("queue", j.queue.as_str()), ("id", j.id.as_str())];
    let with = |op: &'static str| {
        let mut f = base.to_vec();
        f.push(("op", op));
        f
    };
    let live = !matches!(
        j.state,
        JobState::Completed | JobState::Trashed | JobState::Cancelled | JobState::Quarantined
    );
    let field_form = |op: &str, input: Markup, label: &str| {
        html! {
            form.inline method="post" action="/act/job" {
                input type="hidden" name="csrf" value=(state.auth.csrf);
                input type="hidden" name="queue" value=(j.queue);
                input type="hidden" name="id" value=(j.id);
                input type="hidden" name="op" value=(op);
                (input)
                button { (label) }
            }
        }
    };
    html! {
        div.bar #job-actions {
            @if j.state == JobState::Trashed {
                (action(state, "/act/job", &with("retry"), "retry", "primary"))
                (action(state, "/act/job", &with("purge"), "purge", "danger"))
            }
            @if live { (action(state, "/act/job", &with("cancel"), "cancel", "danger")) }
            @if matches!(j.state, JobState::Ready | JobState::Scheduled) { (action(state, "/act/job", &with("trash"), "trash", "danger")) }
            (action(state, "/act/job", &with("track"), "track", ""))
            (action(state, "/act/job", &with("untrack"), "untrack", ""))
            @if live { (field_form("priority", html! { input type="number" name="value" value=(j.priority) size="5"; }, "set priority")) }
            (field_form("tag", html! { input type="text" name="value" placeholder="tag" size="10"; }, "add tag"))
            (field_form("untag", html! { input type="text" name="value" placeholder="tag" size="10"; }, "remove tag"))
        }
    }
}
