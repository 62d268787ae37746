//! The scripted handler's run log: one line when a run starts and one when
//! it ends, each naming the job, the worker process, the fencing token of
//! the claim and the wall-clock time in microseconds since the Unix epoch.
//!
//! ```text
//! start <id> <pid> <token> <us>
//! end <id> <pid> <token> <us> <outcome>
//! ```
//!
//! `<outcome>` is `ok` (the handler returned `Ok`), `error` (it returned an
//! error), `aborted` (the worker dropped the handler before it returned:
//! timeout, lost lease, shutdown) or `panicked`. A run whose process was
//! killed has a `start` line and no `end` line. Each line is one `write`
//! to a file opened in append mode, so lines of concurrent runs in
//! different processes never interleave.
//!
//! Readers (the end-to-end tests, the chaos tool) parse lines with
//! [`RunLine::parse`].

use std::fmt;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use jobworker::JobContext;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunOutcome {
    /// The handler returned `Ok`.
    Ok,
    /// The handler returned an error.
    Error,
    /// The handler was dropped before it returned (the worker stopped it).
    Aborted,
    /// The handler panicked.
    Panicked,
}

impl RunOutcome {
    /// The word written in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Ok => "ok",
            RunOutcome::Error => "error",
            RunOutcome::Aborted => "aborted",
            RunOutcome::Panicked => "panicked",
        }
    }

    fn parse(word: &str) -> Option<RunOutcome> {
        Some(match word {
            "ok" => RunOutcome::Ok,
            "error" => RunOutcome::Error,
            "aborted" => RunOutcome::Aborted,
            "panicked" => RunOutcome::Panicked,
            _ => return None,
        })
    }
}

/// One line of the run log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunLine {
    /// A run started.
    Start {
        /// The job id.
        id: String,
        /// The worker process.
        pid: u32,
        /// The fencing token of the claim the run holds.
        token: u64,
        /// Wall-clock time, microseconds since the Unix epoch.
        at_us: u64,
    },
    /// A run ended (the handler returned, panicked or was dropped).
    End {
        /// The job id.
        id: String,
        /// The worker process.
        pid: u32,
        /// The fencing token of the claim the run held.
        token: u64,
        /// Wall-clock time, microseconds since the Unix epoch.
        at_us: u64,
        /// How it ended.
        outcome: RunOutcome,
    },
}

impl RunLine {
    /// Parses one line (without its newline); `None` when it is not a run
    /// line.
    pub fn parse(line: &str) -> Option<RunLine> {
        let mut words = line.split(' ');
        let kind = words.next()?;
        let id = words.next()?.to_owned();
        let pid = words.next()?.parse().ok()?;
        let token = words.next()?.parse().ok()?;
        let at_us = words.next()?.parse().ok()?;
        let parsed = match kind {
            "start" => RunLine::Start {
                id,
                pid,
                token,
                at_us,
            },
            "end" => RunLine::End {
                id,
                pid,
                token,
                at_us,
                outcome: RunOutcome::parse(words.next()?)?,
            },
            _ => return None,
        };
        words.next().is_none().then_some(parsed)
    }

    /// The job id.
    pub fn id(&self) -> &str {
        match self {
            RunLine::Start { id, .. } | RunLine::End { id, .. } => id,
        }
    }
}

impl fmt::Display for RunLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunLine::Start {
                id,
                pid,
                token,
                at_us,
            } => write!(f, "start {id} {pid} {token} {at_us}"),
            RunLine::End {
                id,
                pid,
                token,
                at_us,
                outcome,
            } => write!(f, "end {id} {pid} {token} {at_us} {}", outcome.as_str()),
        }
    }
}

/// Wall-clock microseconds since the Unix epoch.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// Appends `line` and a newline to `path` in one write.
fn append(path: &str, line: &RunLine) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(format!("{line}\n").as_bytes())
}

/// A run in progress: [`RunRecorder::start`] writes the `start` line,
/// [`RunRecorder::end`] the `end` line; dropped without `end` (the worker
/// dropped the handler, or it panicked) it writes `end … aborted` or
/// `end … panicked`.
#[derive(Debug)]
pub struct RunRecorder {
    path: String,
    id: String,
    pid: u32,
    token: u64,
    ended: bool,
}

impl RunRecorder {
    /// Writes the `start` line of the run of `cx` to `path`.
    pub fn start(path: &str, cx: &JobContext) -> std::io::Result<RunRecorder> {
        let recorder = RunRecorder {
            path: path.to_owned(),
            id: cx.id().as_str().to_owned(),
            pid: std::process::id(),
            token: cx.fencing_token(),
            ended: false,
        };
        append(
            path,
            &RunLine::Start {
                id: recorder.id.clone(),
                pid: recorder.pid,
                token: recorder.token,
                at_us: now_us(),
            },
        )?;
        Ok(recorder)
    }

    /// Writes the `end` line with `outcome`.
    pub fn end(mut self, outcome: RunOutcome) -> std::io::Result<()> {
        self.ended = true;
        self.write_end(outcome)
    }

    fn write_end(&self, outcome: RunOutcome) -> std::io::Result<()> {
        append(
            &self.path,
            &RunLine::End {
                id: self.id.clone(),
                pid: self.pid,
                token: self.token,
                at_us: now_us(),
                outcome,
            },
        )
    }
}

impl Drop for RunRecorder {
    fn drop(&mut self) {
        if !self.ended {
            let outcome = if std::thread::panicking() {
                RunOutcome::Panicked
            } else {
                RunOutcome::Aborted
            };
            let _ = self.write_end(outcome);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let start = RunLine::Start {
            id: "a1".into(),
            pid: 42,
            token: 7,
            at_us: 1_700_000_000_000_001,
        };
        assert_eq!(start.to_string(), "start a1 42 7 1700000000000001");
        assert_eq!(RunLine::parse(&start.to_string()), Some(start));
        for outcome in [
            RunOutcome::Ok,
            RunOutcome::Error,
            RunOutcome::Aborted,
            RunOutcome::Panicked,
        ] {
            let end = RunLine::End {
                id: "a1".into(),
                pid: 42,
                token: 7,
                at_us: 5,
                outcome,
            };
            assert_eq!(RunLine::parse(&end.to_string()), Some(end));
        }
    }

    #[test]
    fn other_lines_are_refused() {
        for bad in [
            "",
            "start a1",
            "start a1 42 7",
            "done a1",
            "start a1 x 7 5",
            "end a1 42 7 5",
            "end a1 42 7 5 maybe",
            "start a1 42 7 5 extra",
        ] {
            assert_eq!(RunLine::parse(bad), None, "{bad:?}");
        }
    }
}
