//! `GET /live?queue=Q&job=ID`: the board's events as server-sent events,
//! for the pages' live updates (a page works without them). The response
//! is a stream even while the board is down: a subscription that cannot
//! be opened, or is lost with its connection, is tried again
//! (`board::follow`), and `status` events say so (`reconnecting…`, then
//! `live`). An error page would make a browser give up the stream for
//! good. Each stream ends when the app shuts down.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Deserialize;

use crate::board::{follow, Followed};
use crate::web::state::AppState;

/// Which events a page follows.
#[derive(Debug, Deserialize)]
pub(crate) struct LiveQuery {
    queue: Option<String>,
    job: Option<String>,
}

/// `GET /live`.
pub(crate) async fn get(State(state): State<AppState>, Query(q): Query<LiveQuery>) -> Response {
    let mut stop = state.stop.clone();
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    let wanted = move |e: &serde_json::Value| {
        let field = |k: &str| e.get(k).and_then(|v| v.as_str());
        q.queue.as_deref().is_none_or(|want| field("queue") == Some(want))
            && q.job.as_deref().is_none_or(|want| field("job") == Some(want))
    };
    let status = |word: &str| Some(Event::default().event("status").data(word));
    let stream = follow(state.board.clone(), false)
        .filter_map(move |f| {
            std::future::ready(match f {
                Followed::Event(e) => wanted(&e).then(|| Event::default().data(e.to_string())),
                Followed::Open => status("live"),
                Followed::Failed(e) => {
                    tracing::debug!(error = %e, "cannot subscribe to the board's events; trying again");
                    status("reconnecting…")
                }
                Followed::Closed => status("reconnecting…"),
            })
        })
        .map(Ok::<_, Infallible>)
        .take_until(Box::pin(stopped));
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}
