//! Cron rules, read with `croner` on the wall clock of a `chrono-tz` time
//! zone (the `cron` feature).

use std::str::FromStr;

use chrono::DateTime;
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

use crate::error::{Error, Result};
use crate::schedule::NEVER;

/// A cron expression parsed, with its time zone.
pub(super) struct Compiled {
    cron: Cron,
    zone: Tz,
}

impl Compiled {
    /// Parses `tz` (an IANA name) and `expr`; fails naming the one not
    /// understood.
    pub(super) fn new(expr: &str, tz: &str) -> Result<Compiled> {
        let zone = parse_tz(tz)?;
        Ok(Compiled {
            cron: parse_cron(expr)?,
            zone,
        })
    }

    /// The time zone's canonical name.
    pub(super) fn zone_name(&self) -> String {
        self.zone.name().to_owned()
    }

    /// Whether the expression matches at all (`0 0 30 2 *` never does).
    pub(super) fn ever_matches(&self) -> bool {
        zoned(self.zone, 0).is_some_and(|at| self.cron.find_next_occurrence(&at, false).is_ok())
    }

    /// The first slot strictly after `after_ms`.
    pub(super) fn next_after(&self, after_ms: i64) -> Option<i64> {
        cron_next_after(&self.cron, self.zone, after_ms)
    }

    /// The due slots in (next_ms, now_ms] (at most `keep`) and the next one.
    pub(super) fn due(&self, next_ms: i64, now_ms: i64, keep: usize) -> (Vec<i64>, i64) {
        cron_due(&self.cron, self.zone, next_ms, now_ms, keep)
    }
}

/// [`due_slots`](crate::schedule::due_slots) for a cron rule: the latest `keep` slots in (next_ms,
/// now_ms], found walking backwards from now_ms, with next_ms itself counted
/// as the oldest slot.
fn cron_due(cron: &Cron, zone: Tz, next_ms: i64, now_ms: i64, keep: usize) -> (Vec<i64>, i64) {
    let mut due = Vec::new();
    // Cron slots are whole seconds: the latest one at or before now_ms is at
    // or before the start of now_ms's second.
    let mut cursor = zoned(zone, now_ms.div_euclid(1000) * 1000);
    let mut inclusive = true;
    while due.len() < keep {
        let Some(at) = cursor.as_ref() else { break };
        let Ok(slot) = cron.find_previous_occurrence(at, inclusive) else {
            break;
        };
        let slot_ms = slot.timestamp_millis();
        if slot_ms <= next_ms {
            break;
        }
        due.push(slot_ms);
        cursor = Some(slot);
        inclusive = false;
    }
    if due.len() < keep {
        due.push(next_ms);
    }
    due.reverse();
    let new_next = cron_next_after(cron, zone, now_ms).unwrap_or(NEVER);
    (due, new_next)
}

/// The first slot of `cron` in `zone` strictly after `after_ms`.
fn cron_next_after(cron: &Cron, zone: Tz, after_ms: i64) -> Option<i64> {
    // Slots are whole seconds, so the first one after the start of
    // after_ms's second is also the first one after after_ms.
    let start = zoned(zone, after_ms.div_euclid(1000) * 1000)?;
    let next = cron.find_next_occurrence(&start, false).ok()?;
    Some(next.timestamp_millis())
}

/// The instant `ms` (since the Unix epoch) on `zone`'s clock, if representable.
pub(super) fn zoned(zone: Tz, ms: i64) -> Option<DateTime<Tz>> {
    DateTime::from_timestamp_millis(ms).map(|utc| utc.with_timezone(&zone))
}

/// Parses an IANA time zone name.
fn parse_tz(tz: &str) -> Result<Tz> {
    Tz::from_str(tz).map_err(|_| Error::invalid(format!("unknown time zone '{tz}'")))
}

/// Parses a cron expression: 5 fields, or 6 with seconds first; no year field.
fn parse_cron(expr: &str) -> Result<Cron> {
    if expr.trim().is_empty() {
        return Err(Error::invalid("invalid cron expression '': it is empty"));
    }
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| {
            let why = e.to_string().to_lowercase();
            let why = why.trim_end_matches('.');
            Error::invalid(format!("invalid cron expression '{expr}': {why}"))
        })
}
