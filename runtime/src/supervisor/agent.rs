//! The supervisor's board, with its ZooKeeper agent (`board/agent.rs`)
//! forked when it needs one: at the first question, and again after one
//! failed.

use crate::board::{BlockingBoard, QueueCounts};
use crate::supervisor::run::Supervisor;

impl Supervisor {
    /// The board, with its agent forked first where it needs one. The
    /// agent lets go of what is the supervisor's, as a forked worker does.
    pub(super) fn board(&mut self) -> &mut BlockingBoard {
        let Supervisor {
            board,
            wakeups,
            http,
            relay,
            ..
        } = self;
        board.ensure_agent(|| {
            drop(wakeups.take());
            drop(http.take());
            crate::console::forget();
            if let Some(relay) = relay {
                relay.become_stderr();
            }
        });
        board
    }

    /// How many jobs the supervisor's queues hold together.
    pub(super) fn counts(&mut self) -> crate::Result<QueueCounts> {
        let queues = self.cfg.worker.queues.clone();
        self.board().counts(&queues)
    }
}
