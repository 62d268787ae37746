//! `GET /login`: the sign-in form (when started with `--auth`).

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use maud::html;

use crate::web::layout::{respond, Nav, Shell};
use crate::web::pages::Message;
use crate::web::state::AppState;

/// `GET /login`.
pub(crate) async fn get(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(m): Query<Message>,
) -> Response {
    let body = if state.auth.has_password() {
        html! {
            h1 { "Sign in" }
            form #login method="post" action="/login" {
                input type="hidden" name="csrf" value=(state.auth.csrf);
                p { label { "user " input type="text" name="user" autocomplete="username"; } }
                p { label { "password " input type="password" name="password" autocomplete="current-password"; } }
                button.primary { "sign in" }
            }
        }
    } else {
        html! { h1 { "Sign in" } p { "This app was not started with --auth: there is nothing to sign in to." } }
    };
    let shell = Shell {
        title: "Sign in",
        nav: Nav::None,
        live: None,
        message: m.msg.as_deref(),
    };
    respond(&state, &headers, shell, Ok(body)).await
}
