//! What a new queue's name must not hold on any board: the character the
//! command line lists queues with, so that no job can be posted where no
//! `jobworker` worker can be pointed at it.

use crate::error::{Error, Result};

/// Refuses a name for a queue about to be made (a post, a recurring
/// job) that holds a `,`: `--queues a,b` lists two queues, so no worker
/// of the command line could serve it. Queues already on a board are not
/// checked again: they stay readable.
pub(crate) fn check_new_queue(queue: &str) -> Result<()> {
    if queue.contains(',') {
        return Err(Error::invalid(format!(
            "queue name {queue:?} must not contain ',': `--queues` separates queues with it, so no \
             worker could serve this queue"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commas_are_refused_in_new_queue_names() {
        for bad in ["a,b", ",", "x,"] {
            assert!(check_new_queue(bad).unwrap_err().is_invalid(), "{bad}");
        }
        for good in ["a", "a-b.c_d", "tenant/emails"] {
            check_new_queue(good).unwrap();
        }
    }
}
