//! The routes, and the headers every response carries.

use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;

use crate::web::layout::error_page;
use crate::web::state::AppState;
use crate::web::{actions, assets, live, pages};

/// The strict Content-Security-Policy of every response: scripts, styles
/// and connections only from the app itself; no frames, no inline code.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The app's routes (only `/metrics` with `--metrics-only`).
pub(crate) fn router(state: AppState) -> Router {
    let metrics_only = state.options.metrics_only;
    let mut app = Router::new().route("/metrics", get(pages::metrics::get));
    if !metrics_only {
        app = app
            .route("/", get(pages::dashboard::get))
            .route("/queues", get(pages::queue::index))
            .route("/queues/{queue}", get(pages::queue::get))
            .route("/queues/{queue}/jobs/{id}", get(pages::job::get))
            .route("/failed", get(pages::failed::get))
            .route("/workers", get(pages::workers::get))
            .route("/quarantine", get(pages::quarantine::get))
            .route("/live", get(live::get))
            .route("/login", get(pages::login::get).post(actions::login))
            .route("/logout", post(actions::logout))
            .route("/act/job", post(actions::job))
            .route("/act/jobs", post(actions::jobs))
            .route("/act/queue", post(actions::queue))
            .route("/act/failed", post(actions::failed))
            .route("/static/{file}", get(assets::get));
    }
    app.fallback(|| async { error_page(StatusCode::NOT_FOUND, "no such page") })
        .layer(middleware::from_fn(deadline))
        .layer(middleware::from_fn(secure_headers))
        .with_state(state)
}

/// How long a page or a scrape may wait for the board. A board that is
/// down made each call wait out the connection's reconnect attempts
/// (about 13 s, and the call is sent once more), so a page or a scrape
/// took 13–26 s to fail, past Prometheus' default 10 s scrape timeout.
const PAGE_DEADLINE: Duration = Duration::from_secs(5);

/// Answers a page (a `GET`, but the live stream, which waits by design)
/// with 503 once it has waited [`PAGE_DEADLINE`] for the board. Actions
/// are not cut short: one stopped half way would leave the board changed
/// without saying so.
async fn deadline(request: Request, next: Next) -> Response {
    if request.method() != Method::GET || request.uri().path() == "/live" {
        return next.run(request).await;
    }
    match tokio::time::timeout(PAGE_DEADLINE, next.run(request)).await {
        Ok(response) => response,
        Err(_) => error_page(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the board did not answer within {PAGE_DEADLINE:?}"),
        ),
    }
}

async fn secure_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}
