//! The routes, the headers every response carries, and what a request
//! may ask of a page: how long it waits, and whose message it shows.

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
        .layer(middleware::from_fn(own_messages))
        .layer(middleware::from_fn(secure_headers))
        .with_state(state)
}

/// How long a page or a scrape may wait for the board. A board that is
/// down made each call wait out the connection's reconnect attempts
/// (about 13 s, and the call is sent once more), so a page or a scrape
/// took 13–26 s to fail, past Prometheus' default 10 s scrape timeout;
/// a board that is up answers a page in milliseconds.
const PAGE_DEADLINE: Duration = Duration::from_secs(8);

/// Answers a page (a `GET` or `HEAD`, but the live stream, which waits by
/// design)
/// with 503 once it has waited [`PAGE_DEADLINE`] for the board. Actions
/// are not cut short: one stopped half way would leave the board changed
/// without saying so.
async fn deadline(request: Request, next: Next) -> Response {
    let page = matches!(*request.method(), Method::GET | Method::HEAD);
    if !page || request.uri().path() == "/live" {
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

/// Drops a page's `?msg=` (the message after an action) unless the
/// request comes from the app's own pages: the browser sent back after an
/// action says so (`Sec-Fetch-Site: same-origin`, or a `Referer` on this
/// host), a link from elsewhere does not. So a link cannot make a page
/// show text of someone else's choosing ("session expired: sign in at
/// …").
async fn own_messages(request: Request, next: Next) -> Response {
    let query = request.uri().query().unwrap_or("");
    // Keys as the pages read them: percent-decoded (`%6Dsg=` is `msg=`).
    let has_msg = form_urlencoded::parse(query.as_bytes()).any(|(k, _)| k == "msg");
    if !has_msg || from_this_app(request.headers()) {
        return next.run(request).await;
    }
    let kept: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .filter(|(k, _)| k != "msg")
        .collect();
    let mut path = request.uri().path().to_owned();
    if !kept.is_empty() {
        path = format!(
            "{path}?{}",
            form_urlencoded::Serializer::new(String::new())
                .extend_pairs(kept)
                .finish()
        );
    }
    let (mut parts, body) = request.into_parts();
    match path.parse() {
        Ok(uri) => parts.uri = uri,
        Err(_) => return error_page(StatusCode::BAD_REQUEST, "bad request"),
    }
    next.run(Request::from_parts(parts, body)).await
}

/// Whether the request was made from one of this app's pages.
fn from_this_app(headers: &axum::http::HeaderMap) -> bool {
    let header = |n: header::HeaderName| headers.get(n).and_then(|v| v.to_str().ok());
    if headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) == Some("same-origin") {
        return true;
    }
    let referer_host = header(header::REFERER)
        .and_then(|r| r.split_once("://"))
        .map(|(_, rest)| rest.split('/').next().unwrap_or(""));
    matches!((referer_host, header(header::HOST)), (Some(r), Some(h)) if r == h)
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
