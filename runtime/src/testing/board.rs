//! A private Redis board for one test.

use crate::board::AnyBoard;
use crate::embedded::{RedisServer, ServerOptions};
use crate::error::{Error, Result};
use crate::redis::RedisBoard;

/// A board on a private `redis-server` started for one test (a free
/// loopback port, a temporary directory, no persistence), stopped by PID
/// when the `TestBoard` is dropped. Needs `redis-server` on `PATH` (Debian:
/// `apt-get install -y redis-server`); without it, [`start`](Self::start)
/// fails with that hint: it never skips.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> jobworker::Result<()> {
/// use jobworker::testing::TestBoard;
/// use jobworker::{Board, NewJob};
///
/// let test = TestBoard::start().await?;
/// let board = test.board();
/// board.post("emails", NewJob::new("welcome")).await?;
/// assert_eq!(board.job_count("emails").await?, 1);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct TestBoard {
    board: RedisBoard,
    // Declared last: stopped after the board's connections are dropped.
    server: RedisServer,
}

impl TestBoard {
    /// Starts the server and connects a board to it.
    pub async fn start() -> Result<TestBoard> {
        let server = tokio::task::spawn_blocking(|| RedisServer::start(ServerOptions::default()))
            .await
            .map_err(|e| Error::unavailable(format!("cannot start a test redis-server: {e}")))??;
        let board = RedisBoard::connect(&server.url()).await?;
        Ok(TestBoard { board, server })
    }

    /// The board.
    pub fn board(&self) -> &RedisBoard {
        &self.board
    }

    /// The board as an [`AnyBoard`] (what handlers see through
    /// [`JobContext::board`](crate::JobContext::board)).
    pub fn any(&self) -> AnyBoard {
        AnyBoard::Redis(self.board.clone())
    }

    /// The server's URL, for code under test that connects by itself
    /// (`redis://127.0.0.1:PORT/`).
    pub fn url(&self) -> String {
        self.server.url()
    }
}
