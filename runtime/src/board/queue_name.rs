//! What a new queue's name must not hold on any board: characters the
//! command line reads as separators, so that no job can be posted where
//! no worker can be pointed at it.

use crate::error::{Error, Result};

/// Refuses a name for a queue about to be made (a post, a recurring
/// job): a `,` (`--queues a,b` lists two queues, so no worker could serve
/// it) or a `/` (`--depends QUEUE/ID`). Queues already on a board are not
/// checked again: they stay readable.
pub(crate) fn check_new_queue(queue: &str) -> Result<()> {
    match queue.chars().find(|c| matches!(c, ',' | '/')) {
        Some(c) => Err(Error::invalid(format!(
            "queue name {queue:?} must not contain {c:?}: `--queues` separates queues with ',' \
             and `--depends` a queue from its job with '/'"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_are_refused_in_new_queue_names() {
        for bad in ["a,b", "a/b", ",", "x/"] {
            assert!(check_new_queue(bad).unwrap_err().is_invalid(), "{bad}");
        }
        for good in ["a", "a-b.c_d", "emails"] {
            check_new_queue(good).unwrap();
        }
    }
}
