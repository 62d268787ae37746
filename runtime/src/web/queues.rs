//! Which queues the app shows: those the board lists; on a board that
//! cannot list them (ZooKeeper), those given with `--queues` and those the
//! live workers serve.

use std::collections::BTreeSet;

use crate::board::{Admin, Presence};
use crate::error::Result;
use crate::web::state::AppState;

/// The queues to show, sorted.
pub(crate) async fn known(state: &AppState) -> Result<Vec<String>> {
    let mut all: BTreeSet<String> = state.options.queues.iter().cloned().collect();
    match state.board.queues().await {
        Ok(listed) => all.extend(listed),
        Err(e) if e.is_unsupported() => {
            for w in state.board.live_workers().await? {
                all.extend(w.queues);
            }
        }
        Err(e) => return Err(e),
    }
    Ok(all.into_iter().collect())
}
