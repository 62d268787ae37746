//! The queue → namespace mappings a board is given (`--namespace`,
//! [`RedisOptions::namespace`]): none may merge queues.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::redis::RedisOptions;

/// Refuses a namespace mapping that would merge queues: an empty
/// namespace or queue name, two queues under one namespace, or a queue
/// under another queue's own namespace (`<prefix>:{other}`): their jobs
/// would be one queue's, run by either queue's workers.
pub(super) fn check(opts: &RedisOptions) -> Result<()> {
    let mut owners: HashMap<&str, &str> = HashMap::new();
    for (queue, ns) in &opts.namespaces {
        crate::redis::keys::validate_queue(queue)?;
        if ns.is_empty() {
            return Err(Error::invalid("a queue namespace must not be empty"));
        }
        let own = ns
            .strip_prefix(&format!("{}:{{", opts.prefix))
            .and_then(|rest| rest.strip_suffix('}'));
        if let Some(other) = own.filter(|other| other != queue) {
            return Err(Error::invalid(format!(
                "queue {queue:?} cannot be stored under {ns:?}: that is queue {other:?}'s own namespace"
            )));
        }
        if let Some(first) = owners.insert(ns, queue) {
            let (a, b) = if first < queue.as_str() {
                (first, queue.as_str())
            } else {
                (queue.as_str(), first)
            };
            return Err(Error::invalid(format!(
                "queues {a:?} and {b:?} cannot share namespace {ns:?}: their jobs would be one queue's"
            )));
        }
    }
    Ok(())
}
