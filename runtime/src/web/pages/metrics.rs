//! `GET /metrics`: the board's Prometheus metrics (`crate::metrics`), read
//! at each scrape. Needs no credentials (it only reads) and is served alone
//! with `--metrics-only`.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::web::layout::error_page;
use crate::web::queues;
use crate::web::state::AppState;

/// `GET /metrics`.
pub(crate) async fn get(State(state): State<AppState>) -> Response {
    let rendered = match queues::known(&state).await {
        Ok(q) => crate::metrics::render(&state.board, &q).await,
        Err(e) => Err(e),
    };
    match rendered {
        Ok(text) => ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response(),
        Err(e) => error_page(StatusCode::BAD_GATEWAY, &e.to_string()),
    }
}
