//! `jobworker web`: the operators' web app (dashboard, queues, jobs,
//! failures, workers, quarantine, live updates) and `/metrics`, served by
//! axum. It reads and acts on the board only through its capability traits
//! ([`Board`](crate::board::Board), [`Admin`](crate::board::Admin),
//! [`Inspect`](crate::board::Inspect), [`Events`](crate::board::Events),
//! [`Presence`](crate::board::Presence)), so it works on both backends and
//! says plainly what a backend does not support.
//!
//! Pages are HTML rendered on the server (maud escapes every value) and work
//! without JavaScript; `static/app.js` only adds live updates and bulk
//! selection. Every response carries a strict Content-Security-Policy.
//! Without credentials the app is read-only; with `--auth` or a bearer
//! token every action needs them, is a POST and carries a CSRF token.

mod actions;
mod assets;
mod auth;
pub(crate) mod bench;
mod charts;
mod fmt;
mod json_html;
mod layout;
mod live;
mod pages;
mod queues;
mod router;
mod state;

use std::future::Future;
use std::net::SocketAddr;

pub(crate) use auth::Credentials;
pub(crate) use state::WebOptions;

use crate::board::AnyBoard;
use crate::error::{Error, Result};

/// Serves the web app on `listen` until `shutdown` completes; prints the
/// address it listens on (`listen`'s port may be 0) on stderr first.
pub(crate) async fn serve(
    board: AnyBoard,
    listen: SocketAddr,
    options: WebOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Error::invalid(format!("cannot listen on {listen}: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("the web app's address", e))?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let app = router::router(state::AppState::new(board, options, stop_rx)?);
    eprintln!("jobworker: web app on http://{addr}/");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            // Live streams end now, so the graceful shutdown does not wait
            // for them.
            let _ = stop_tx.send(true);
        })
        .await
        .map_err(|e| Error::io("the web app", e))
}
