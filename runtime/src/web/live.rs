//! `GET /live?queue=Q&job=ID`: the board's events as server-sent events,
//! for the pages' live updates (a page works without them). A subscription
//! lost with its connection is opened again (`board::follow`), and the
//! stream says so with `status` events (`reconnecting…`, then `live`):
//! a browser's own reconnect would give up for good on the error page
//! of a board still down. Each stream ends when the app shuts down.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Deserialize;

use crate::board::{follow, Events, Followed};
use crate::web::layout::board_error;
use crate::web::state::AppState;

/// Which events a page follows.
#[derive(Debug, Deserialize)]
pub(crate) struct LiveQuery {
    queue: Option<String>,
    job: Option<String>,
}

/// `GET /live`.
pub(crate) async fn get(State(state): State<AppState>, Query(q): Query<LiveQuery>) -> Response {
    let events = match state.board.events(false).await {
        Ok(s) => s,
        Err(e) => return board_error(&e),
    };
    let mut stop = state.stop.clone();
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    let wanted = move |e: &serde_json::Value| {
        let field = |k: &str| e.get(k).and_then(|v| v.as_str());
        q.queue.as_deref().is_none_or(|want| field("queue") == Some(want))
            && q.job.as_deref().is_none_or(|want| field("job") == Some(want))
    };
    let stream = follow(state.board.clone(), false, events)
        .filter_map(move |f| {
            std::future::ready(match f {
                Followed::Event(e) => wanted(&e).then(|| Event::default().data(e.to_string())),
                Followed::Closed => Some(Event::default().event("status").data("reconnecting…")),
                Followed::Failed(_) => None,
                Followed::Open => Some(Event::default().event("status").data("live")),
            })
        })
        .map(Ok::<_, Infallible>)
        .take_until(Box::pin(stopped));
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}
