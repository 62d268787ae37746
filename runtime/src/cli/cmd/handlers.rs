//! `jobworker handlers`: the handlers linked into this binary.

use crate::cli::output::{self, outln};
use crate::error::Result;

/// Runs `handlers`.
pub(crate) fn run(json: bool) -> Result<()> {
    let registry = crate::handler::Registry::load()?;
    if json {
        let list: Vec<serde_json::Value> = registry
            .iter()
            .map(|h| {
                serde_json::json!({
                    "name": h.name, "queue": h.queue,
                    "timeout_ms": h.timeout.map(|t| t.as_millis() as u64),
                    "max_attempts": h.max_attempts,
                    "kind": format!("{:?}", h.run),
                    "location": format!("{}:{}", h.file, h.line),
                })
            })
            .collect();
        output::json(&serde_json::Value::Array(list));
    } else if registry.is_empty() {
        outln!("no handlers are linked into this binary");
    } else {
        let rows = registry.iter().map(|h| {
            [
                h.name.to_owned(),
                h.queue.to_owned(),
                h.timeout.map_or("-".to_owned(), |t| format!("{t:?}")),
                h.max_attempts.map_or("-".to_owned(), |n| n.to_string()),
                format!("{:?}", h.run),
                format!("{}:{}", h.file, h.line),
            ]
        });
        output::table(&["NAME", "QUEUE", "TIMEOUT", "MAX ATTEMPTS", "KIND", "AT"], rows);
    }
    Ok(())
}
