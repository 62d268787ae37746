//! Recurrence rules for recurring jobs: a fixed interval (qless-style
//! interval + offset) or a cron expression evaluated in an IANA time zone.
//!
//! A recurring job stores its [`Rule`] (as [`Rule::encode`] text) and the time
//! of its next slot. When that time has come, [`due_slots`] says which slots
//! to run (at most a backlog of the latest missed ones) and when the next one
//! is.
//!
//! # Time zones and daylight saving time
//!
//! Cron rules are evaluated on the wall clock of their time zone (time zone
//! data from `chrono-tz`, cron matching from `croner`, which follows the Open
//! Cron Pattern Specification for DST):
//!
//! - **Spring forward** (a range of wall-clock times does not exist): a
//!   fixed-time rule (single second, minute and hour, such as `30 2 * * *`)
//!   whose time falls in the gap runs once, at the first real instant after
//!   the gap (03:00 in Europe/Paris). Rules with a wildcard, range, list or
//!   step in the second, minute or hour field just have no slots inside the
//!   gap.
//! - **Fall back** (a range of wall-clock times happens twice): a fixed-time
//!   rule runs once, at the first occurrence of its wall-clock time (02:30
//!   summer time in Europe/Paris). Rules with a wildcard, range, list or step
//!   in those fields run in both passes (`*/30 * * * *` runs at 02:00 and
//!   02:30 summer time, then at 02:00 and 02:30 winter time).
//!
//! Interval rules ([`Rule::Every`]) count real elapsed time and ignore time
//! zones altogether.

use std::fmt;
use std::time::Duration;

use crate::error::{Error, Result};

#[cfg(feature = "cron")]
#[path = "schedule/cron.rs"]
mod cron;
#[cfg(not(feature = "cron"))]
#[path = "schedule/cron_off.rs"]
mod cron;

/// The most slots [`due_slots`] returns at once, whatever backlog is asked.
///
/// It bounds the memory and the cron search work of one call; older missed
/// slots beyond it are skipped like any slot beyond the backlog.
const MAX_DUE_SLOTS: u32 = 10_000;

/// The value [`due_slots`] returns as the next slot of a rule that has none
/// (a cron rule past its last match, or an interval past the end of time).
pub(crate) const NEVER: i64 = i64::MAX;

/// How a recurring job repeats.
///
/// ```
/// use jobworker::schedule::Rule;
/// use std::time::Duration;
///
/// let hourly = Rule::every(Duration::from_secs(3600))?;
/// assert_eq!(hourly.next_after(0), Some(3_600_000));
/// let nine = Rule::cron("0 9 * * MON-FRI", "Europe/Paris")?;
/// assert_eq!(Rule::decode(&nine.encode())?, nine);
/// assert!(Rule::cron("not cron", "UTC").is_err());
/// # Ok::<(), jobworker::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    /// Every `interval` of real time (whole milliseconds, at least 1 ms),
    /// counted from the previous slot.
    Every {
        /// Time between two slots.
        interval: Duration,
    },
    /// A cron expression (5 fields "min hour dom mon dow", or 6 with seconds
    /// first) evaluated on the wall clock of an IANA time zone (e.g.
    /// "Europe/Paris", "UTC").
    Cron {
        /// The cron expression, fields separated by single spaces.
        expr: String,
        /// The IANA name of the time zone the expression is read in.
        tz: String,
    },
}

impl Rule {
    /// An interval rule. The interval is truncated to whole milliseconds;
    /// it must be at least 1 ms and at most `i64::MAX` ms.
    pub fn every(interval: Duration) -> Result<Rule> {
        let ms = interval.as_millis();
        if ms == 0 {
            return Err(Error::invalid(format!(
                "recurrence interval must be at least 1ms, got {interval:?}"
            )));
        }
        if ms > i64::MAX as u128 {
            return Err(Error::invalid(format!(
                "recurrence interval {interval:?} is too large"
            )));
        }
        Ok(Rule::Every {
            interval: Duration::from_millis(ms as u64),
        })
    }

