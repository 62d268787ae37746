//! Printing results for people (aligned text) or scripts (`--json`).

use crate::codec::value_to_json;
use crate::job::{Claimed, JobInfo};

/// Prints one JSON value on a line.
pub(crate) fn json(value: &serde_json::Value) {
    println!("{value}");
}

/// A claimed job as JSON.
pub(crate) fn claimed_json(c: &Claimed) -> serde_json::Value {
    serde_json::json!({
        "id": c.lease.job.as_str(),
        "queue": c.lease.queue,
        "name": c.name,
        "owner": c.lease.owner,
        "token": c.lease.token,
        "attempt": c.attempt,
        "max_attempts": c.max_attempts,
        "priority": c.priority.0,
        "args": value_to_json(&c.args),
    })
}

/// A claimed job as a line of text.
pub(crate) fn claimed_text(c: &Claimed) {
    println!(
        "claimed {} ({}) in {} as {} token {} attempt {}/{}",
        c.lease.job, c.name, c.lease.queue, c.lease.owner, c.lease.token, c.attempt, c.max_attempts
    );
}

/// A table of jobs.
pub(crate) fn jobs_text(jobs: &[JobInfo]) {
    println!(
        "{:<36}  {:<11}  {:>5}  {:>8}  {:<20}  OWNER",
        "ID", "STATE", "PRIO", "ATTEMPTS", "NAME"
    );
    for j in jobs {
        println!(
            "{:<36}  {:<11}  {:>5}  {:>8}  {:<20}  {}",
            j.id,
            j.state.as_str(),
            j.priority,
            format!("{}/{}", j.attempts, j.max_attempts),
            j.name,
            j.owner.as_deref().unwrap_or("-")
        );
    }
}

/// One job in detail.
pub(crate) fn job_text(j: &JobInfo) {
    let rows: [(&str, String); 12] = [
        ("id", j.id.clone()),
        ("queue", j.queue.clone()),
        ("name", j.name.clone()),
        ("state", j.state.to_string()),
        ("priority", j.priority.to_string()),
        ("owner", j.owner.clone().unwrap_or_else(|| "-".into())),
        ("attempts", format!("{} of {}", j.attempts, j.max_attempts)),
        ("token", j.token.to_string()),
        ("sequence", j.sequence.map_or("-".into(), |s| s.to_string())),
        ("created_on", j.created_on.clone().unwrap_or_else(|| "-".into())),
        ("reason", j.reason.clone().unwrap_or_else(|| "-".into())),
        ("args", j.args.to_string()),
    ];
    for (k, v) in rows {
        println!("{k:<11} {v}");
    }
}
