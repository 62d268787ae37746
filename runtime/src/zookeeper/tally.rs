//! What the statistics are made of on ZooKeeper: a *tally entry* per ended
//! claim, and a *day summary* the entries are folded into.
//!
//! - A tally entry is an empty sequential znode under `R/Q/.jw/tally`,
//!   created in the transaction that ends the claim, whose name carries
//!   what the statistics need: `<at>.<wait>.<run>.<counted>-<sequence>`
//!   (ms; `_` for none). Creating one contends with nothing, so racing
//!   workers never retry for the statistics' sake.
//! - A day summary (`R/Q/.jw/stats/<day>`, JSON) holds a day's wait and run
//!   times (count, sum, sum of squares, qless's histogram), failures,
//!   retries and per-minute counts. Folding moves entries into their day's
//!   summary in one transaction: the summary written at the version read
//!   and the entries deleted, so racing folders count each entry once
//!   (`stats.rs`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::board::Minute;
use crate::stats::{bucket_rank, day_name, QueueStats, Timing, DAY_MS};

/// Days of statistics kept, as on Redis.
pub(crate) const DAYS_KEPT: i64 = 30;

/// What an ended claim counts besides its times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    /// Nothing (released, cancelled).
    Nothing,
    /// A completed job (the minute's `completed`).
    Completed,
    /// A trashed job (`failed`, and the minute's `failed`).
    Failed,
    /// A failed try followed by another, or a job retried out of the trash
    /// (`retried`).
    Retried,
}

impl Counted {
    fn code(self) -> char {
        match self {
            Counted::Nothing => 'n',
            Counted::Completed => 'c',
            Counted::Failed => 'f',
            Counted::Retried => 'r',
        }
    }

    fn of(code: &str) -> Option<Counted> {
        Some(match code {
            "n" => Counted::Nothing,
            "c" => Counted::Completed,
            "f" => Counted::Failed,
            "r" => Counted::Retried,
            _ => return None,
        })
    }
}

/// One tally entry: what one ended claim (or one retry out of the trash)
/// adds to the statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    /// When (ms, server clock): its day and minute.
    pub at_ms: i64,
    /// Ready → claimed, for an ended claim.
    pub wait_ms: Option<i64>,
    /// Claimed → consumed, for a completed job.
    pub run_ms: Option<i64>,
    /// What else it counts.
    pub counted: Counted,
}

impl Tally {
    /// The end of a claim made at `claimed_ms` of a job ready since
    /// `ready_ms`, at `now_ms`; a completed job's run time is counted too.
    pub(crate) fn ended(ready_ms: i64, claimed_ms: i64, now_ms: i64, counted: Counted) -> Tally {
        Tally {
            at_ms: now_ms,
            wait_ms: Some((claimed_ms - ready_ms).max(0)),
            run_ms: (counted == Counted::Completed).then(|| (now_ms - claimed_ms).max(0)),
            counted,
        }
    }

    /// A job put back out of the trash at `now_ms`.
    pub(crate) fn retried(now_ms: i64) -> Tally {
        Tally {
            at_ms: now_ms,
            wait_ms: None,
            run_ms: None,
            counted: Counted::Retried,
        }
    }

    /// The entry's name before ZooKeeper appends its sequence number.
    pub(crate) fn prefix(&self) -> String {
        let ms = |v: Option<i64>| v.map_or("_".to_owned(), |v| v.to_string());
        format!(
            "{}.{}.{}.{}-",
            self.at_ms,
            ms(self.wait_ms),
            ms(self.run_ms),
            self.counted.code()
        )
    }

    /// The tally of an entry's name; `None` for a name that is not one.
    pub(crate) fn parse(name: &str) -> Option<Tally> {
        let (fields, _sequence) = name.rsplit_once('-')?;
        let mut parts = fields.split('.');
        let mut ms = || -> Option<Option<i64>> {
            match parts.next()? {
                "_" => Some(None),
                v => v.parse().ok().map(Some),
            }
        };
        let (at_ms, wait_ms, run_ms) = (ms()??, ms()?, ms()?);
        let counted = Counted::of(parts.next()?)?;
        Some(Tally {
            at_ms,
            wait_ms,
            run_ms,
            counted,
        })
    }

    /// Its day (days since the epoch, UTC).
    pub(crate) fn day(&self) -> i64 {
        self.at_ms.div_euclid(DAY_MS)
    }
}

/// qless's histogram bucket (as `lua/lib/stats.lua` has it) of a duration in ms: seconds for the first
/// minute, then minutes, hours and days (`d7` holds a week and more).
fn bucket_of(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("s{s}"),
        60..=3_599 => format!("m{}", s / 60),
        3_600..=86_399 => format!("h{}", s / 3_600),
        _ => format!("d{}", (s / 86_400).min(7)),
    }
}

/// Durations of one kind in one day.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct Times {
    count: u64,
    sum: f64,
    sumsq: f64,
    /// Histogram bucket → count.
    buckets: BTreeMap<String, u64>,
}