    /// A cron rule: `expr` (5 fields, or 6 with seconds first; `@daily` and
    /// the like are accepted too) read in the IANA time zone `tz`.
    ///
    /// Fails with an invalid error naming the expression or the time zone
    /// when either is not understood, or when the expression can never match
    /// (such as February 30th).
    pub fn cron(expr: &str, tz: &str) -> Result<Rule> {
        let expr = expr.split_whitespace().collect::<Vec<_>>().join(" ");
        let compiled = cron::Compiled::new(&expr, tz)?;
        // A pattern that never matches (`0 0 30 2 *`) is caught here rather
        // than silently never running.
        if !compiled.ever_matches() {
            return Err(Error::invalid(format!("cron expression '{expr}' never matches")));
        }
        Ok(Rule::Cron {
            expr,
            tz: compiled.zone_name(),
        })
    }

    /// The first slot strictly after `after_ms` (ms since the Unix epoch,
    /// UTC), or None if the rule has no further slot.
    ///
    /// An interval rule has no fixed grid: its slots are counted from the
    /// previous one, so this is `after_ms + interval`. A cron rule's slots are
    /// whole seconds on its time zone's wall clock (see the module docs for
    /// DST).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        match self {
            Rule::Every { interval } => after_ms.checked_add(interval_ms(*interval)),
            Rule::Cron { expr, tz } => cron::Compiled::new(expr, tz).ok()?.next_after(after_ms),
        }
    }

    /// Text stored in Redis: `every <interval_ms>` or `cron <tz> <expr>`;
    /// `decode(encode(r)) == r`.
    pub fn encode(&self) -> String {
        match self {
            Rule::Every { interval } => format!("every {}", interval_ms(*interval)),
            Rule::Cron { expr, tz } => format!("cron {tz} {expr}"),
        }
    }

    /// Parses the text of [`Rule::encode`], validating it like [`Rule::every`]
    /// and [`Rule::cron`] do; fails with a codec error naming the text.
    pub fn decode(text: &str) -> Result<Rule> {
        let fail = |why: &str| Error::codec(format!("cannot decode recurrence rule '{text}': {why}"));
        let (kind, rest) = text
            .trim()
            .split_once(' ')
            .ok_or_else(|| fail("missing arguments"))?;
        match kind {
            "every" => {
                let ms: u64 = rest
                    .trim()
                    .parse()
                    .map_err(|_| fail("interval is not a whole number of milliseconds"))?;
                Rule::every(Duration::from_millis(ms)).map_err(|e| fail(e.message()))
            }
            "cron" => {
                let (tz, expr) = rest
                    .trim()
                    .split_once(' ')
                    .ok_or_else(|| fail("missing cron expression"))?;
                Rule::cron(expr, tz).map_err(|e| fail(e.message()))
            }
            _ => Err(fail("unknown rule kind, expected 'every' or 'cron'")),
        }
    }
}

impl fmt::Display for Rule {
    /// Human form: "every 5s", "every 1500ms", "cron '0 9 * * mon-fri' in
    /// Europe/Paris".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Every { interval } => {
                let ms = interval_ms(*interval);
                const UNITS: [(i64, &str); 4] =
                    [(86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1_000, "s")];
                match UNITS.iter().find(|(unit, _)| ms % unit == 0) {
                    Some((unit, name)) => write!(f, "every {}{name}", ms / unit),
                    None => write!(f, "every {ms}ms"),
                }
            }
            Rule::Cron { expr, tz } => write!(f, "cron '{expr}' in {tz}"),
        }
    }
}

