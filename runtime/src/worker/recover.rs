//! A new worker's first task where the supervisor cannot reach the board
//! itself (ZooKeeper): giving back the claims of the dead workers it was
//! handed (`WorkerConfig::recover`), before it claims anything.

use crate::board::{AnyBoard, Recovered, Recovery};
use crate::worker::config::WorkerConfig;

/// Gives back every claim of the dead workers in `cfg.recover`; what fails
/// ends at its lease deadline or with the dead worker's session.
pub(crate) async fn recover_dead(board: &AnyBoard, cfg: &WorkerConfig) {
    for (owner, reason) in &cfg.recover {
        for queue in &cfg.queues {
            match board.recover_owner(queue, owner, reason).await {
                Ok(Recovered { back: 0, trashed: 0 }) => {}
                Ok(Recovered { back, trashed }) => {
                    tracing::warn!(queue = %queue, owner, back, trashed, "recovered the claims of a dead worker")
                }
                Err(e) => {
                    tracing::error!(queue = %queue, owner, error = %e, "cannot recover the claims of a dead worker")
                }
            }
        }
    }
}