impl Times {
    fn add(&mut self, ms: i64) {
        let x = ms as f64;
        self.count += 1;
        self.sum += x;
        self.sumsq += x * x;
        *self.buckets.entry(bucket_of(ms)).or_default() += 1;
    }

    fn timing(&self) -> Timing {
        let n = self.count as f64;
        let mean = if self.count > 0 { self.sum / n } else { 0.0 };
        let variance = if self.count > 0 {
            (self.sumsq / n - mean * mean).max(0.0)
        } else {
            0.0
        };
        let mut histogram: Vec<(String, u64)> = self.buckets.iter().map(|(b, n)| (b.clone(), *n)).collect();
        histogram.sort_by_key(|(b, _)| bucket_rank(b));
        Timing {
            count: self.count,
            mean_ms: mean,
            std_dev_ms: variance.sqrt(),
            histogram,
        }
    }
}

/// One queue's statistics of one day (`R/Q/.jw/stats/<day>`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Summary {
    wait: Times,
    run: Times,
    failed: u64,
    retried: u64,
    /// Minute (since the epoch) → (completed, failed).
    minutes: BTreeMap<i64, (u64, u64)>,
}

impl Summary {
    /// The summary in `data`; an unreadable one counts as empty (with a
    /// warning), so that it blocks neither reads nor folds.
    pub(crate) fn parse(data: &[u8], queue: &str) -> Summary {
        serde_json::from_slice(data).unwrap_or_else(|e| {
            tracing::warn!(queue, error = %e, "a day's statistics are not readable; counting from zero");
            Summary::default()
        })
    }

    /// The summary as stored.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Adds one entry.
    pub(crate) fn add(&mut self, t: &Tally) {
        if let Some(w) = t.wait_ms {
            self.wait.add(w);
        }
        if let Some(r) = t.run_ms {
            self.run.add(r);
        }
        let minute = self.minutes.entry(t.at_ms.div_euclid(60_000)).or_default();
        match t.counted {
            Counted::Completed => minute.0 += 1,
            Counted::Failed => {
                minute.1 += 1;
                self.failed += 1;
            }
            Counted::Retried => self.retried += 1,
            Counted::Nothing => {}
        }
        if minute == &(0, 0) {
            self.minutes.remove(&t.at_ms.div_euclid(60_000));
        }
    }

    /// The day's statistics as the boards report them.
    pub(crate) fn stats(&self, queue: &str, day: i64) -> QueueStats {
        QueueStats {
            queue: queue.to_owned(),
            day: day_name(day),
            wait: self.wait.timing(),
            run: self.run.timing(),
            failed: self.failed,
            retried: self.retried,
        }
    }

    /// The counts of minute `m` (since the epoch).
    pub(crate) fn minute(&self, m: i64) -> Minute {
        let (completed, failed) = self.minutes.get(&m).copied().unwrap_or_default();
        Minute {
            at_ms: m * 60_000,
            completed,
            failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_qless() {
        let names: Vec<String> = [
            0,
            999,
            59_999,
            60_000,
            3_599_999,
            3_600_000,
            86_400_000,
            999_999_999,
        ]
        .into_iter()
        .map(bucket_of)
        .collect();
        assert_eq!(names, ["s0", "s0", "s59", "m1", "m59", "h1", "d1", "d7"]);
    }

    #[test]
    fn entry_names_round_trip() {
        let t = Tally::ended(1_000, 1_400, 1_650, Counted::Completed);
        assert_eq!(t.prefix(), "1650.400.250.c-");
        assert_eq!(Tally::parse(&format!("{}0000000042", t.prefix())), Some(t));
        let r = Tally::retried(7);
        assert_eq!(Tally::parse(&format!("{}0000000001", r.prefix())), Some(r));
        for bad in ["", "x", "1.2.3.c", "1.2.3.z-0000000001", "a.2.3.c-0000000001"] {
            assert_eq!(Tally::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_summary_counts_like_redis() {
        let mut s = Summary::default();
        for wait in [300, 450, 600] {
            s.add(&Tally::ended(0, wait, wait + 150, Counted::Completed));
        }
        s.add(&Tally::ended(0, 100, 200, Counted::Retried));
        s.add(&Tally::ended(0, 100, 61_000, Counted::Failed));
        let stats = s.stats("q", 0);
        assert_eq!((stats.wait.count, stats.run.count), (5, 3));
        assert_eq!((stats.failed, stats.retried), (1, 1));
        assert_eq!(stats.run.mean_ms, 150.0);
        assert_eq!(stats.run.std_dev_ms, 0.0);
        assert_eq!(stats.wait.histogram, [("s0".to_owned(), 5)]);
        assert_eq!((s.minute(0).completed, s.minute(1).failed), (3, 1));
        let back = Summary::parse(&s.to_bytes(), "q");
        assert_eq!(back, s);
        assert_eq!(Summary::parse(b"not json", "q"), Summary::default());
    }
}
