//! `jobworker web`: the operators' web app and `/metrics` (see
//! `crate::web`), on the board the other commands use (the private board
//! included) until SIGINT or SIGTERM.

use std::net::SocketAddr;

use clap::Args;

use crate::board::{AnyBoard, BoardSpec};
use crate::error::{Error, Result};
use crate::web::{self, Credentials, WebOptions};

/// `web`.
#[derive(Debug, Args)]
pub struct WebArgs {
    /// Address to listen on (port 0: any free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:7070")]
    pub listen: SocketAddr,
    /// Enable actions for this user and password (`user:password`; hashed
    /// at start). Without it and without --token-env the app is read-only.
    #[arg(
        long,
        env = "JOBWORKER_WEB_AUTH",
        value_name = "USER:PASSWORD",
        hide_env_values = true
    )]
    pub auth: Option<String>,
    /// Enable actions for requests carrying `Authorization: Bearer <token>`,
    /// the token being the value of this environment variable.
    #[arg(long, value_name = "VAR")]
    pub token_env: Option<String>,
    /// Queues to show besides those the board lists (a ZooKeeper board
    /// cannot list them: the live workers' queues are shown too).
    #[arg(long, value_delimiter = ',')]
    pub queues: Vec<String>,
    /// Serve only `/metrics` (no pages, no actions).
    #[arg(long)]
    pub metrics_only: bool,
}

/// Runs `web`.
pub(crate) async fn run(spec: &BoardSpec, board: &AnyBoard, a: &WebArgs) -> Result<()> {
    let options = WebOptions {
        credentials: credentials(a)?,
        metrics_only: a.metrics_only,
        board_label: spec.describe(),
        queues: a.queues.clone(),
    };
    web::serve(board.clone(), a.listen, options, stop_signal()).await
}

fn credentials(a: &WebArgs) -> Result<Option<Credentials>> {
    let user_password = match &a.auth {
        Some(text) => match text.split_once(':') {
            Some((user, password)) if !user.is_empty() && !password.is_empty() => {
                Some((user.to_owned(), password.to_owned()))
            }
            _ => return Err(Error::invalid("--auth must be user:password, both non-empty")),
        },
        None => None,
    };
    let token = match &a.token_env {
        Some(var) => match std::env::var(var) {
            Ok(t) if t.len() >= 16 => Some(t),
            Ok(_) => {
                return Err(Error::invalid(format!(
                    "the token in ${var} must be at least 16 characters"
                )))
            }
            Err(_) => {
                return Err(Error::invalid(format!(
                    "--token-env {var}: the variable is not set"
                )))
            }
        },
        None => None,
    };
    Ok((user_password.is_some() || token.is_some()).then_some(Credentials { user_password, token }))
}

/// Completes on SIGINT or SIGTERM.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    eprintln!("jobworker: web app stopping");
}
