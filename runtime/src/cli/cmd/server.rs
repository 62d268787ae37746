//! `jobworker server status|stop`: the private board's redis-server.

use clap::Subcommand;

use crate::cli::output::{self, outln};
use crate::cli::server::{private_board, BoardArgs};
use crate::error::Result;

/// `server`.
#[derive(Debug, Subcommand)]
pub enum ServerCommand {
    /// Whether the private board's redis-server runs, and where.
    Status,
    /// Stop the private board's redis-server (its data stays; the next
    /// command starts it again).
    Stop,
}

/// `jobworker server status|stop`: the private board's server (never
/// started by these).
pub(crate) fn run(args: &BoardArgs, command: &ServerCommand, json: bool) -> Result<()> {
    let board = private_board(args)?;
    let dir = board.dir().display().to_string();
    match command {
        ServerCommand::Status => {
            let running = board.status()?;
            // A server of the directory that does not answer (stopped,
            // busy, loading): the next command waits for it, never starts
            // another.
            let silent = running.is_none().then(|| board.owner()).flatten();
            if json {
                let pid = running.as_ref().map(|r| r.pid).or(silent);
                let url = running.as_ref().map(|r| r.url.clone());
                output::json(&serde_json::json!({
                    "dir": dir, "running": pid.is_some(), "answering": running.is_some(), "pid": pid, "url": url
                }));
            } else {
                match (running, silent) {
                    (Some(r), _) => outln!(
                        "the private board in {dir} is running: redis-server pid {} at {}",
                        r.pid,
                        r.url
                    ),
                    (None, Some(pid)) => outln!(
                        "the private board in {dir} has a redis-server (pid {pid}) that does not answer: it is \
                         stopped, busy or still loading its data (`jobworker server stop` ends it)"
                    ),
                    (None, None) => {
                        outln!("the private board in {dir} is not running (the next command starts it)")
                    }
                }
            }
        }
        ServerCommand::Stop => {
            let stopped = board.stop()?;
            if json {
                output::json(&serde_json::json!({"dir": dir, "stopped": stopped}));
            } else {
                match stopped {
                    Some(pid) => outln!(
                        "stopped the private board in {dir} (redis-server pid {pid}); its data stays there"
                    ),
                    None => outln!("the private board in {dir} was not running"),
                }
            }
        }
    }
    Ok(())
}