/// Slots of a rule that are due: every slot s with next_ms <= s <= now_ms,
/// starting at next_ms (which is itself a slot) — but at most `backlog` of
/// them (the latest `backlog` ones are kept; older missed ones are skipped;
/// backlog 0 is treated as 1, and backlogs above 10 000 as 10 000), plus the
/// new next slot (first slot > now_ms, or `i64::MAX` if the rule has none).
/// Returns (due slots ascending, new next). If next_ms > now_ms: (vec![],
/// next_ms).
///
/// The work does not grow with the time since next_ms: interval rules are
/// computed with arithmetic; cron rules are walked backwards from now_ms, so
/// at most `backlog` cron slots are searched, plus one forward search for the
/// new next slot.
pub fn due_slots(rule: &Rule, next_ms: i64, now_ms: i64, backlog: u32) -> (Vec<i64>, i64) {
    if next_ms > now_ms {
        return (Vec::new(), next_ms);
    }
    let keep = backlog.clamp(1, MAX_DUE_SLOTS) as usize;
    match rule {
        Rule::Every { interval } => every_due(interval_ms(*interval), next_ms, now_ms, keep),
        Rule::Cron { expr, tz } => {
            let Ok(compiled) = cron::Compiled::new(expr, tz) else {
                // An invalid rule cannot be built through `Rule::cron`; run
                // the slot that was scheduled and stop there.
                return (vec![next_ms], NEVER);
            };
            compiled.due(next_ms, now_ms, keep)
        }
    }
}

/// The interval of an `Every` rule in whole milliseconds, at least 1 (a rule
/// built by hand with a zero or sub-millisecond interval still moves on).
fn interval_ms(interval: Duration) -> i64 {
    i64::try_from(interval.as_millis()).unwrap_or(i64::MAX).max(1)
}

/// [`due_slots`] for an interval of `step` ms: slots are next_ms + k * step.
fn every_due(step: i64, next_ms: i64, now_ms: i64, keep: usize) -> (Vec<i64>, i64) {
    let (next, now, step) = (next_ms as i128, now_ms as i128, step as i128);
    // Slots next + k * step for k in 0..count are all <= now.
    let count = (now - next) / step + 1;
    let first = (count - keep as i128).max(0);
    let due = (first..count).map(|k| (next + k * step) as i64).collect();
    let new_next = i64::try_from(next + count * step).unwrap_or(NEVER);
    (due, new_next)
}

