//! The page shell (navigation, the board, who is signed in, messages) and
//! the small pieces every page uses: action forms and errors.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

use crate::error::{Error, Result};
use crate::web::auth::Proof;
use crate::web::state::AppState;

/// The sections of the navigation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nav {
    Dashboard,
    Queues,
    Failed,
    Workers,
    Quarantine,
    None,
}

/// What a page says besides its body.
pub(crate) struct Shell<'a> {
    pub title: &'a str,
    pub nav: Nav,
    /// The live-update stream this page follows (`/live?…`).
    pub live: Option<String>,
    /// A message after an action (`?msg=`).
    pub message: Option<&'a str>,
}

/// A page's response: `body` in the shell (which says who is signed in),
/// or the page of the board's error.
pub(crate) async fn respond(
    state: &AppState,
    headers: &HeaderMap,
    shell: Shell<'_>,
    body: Result<Markup>,
) -> Response {
    match body {
        Ok(body) => page(state, shell, state.auth.proof(headers).await, body),
        Err(e) => board_error(&e),
    }
}

/// A whole page.
fn page(state: &AppState, shell: Shell<'_>, proof: Proof, body: Markup) -> Response {
    let link = |nav: Nav, href: &str, label: &str| {
        html! { a href=(href) class=[(shell.nav == nav).then_some("on")] { (label) } }
    };
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (shell.title) " · jobworker" }
                link rel="stylesheet" href="/static/app.css";
                script src="/static/app.js" defer {}
            }
            body data-live=[shell.live.as_deref()] {
                header {
                    strong.brand { a href="/" { "jobworker" } }
                    nav {
                        (link(Nav::Dashboard, "/", "Dashboard"))
                        (link(Nav::Queues, "/queues", "Queues"))
                        (link(Nav::Failed, "/failed", "Failed"))
                        (link(Nav::Workers, "/workers", "Workers"))
                        (link(Nav::Quarantine, "/quarantine", "Quarantine"))
                        a href="/metrics" { "Metrics" }
                    }
                    @if shell.live.is_some() { span #live-status.na title="live updates" {} }
                    span.board title="the board" { (state.options.board_label) }
                    (who(state, proof))
                }
                @if let Some(m) = shell.message {
                    p.message role="status" { (m) }
                }
                main id="live-region" { (body) }
            }
        }
    };
    Html(markup.into_string()).into_response()
}

fn who(state: &AppState, proof: Proof) -> Markup {
    if !state.auth.enabled() {
        return html! { span.mode title="start with --auth or --token-env to enable actions" { "read-only" } };
    }
    match proof {
        Proof::None if state.auth.has_password() => html! { a.mode href="/login" { "sign in" } },
        Proof::None => html! { span.mode { "actions need a bearer token" } },
        _ => html! {
            form.inline method="post" action="/logout" {
                input type="hidden" name="csrf" value=(state.auth.csrf);
                button { "sign out" }
            }
        },
    }
}

/// A one-button action form (POST with the CSRF token and the page to go
/// back to); nothing when the app is read-only.
pub(crate) fn action(
    state: &AppState,
    url: &str,
    fields: &[(&str, &str)],
    label: &str,
    class: &str,
) -> Markup {
    if !state.auth.enabled() {
        return html! {};
    }
    html! {
        form.inline method="post" action=(url) {
            input type="hidden" name="csrf" value=(state.auth.csrf);
            @for (k, v) in fields {
                input type="hidden" name=(k) value=(v);
            }
            button class=(class) { (label) }
        }
    }
}

/// An error page with the board's message (escaped).
pub(crate) fn error_page(status: StatusCode, message: &str) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { "error · jobworker" } link rel="stylesheet" href="/static/app.css"; }
            body { main { h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) } p.error { (message) } p { a href="/" { "back to the dashboard" } } } }
        }
    };
    (status, Html(markup.into_string())).into_response()
}

/// A board error as a page, with its status (`error_status`).
pub(crate) fn board_error(e: &Error) -> Response {
    error_page(error_status(e), &e.to_string())
}

/// The status of a board error: 404 for a missing job, 409 for what the
/// job's state refuses (claimed, finished, cancelled, already there), 501
/// for what the backend does not support, 400 for bad input, 502
/// otherwise.
pub(crate) fn error_status(e: &Error) -> StatusCode {
    if e.is_not_found() {
        StatusCode::NOT_FOUND
    } else if e.is_already_claimed()
        || e.is_not_owner()
        || e.is_cancelled()
        || e.is_exists()
        || e.is_finished()
    {
        StatusCode::CONFLICT
    } else if e.is_unsupported() {
        StatusCode::NOT_IMPLEMENTED
    } else if e.is_invalid() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::BAD_GATEWAY
    }
}

/// A part of a page the backend cannot show.
pub(crate) fn unsupported(e: &Error) -> Markup {
    html! { p.na { "Not available on this board: " (e.to_string()) } }
}
