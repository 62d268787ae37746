//! What every request of the web app shares: the board, the options, the
//! credentials and the CSRF token, and the stop signal of live streams.

use std::sync::Arc;

use tokio::sync::watch;

use crate::board::AnyBoard;
use crate::error::Result;
use crate::web::auth::{Auth, Credentials};

/// How `jobworker web` was started.
#[derive(Debug, Clone, Default)]
pub(crate) struct WebOptions {
    /// Who may act (`None`: the app is read-only).
    pub credentials: Option<Credentials>,
    /// Serve `/metrics` only (no pages, no actions).
    pub metrics_only: bool,
    /// The board as operators should see it (never with a password).
    pub board_label: String,
    /// Queues to show besides those the board lists (a board that cannot
    /// list its queues shows these and the live workers' queues).
    pub queues: Vec<String>,
}

/// The state shared by every request (cheap to clone).
#[derive(Clone)]
pub(crate) struct AppState(Arc<Inner>);

pub(crate) struct Inner {
    pub board: AnyBoard,
    pub options: WebOptions,
    pub auth: Auth,
    /// Ends the live streams at shutdown.
    pub stop: watch::Receiver<bool>,
}

impl AppState {
    pub(crate) fn new(board: AnyBoard, options: WebOptions, stop: watch::Receiver<bool>) -> Result<Self> {
        let auth = Auth::new(options.credentials.clone())?;
        Ok(AppState(Arc::new(Inner {
            board,
            options,
            auth,
            stop,
        })))
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}
