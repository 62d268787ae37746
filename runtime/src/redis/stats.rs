//! Per-queue, per-day statistics (kept 30 days) and the event stream.
//!
//! Claims add each job's wait time (ready → claimed) and consumes its run
//! time (claimed → consumed) to the day's count, mean and variance
//! (Welford's method, in Lua) and to a histogram with qless's buckets:
//! seconds for the first minute, then minutes, hours and days.

use std::collections::HashMap;

use futures_util::{Stream, StreamExt};

use crate::error::{Error, Result};
use crate::redis::board::RedisBoard;

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

/// Bucket order of the histogram.
fn bucket_rank(b: &str) -> (u8, u32) {
    let (unit, n) = b.split_at(b.len().min(1));
    let unit = match unit {
        "s" => 0,
        "m" => 1,
        "h" => 2,
        _ => 3,
    };
    (unit, n.parse().unwrap_or(0))
}

fn timing(raw: &HashMap<String, String>, kind: &str) -> Timing {
    let num = |f: &str| {
        raw.get(&format!("{kind}.{f}"))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let count = num("count") as u64;
    let mut histogram: Vec<(String, u64)> = raw
        .iter()
        .filter_map(|(k, v)| {
            let b = k.strip_prefix(kind)?.strip_prefix(".b.")?;
            Some((b.to_owned(), v.parse().unwrap_or(0)))
        })
        .collect();
    histogram.sort_by_key(|(b, _)| bucket_rank(b));
    Timing {
        count,
        mean_ms: num("mean"),
        std_dev_ms: if count > 0 {
            (num("m2") / count as f64).sqrt()
        } else {
            0.0
        },
        histogram,
    }
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

impl RedisBoard {
    /// Statistics of `queue` for `day` (days since the epoch, UTC; `None`
    /// is today on the server's clock).
    pub async fn stats(&self, queue: &str, day: Option<i64>) -> Result<QueueStats> {
        let keys = self.keys(queue)?;
        let day = match day {
            Some(d) => d,
            None => self.server_ms().await?.div_euclid(86_400_000),
        };
        let raw: HashMap<String, String> = self
            .conn
            .query(redis::cmd("HGETALL").arg(keys.stats(day)))
            .await?;
        let count = |f: &str| raw.get(f).and_then(|v| v.parse().ok()).unwrap_or(0);
        Ok(QueueStats {
            queue: queue.to_owned(),
            day: day_name(day),
            wait: timing(&raw, "wait"),
            run: timing(&raw, "run"),
            failed: count("failed"),
            retried: count("retried"),
        })
    }

    /// The event stream: every event of every queue (`<prefix>:log`), or
    /// with `tracked_only` only tracked jobs' events (`<prefix>:ev:*`).
    /// Each item is the event's JSON object (`event`, `queue`, `job`, `at`
    /// and details).
    pub async fn events(&self, tracked_only: bool) -> Result<impl Stream<Item = serde_json::Value>> {
        let mut pubsub = self.conn.client.get_async_pubsub().await?;
        let prefix = &self.options().prefix;
        if tracked_only {
            pubsub.psubscribe(format!("{prefix}:ev:*")).await?;
        } else {
            pubsub.subscribe(format!("{prefix}:log")).await?;
        }
        Ok(pubsub.into_on_message().filter_map(|msg| async move {
            let text: String = msg.get_payload().ok()?;
            serde_json::from_str(&text).ok()
        }))
    }
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
    fn timing_reads_welford_fields_and_orders_buckets() {
        let raw: HashMap<String, String> = [
            ("wait.count", "4"),
            ("wait.mean", "1500"),
            ("wait.m2", "4000000"),
            ("wait.b.h1", "1"),
            ("wait.b.s1", "2"),
            ("wait.b.m3", "1"),
            ("run.count", "9"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let t = timing(&raw, "wait");
        assert_eq!(t.count, 4);
        assert_eq!(t.std_dev_ms, 1000.0);
        let order: Vec<&str> = t.histogram.iter().map(|(b, _)| b.as_str()).collect();
        assert_eq!(order, ["s1", "m3", "h1"]);
    }
}
