//! Per-queue, per-day statistics: wait (ready → claimed) and run
//! (claimed → consumed) times with qless's histogram buckets, failures and
//! retries (see [`Admin::stats`](crate::board::Admin::stats)).

use crate::error::{Error, Result};

/// Wait or run times of one day.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct Timing {
    /// Jobs measured.
    pub count: u64,
    /// Mean, in milliseconds.
    pub mean_ms: f64,
    /// Standard deviation, in milliseconds.
    pub std_dev_ms: f64,
    /// Histogram: bucket (`s0`–`s59`, `m1`–`m59`, `h1`–`h23`, `d1`–`d7`)
    /// → jobs, in bucket order; `d7` holds a week and more.
    pub histogram: Vec<(String, u64)>,
}

/// One queue's statistics for one UTC day.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct QueueStats {
    /// The queue.
    pub queue: String,
    /// The day, `YYYY-MM-DD` (UTC).
    pub day: String,
    /// Time from ready to claimed.
    pub wait: Timing,
    /// Time from claimed to consumed.
    pub run: Timing,
    /// Jobs trashed that day.
    pub failed: u64,
    /// Failed attempts followed by another try, and trashed jobs put back
    /// by retry, that day.
    pub retried: u64,
}

/// One day in ms.
pub(crate) const DAY_MS: i64 = 86_400_000;

/// The order of histogram buckets: seconds, minutes, hours, days.
pub(crate) fn bucket_rank(b: &str) -> (u8, u32) {
    let (unit, n) = b.split_at(b.len().min(1));
    let unit = match unit {
        "s" => 0,
        "m" => 1,
        "h" => 2,
        _ => 3,
    };
    (unit, n.parse().unwrap_or(0))
}

/// `YYYY-MM-DD` of a day number (days since the Unix epoch, UTC).
pub fn day_name(day: i64) -> String {
    let z = day + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The day number of `YYYY-MM-DD`.
pub fn parse_day(text: &str) -> Result<i64> {
    let bad = || Error::invalid(format!("day {text:?} must be YYYY-MM-DD"));
    let mut parts = text.splitn(3, '-').map(|p| p.parse::<i64>().map_err(|_| bad()));
    let (y, m, d) = (
        parts.next().ok_or_else(bad)??,
        parts.next().ok_or_else(bad)??,
        parts.next().ok_or_else(bad)??,
    );
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(bad());
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let day = era * 146_097 + doe - 719_468;
    if day_name(day) != text {
        return Err(bad());
    }
    Ok(day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_round_trip() {
        assert_eq!(day_name(0), "1970-01-01");
        assert_eq!(parse_day("2026-11-22").unwrap(), 20_779);
        for d in [0, 59, 60, 11_016, 20_779, 30_000] {
            assert_eq!(parse_day(&day_name(d)).unwrap(), d);
        }
        assert!(parse_day("2026-02-30").unwrap_err().is_invalid());
        assert!(parse_day("yesterday").is_err());
    }

    #[test]
    fn buckets_are_ordered_by_unit_then_number() {
        assert!(bucket_rank("s59") < bucket_rank("m1") && bucket_rank("h23") < bucket_rank("d1"));
    }
}