// Cron rules are what most of these test.
#[cfg(feature = "cron")]
#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{NaiveDate, TimeZone, Utc};
    use chrono_tz::Tz;

    use super::cron::zoned;

    const SEC: i64 = 1_000;
    const MIN: i64 = 60 * SEC;
    const HOUR: i64 = 60 * MIN;
    const DAY: i64 = 24 * HOUR;

    /// ms since the epoch of a UTC wall-clock time.
    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
            .unwrap()
            .timestamp_millis()
    }

    /// ms since the epoch of a wall-clock time in `tz`, which must be
    /// unambiguous.
    fn local(tz: &str, y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        let zone: Tz = tz.parse().unwrap();
        zone.with_ymd_and_hms(y, mo, d, h, mi, s)
            .single()
            .unwrap()
            .timestamp_millis()
    }

    /// Every slot of `rule` in (from, to], by repeated `next_after`.
    fn slots(rule: &Rule, from: i64, to: i64) -> Vec<i64> {
        let mut out = Vec::new();
        let mut at = from;
        while let Some(next) = rule.next_after(at) {
            if next > to {
                break;
            }
            out.push(next);
            at = next;
        }
        out
    }

    /// (UTC offset in hours, wall-clock "hh:mm") of `ms` in `tz`.
    fn wall(tz: &str, ms: i64) -> (i32, String) {
        let zone: Tz = tz.parse().unwrap();
        let t = zoned(zone, ms).unwrap();
        use chrono::Offset;
        (
            t.offset().fix().local_minus_utc() / 3600,
            t.format("%H:%M").to_string(),
        )
    }

    fn cron(expr: &str, tz: &str) -> Rule {
        Rule::cron(expr, tz).unwrap()
    }

    #[test]
    fn encode_decode_round_trip() {
        let rules = [
            Rule::every(Duration::from_secs(5)).unwrap(),
            Rule::every(Duration::from_millis(1)).unwrap(),
            Rule::every(Duration::from_millis(1500)).unwrap(),
            cron("0 9 * * mon-fri", "Europe/Paris"),
            cron("*/10 * * * * *", "UTC"),
            cron("  30   2 * * *  ", "America/New_York"),
            cron("@daily", "Asia/Kolkata"),
        ];
        for rule in rules {
            let text = rule.encode();
            assert_eq!(Rule::decode(&text).unwrap(), rule, "{text}");
        }
        assert_eq!(
            Rule::every(Duration::from_secs(5)).unwrap().encode(),
            "every 5000"
        );
        assert_eq!(
            cron("0 9 * * mon-fri", "Europe/Paris").encode(),
            "cron Europe/Paris 0 9 * * mon-fri"
        );
        assert_eq!(
            Rule::decode("cron UTC 0 9  * * *").unwrap(),
            Rule::Cron {
                expr: "0 9 * * *".into(),
                tz: "UTC".into()
            }
        );
    }

    #[test]
    fn display_is_human() {
        let every = |ms| Rule::every(Duration::from_millis(ms)).unwrap().to_string();
        assert_eq!(every(5_000), "every 5s");
        assert_eq!(every(1_500), "every 1500ms");
        assert_eq!(every(90 * 60_000), "every 90m");
        assert_eq!(every(2 * 3_600_000), "every 2h");
        assert_eq!(every(86_400_000), "every 1d");
        assert_eq!(
            cron("0 9 * * mon-fri", "Europe/Paris").to_string(),
            "cron '0 9 * * mon-fri' in Europe/Paris"
        );
    }

    #[test]
    fn invalid_rules_are_rejected_with_clear_errors() {
        let err = Rule::every(Duration::ZERO).unwrap_err();
        assert!(err.is_invalid());
        assert!(err.message().contains("at least 1ms"), "{}", err.message());
        assert!(Rule::every(Duration::from_micros(999)).is_err());
        assert!(Rule::every(Duration::MAX)
            .unwrap_err()
            .message()
            .contains("too large"));
        // Sub-millisecond parts are dropped.
        assert_eq!(
            Rule::every(Duration::from_micros(1_500)).unwrap(),
            Rule::Every {
                interval: Duration::from_millis(1)
            }
        );

        let err = Rule::cron("0 9 * *", "UTC").unwrap_err();
        assert!(err.is_invalid());
        assert!(
            err.message().starts_with("invalid cron expression '0 9 * *'"),
            "{}",
            err.message()
        );
        for bad in [
            "",
            "61 * * * *",
            "0 25 * * *",
            "* * * * * * *",
            "a b c d e",
            "0 9 * * funday",
        ] {
            let err = Rule::cron(bad, "UTC").unwrap_err();
            assert!(err.is_invalid(), "{bad}");
            assert!(
                err.message().starts_with("invalid cron expression"),
                "{bad}: {}",
                err.message()
            );
            assert_eq!(err.message(), err.message().to_lowercase(), "{bad}");
        }
        let err = Rule::cron("0 0 30 2 *", "UTC").unwrap_err();
        assert_eq!(err.message(), "cron expression '0 0 30 2 *' never matches");

        let err = Rule::cron("0 9 * * *", "Mars/Olympus").unwrap_err();
        assert!(err.is_invalid());
        assert_eq!(err.message(), "unknown time zone 'Mars/Olympus'");
        assert!(Rule::cron("0 9 * * *", "").is_err());

        for bad in [
            "",
            "every",
            "every x",
            "every 0",
            "every -5",
            "cron UTC",
            "cron Nowhere 0 9 * * *",
            "hourly 1",
        ] {
            let err = Rule::decode(bad).unwrap_err();
            assert!(err.is_codec(), "{bad}");
            assert!(
                err.message().starts_with("cannot decode recurrence rule"),
                "{}",
                err.message()
            );
        }
    }

    #[test]
    fn every_next_after_adds_the_interval() {
        let rule = Rule::every(Duration::from_secs(5)).unwrap();
        assert_eq!(rule.next_after(1_000), Some(6_000));
        assert_eq!(rule.next_after(-10_000), Some(-5_000));
        assert_eq!(rule.next_after(i64::MAX - 10), None);
    }

    #[test]
    fn every_due_slots_keeps_the_latest_backlog() {
        let rule = Rule::every(Duration::from_secs(10)).unwrap();
        // Exactly due.
        assert_eq!(due_slots(&rule, 100_000, 100_000, 5), (vec![100_000], 110_000));
        // Three slots due, backlog large enough.
        assert_eq!(
            due_slots(&rule, 100_000, 125_000, 5),
            (vec![100_000, 110_000, 120_000], 130_000)
        );
        // Capped: only the latest two.
        assert_eq!(
            due_slots(&rule, 100_000, 125_000, 2),
            (vec![110_000, 120_000], 130_000)
        );
        // Backlog 0 counts as 1.
        assert_eq!(due_slots(&rule, 100_000, 130_000, 0), (vec![130_000], 140_000));
        // Not due yet.
        assert_eq!(due_slots(&rule, 100_000, 99_999, 5), (vec![], 100_000));
    }

    #[test]
    fn every_due_slots_is_fast_across_huge_gaps() {
        let rule = Rule::every(Duration::from_secs(1)).unwrap();
        let now = utc(2026, 6, 1, 12, 0, 0) + 500;
        let next = now - 365 * DAY - 500;
        let started = std::time::Instant::now();
        let (due, new_next) = due_slots(&rule, next, now, 3);
        assert!(started.elapsed() < Duration::from_millis(100));
        assert_eq!(due, vec![now - 2_500, now - 1_500, now - 500]);
        assert_eq!(new_next, now + 500);

        // A 1 ms interval from the dawn of time, with a backlog far above the cap.
        let rule = Rule::every(Duration::from_millis(1)).unwrap();
        let (due, new_next) = due_slots(&rule, i64::MIN, 0, u32::MAX);
        assert_eq!(due.len(), MAX_DUE_SLOTS as usize);
        assert_eq!(*due.last().unwrap(), 0);
        assert_eq!(due[0], -(MAX_DUE_SLOTS as i64) + 1);
        assert_eq!(new_next, 1);

        // The end of time: no next slot.
        let rule = Rule::every(Duration::from_secs(10)).unwrap();
        assert_eq!(
            due_slots(&rule, i64::MAX - 5, i64::MAX, 1),
            (vec![i64::MAX - 5], NEVER)
        );
    }

    #[test]
    fn cron_next_after_in_utc() {
        let rule = cron("0 9 * * mon-fri", "UTC");
        // Friday 2026-01-09 08:00 -> 09:00 the same day.
        assert_eq!(
            rule.next_after(utc(2026, 1, 9, 8, 0, 0)),
            Some(utc(2026, 1, 9, 9, 0, 0))
        );
        // Strictly after: at 09:00 exactly, the next is Monday.
        assert_eq!(
            rule.next_after(utc(2026, 1, 9, 9, 0, 0)),
            Some(utc(2026, 1, 12, 9, 0, 0))
        );
        // Sub-second times.
        assert_eq!(
            rule.next_after(utc(2026, 1, 9, 8, 59, 59) + 999),
            Some(utc(2026, 1, 9, 9, 0, 0))
        );
        assert_eq!(
            rule.next_after(utc(2026, 1, 9, 9, 0, 0) + 1),
            Some(utc(2026, 1, 12, 9, 0, 0))
        );

        let rule = cron("*/15 * * * * *", "UTC");
        assert_eq!(
            rule.next_after(utc(2026, 1, 1, 0, 0, 14) + 999),
            Some(utc(2026, 1, 1, 0, 0, 15))
        );
        assert_eq!(
            rule.next_after(utc(2026, 1, 1, 0, 0, 15)),
            Some(utc(2026, 1, 1, 0, 0, 30))
        );

        // Leap day only.
        let rule = cron("0 0 29 2 *", "UTC");
        assert_eq!(
            rule.next_after(utc(2025, 3, 1, 0, 0, 0)),
            Some(utc(2028, 2, 29, 0, 0, 0))
        );
    }

    #[test]
    fn cron_next_after_in_a_zone() {
        let rule = cron("0 9 * * *", "Europe/Paris");
        // Winter: 09:00 CET is 08:00 UTC.
        assert_eq!(
            rule.next_after(utc(2026, 1, 15, 0, 0, 0)),
            Some(utc(2026, 1, 15, 8, 0, 0))
        );
        // Summer: 09:00 CEST is 07:00 UTC.
        assert_eq!(
            rule.next_after(utc(2026, 7, 15, 0, 0, 0)),
            Some(utc(2026, 7, 15, 7, 0, 0))
        );
        // Already past 09:00 local although still 07:30 UTC.
        assert_eq!(
            rule.next_after(utc(2026, 7, 15, 7, 30, 0)),
            Some(utc(2026, 7, 16, 7, 0, 0))
        );

        let rule = cron("30 18 * * *", "Asia/Kolkata");
        assert_eq!(
            rule.next_after(utc(2026, 1, 1, 0, 0, 0)),
            Some(utc(2026, 1, 1, 13, 0, 0))
        );
    }

    #[test]
    fn dst_spring_forward_runs_a_fixed_time_in_the_gap_once_after_it() {
        // 2026-03-29 in Paris: 02:00 CET jumps to 03:00 CEST.
        let tz = "Europe/Paris";
        let rule = cron("30 2 * * *", tz);
        let got = slots(&rule, utc(2026, 3, 27, 12, 0, 0), utc(2026, 3, 31, 12, 0, 0));
        assert_eq!(
            got,
            vec![
                local(tz, 2026, 3, 28, 2, 30, 0),
                local(tz, 2026, 3, 29, 3, 0, 0), // 02:30 does not exist: first instant after the gap
                local(tz, 2026, 3, 30, 2, 30, 0),
                local(tz, 2026, 3, 31, 2, 30, 0),
            ]
        );
        assert_eq!(wall(tz, got[1]), (2, "03:00".to_owned()));
        assert_eq!(got[1] - got[0], 23 * HOUR + 30 * MIN);

        // An interval-like rule has no slots in the gap.
        let rule = cron("*/30 * * * *", tz);
        let got = slots(
            &rule,
            local(tz, 2026, 3, 29, 1, 0, 0),
            local(tz, 2026, 3, 29, 4, 0, 0),
        );
        let walls: Vec<_> = got.iter().map(|&ms| wall(tz, ms).1).collect();
        assert_eq!(walls, ["01:30", "03:00", "03:30", "04:00"]);
        assert_eq!(got[1] - got[0], 30 * MIN);
    }

    #[test]
    fn dst_fall_back_runs_a_fixed_time_once() {
        // 2026-10-25 in Paris: 03:00 CEST goes back to 02:00 CET, so 02:30 happens twice.
        let tz = "Europe/Paris";
        let rule = cron("30 2 * * *", tz);
        let got = slots(&rule, utc(2026, 10, 23, 12, 0, 0), utc(2026, 10, 27, 12, 0, 0));
        let walls: Vec<_> = got.iter().map(|&ms| wall(tz, ms)).collect();
        let at = |off: i32, w: &str| (off, w.to_owned());
        assert_eq!(
            walls,
            [at(2, "02:30"), at(2, "02:30"), at(1, "02:30"), at(1, "02:30")]
        );
        // The Oct 25 slot is the first pass (summer time, 00:30 UTC).
        assert_eq!(got[1], utc(2026, 10, 25, 0, 30, 0));
        // Searching from inside the second pass does not run it again.
        assert_eq!(
            rule.next_after(utc(2026, 10, 25, 1, 15, 0)),
            Some(utc(2026, 10, 26, 1, 30, 0))
        );

        // An interval-like rule runs in both passes.
        let rule = cron("*/30 * * * *", tz);
        let got = slots(&rule, utc(2026, 10, 24, 23, 0, 0), utc(2026, 10, 25, 2, 0, 0));
        let walls: Vec<_> = got.iter().map(|&ms| wall(tz, ms)).collect();
        assert_eq!(
            walls,
            [
                at(2, "01:30"),
                at(2, "02:00"),
                at(2, "02:30"),
                at(1, "02:00"),
                at(1, "02:30"),
                at(1, "03:00")
            ]
        );
        assert!(got.windows(2).all(|w| w[1] - w[0] == 30 * MIN));
    }

    #[test]
    fn cron_due_slots_match_forward_walks_across_dst() {
        let cases = [
            (
                "Europe/Paris",
                "30 2 * * *",
                utc(2026, 3, 20, 0, 0, 0),
                utc(2026, 4, 5, 0, 0, 0),
            ),
            (
                "Europe/Paris",
                "30 2 * * *",
                utc(2026, 10, 20, 0, 0, 0),
                utc(2026, 11, 1, 0, 0, 0),
            ),
            (
                "Europe/Paris",
                "*/20 * * * *",
                utc(2026, 3, 28, 22, 0, 0),
                utc(2026, 3, 29, 4, 0, 0),
            ),
            (
                "Europe/Paris",
                "*/20 * * * *",
                utc(2026, 10, 24, 22, 0, 0),
                utc(2026, 10, 25, 4, 0, 0),
            ),
            (
                "America/New_York",
                "0 1-3 * * *",
                utc(2026, 11, 1, 0, 0, 0),
                utc(2026, 11, 2, 12, 0, 0),
            ),
        ];
        for (tz, expr, from, to) in cases {
            let rule = cron(expr, tz);
            let first = rule.next_after(from).unwrap();
            let mut all = vec![first];
            all.extend(slots(&rule, first, to));
            let after = rule.next_after(to).unwrap();
            for backlog in [1, 3, 1000] {
                let (due, next) = due_slots(&rule, first, to, backlog);
                let keep = all.len().min(backlog as usize);
                assert_eq!(due, all[all.len() - keep..], "{tz} {expr} backlog {backlog}");
                assert_eq!(next, after, "{tz} {expr}");
            }
        }
    }

    #[test]
    fn cron_due_slots() {
        let rule = cron("0 * * * *", "UTC");
        let next = utc(2026, 1, 1, 10, 0, 0);
        // Not due yet.
        assert_eq!(due_slots(&rule, next, next - 1, 5), (vec![], next));
        // Exactly due.
        assert_eq!(due_slots(&rule, next, next, 5), (vec![next], next + HOUR));
        // Three hours late, backlog 2: the latest two.
        let now = next + 3 * HOUR + 10 * MIN;
        assert_eq!(
            due_slots(&rule, next, now, 2),
            (vec![next + 2 * HOUR, next + 3 * HOUR], next + 4 * HOUR)
        );
        assert_eq!(
            due_slots(&rule, next, now, 0),
            (vec![next + 3 * HOUR], next + 4 * HOUR)
        );
        assert_eq!(
            due_slots(&rule, next, now, 10),
            (
                vec![next, next + HOUR, next + 2 * HOUR, next + 3 * HOUR],
                next + 4 * HOUR
            )
        );
        // A next_ms that is not on the cron grid is still run first.
        let off = next + 5 * MIN;
        assert_eq!(
            due_slots(&rule, off, next + HOUR, 10),
            (vec![off, next + HOUR], next + 2 * HOUR)
        );
    }

    #[test]
    fn cron_due_slots_is_fast_across_huge_gaps() {
        let rule = cron("* * * * * *", "Europe/Paris");
        let now = utc(2026, 6, 1, 12, 0, 0) + 250;
        let next = now - 365 * DAY - 250;
        let started = std::time::Instant::now();
        let (due, new_next) = due_slots(&rule, next, now, 3);
        assert_eq!(due, vec![now - 2_250, now - 1_250, now - 250]);
        assert_eq!(new_next, now + 750);
        let (due, _) = due_slots(&rule, next, now, u32::MAX);
        assert_eq!(due.len(), MAX_DUE_SLOTS as usize);
        assert!(due.windows(2).all(|w| w[1] - w[0] == SEC));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn cron_without_further_slots() {
        // croner searches up to the year 5000.
        let rule = cron("0 0 1 1 *", "UTC");
        let end = NaiveDate::from_ymd_opt(5001, 1, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap();
        let end = end.and_utc().timestamp_millis();
        assert_eq!(rule.next_after(end), None);
        let (due, next) = due_slots(&rule, end - DAY, end + DAY, 5);
        // The slot past the search limit is not found; the scheduled one still runs.
        assert_eq!(due, vec![end - DAY]);
        assert_eq!(next, NEVER);
    }
}
