//! Printing results for people (aligned text) or scripts (`--json`).

use std::io::Write;

use crate::codec::value_to_json;
use crate::error::{Error, Result};
use crate::job::{Claimed, JobInfo};

/// Writes one line to stdout. A reader that went away (`jobworker list |
/// head`) ends the command quietly with exit 0, as `ls | head` does.
pub(crate) fn line(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| out.write_all(b"\n"));
    ended(written);
}

/// Writes `bytes` to stdout as they are (see [`line`]).
pub(crate) fn raw(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    ended(out.write_all(bytes).and_then(|()| out.flush()));
}

/// Ends the command when stdout cannot be written: quietly (exit 0) when
/// its reader went away, with a message otherwise.
fn ended(written: std::io::Result<()>) {
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("jobworker: cannot write to stdout: {e}");
        std::process::exit(crate::cli::exit_code::EXIT_FAILURE);
    }
}

/// `println!` for command output (see [`line`]).
macro_rules! outln {
    () => { $crate::cli::output::line(format_args!("")) };
    ($($arg:tt)*) => { $crate::cli::output::line(format_args!($($arg)*)) };
}
pub(crate) use outln;

/// Prints one JSON value on a line.
pub(crate) fn json(value: &serde_json::Value) {
    outln!("{value}");
}

/// `value` as JSON.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> Result<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| Error::codec(e.to_string()))
}

/// Says what a verb did to job `id`: `WHAT ID`, or `{"id", "result"}`.
pub(crate) fn done(json: bool, what: &str, id: &str) {
    if json {
        self::json(&serde_json::json!({ "id": id, "result": what }));
    } else {
        outln!("{what} {id}");
    }
}

/// Says what a command did to `subject`: `WHAT SUBJECT`, or `{"result",
/// "subject"}`.
pub(crate) fn say(json: bool, what: &str, subject: &str) {
    if json {
        self::json(&serde_json::json!({ "result": what, "subject": subject }));
    } else {
        outln!("{what} {subject}");
    }
}

/// Longest value shown whole in human output (`--json` shows all).
pub(crate) const SHOWN_CHARS: usize = 200;

/// Prints an aligned table: a header row, then one row per entry.
pub(crate) fn table<R: IntoIterator<Item = String>>(header: &[&str], rows: impl IntoIterator<Item = R>) {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING)
        .set_header(header.iter().copied())
        .add_rows(rows);
    for line in t.lines() {
        outln!("{}", line.trim());
    }
}

/// A time (ms since the epoch) in RFC 3339, UTC, to the millisecond.
pub(crate) fn time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

/// `text` cut to [`SHOWN_CHARS`] characters, saying how much was left out.
pub(crate) fn cut(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        None => text.to_owned(),
        Some((at, _)) => format!(
            "{}… ({} more bytes; --json shows all)",
            &text[..at],
            text.len() - at
        ),
    }
}

/// A claimed job as JSON.
pub(crate) fn claimed_json(c: &Claimed) -> serde_json::Value {
    serde_json::json!({
        "id": c.lease.job().as_str(),
        "queue": c.lease.queue(),
        "name": c.name,
        "owner": c.lease.owner(),
        "token": c.lease.token(),
        "attempt": c.attempt,
        "max_attempts": c.max_attempts,
        "priority": c.priority.0,
        "args": value_to_json(&c.args),
        "details": value_to_json(&c.details),
        "book": c.book,
    })
}

/// A claimed job as a line of text.
pub(crate) fn claimed_text(c: &Claimed) {
    outln!(
        "claimed {} ({}) in {} as {} token {} attempt {}/{}",
        c.lease.job(),
        c.name,
        c.lease.queue(),
        c.lease.owner(),
        c.lease.token(),
        c.attempt,
        c.max_attempts
    );
}

/// A table of jobs (or a line saying there are none).
pub(crate) fn jobs_text(jobs: &[JobInfo]) {
    if jobs.is_empty() {
        outln!("no jobs");
        return;
    }
    let rows = jobs.iter().map(|j| {
        [
            j.id.clone(),
            j.state.to_string(),
            j.priority.to_string(),
            format!("{}/{}", j.attempts, j.max_attempts),
            j.name.clone(),
            j.owner.clone().unwrap_or_else(|| "-".into()),
        ]
    });
    table(&["ID", "STATE", "PRIO", "FAILED", "NAME", "OWNER"], rows);
}

/// One job in detail.
pub(crate) fn job_text(j: &JobInfo) {
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let rows: [(&str, String); 17] = [
        ("id", j.id.clone()),
        ("queue", j.queue.clone()),
        ("name", j.name.clone()),
        ("state", j.state.to_string()),
        ("priority", j.priority.to_string()),
        ("run_at", or_dash(j.run_at_ms.map(time))),
        ("owner", or_dash(j.owner.clone())),
        (
            "expires_in",
            or_dash(j.expires_in_ms.map(|ms| format!("{:.1}s", ms as f64 / 1000.0))),
        ),
        // Failed tries, as `claim` prints the try it makes ("attempt 1/5").
        ("attempts", format!("{} failed of {}", j.attempts, j.max_attempts)),
        ("token", j.token.to_string()),
        ("sequence", or_dash(j.sequence.map(|s| s.to_string()))),
        ("created_on", or_dash(j.created_on.clone())),
        ("modified", or_dash(j.last_modified.clone())),
        (
            "book",
            or_dash(j.book.as_ref().map(|b| format!("{} ({})", b.name, b.uuid))),
        ),
        ("reason", or_dash(j.reason.clone())),
        ("args", cut(&j.args.to_string())),
        ("details", cut(&j.details.to_string())),
    ];
    for (k, v) in rows {
        outln!("{k:<11} {v}");
    }
}
