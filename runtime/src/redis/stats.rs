//! Per-queue, per-day statistics (kept 30 days) and the event stream.
//!
//! Claims add each job's wait time (ready → claimed) and consumes its run
//! time (claimed → consumed) to the day's count, mean and variance
//! (Welford's method, in Lua) and to a histogram with qless's buckets:
//! seconds for the first minute, then minutes, hours and days. A call
//! whose samples are all 0 ms (a job handed off by the post that wrote it)
//! only counts them, in `<kind>.zero`; they are folded in here.

use std::collections::HashMap;

use futures_util::{Stream, StreamExt};

use crate::error::Result;
use crate::redis::board::RedisBoard;
use crate::redis::subscribe::every_queue;
use crate::stats::{bucket_rank, day_name, QueueStats, Timing, DAY_MS};

fn timing(raw: &HashMap<String, String>, kind: &str) -> Timing {
    let num = |f: &str| {
        raw.get(&format!("{kind}.{f}"))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Two groups: the samples in the Welford sums, and those of 0 ms
    // counted apart (mean 0, m2 0), combined as Chan et al. combine
    // partial variances.
    let (summed, zeros) = (num("count") as u64, num("zero") as u64);
    let count = summed + zeros;
    let (mean, m2) = match count {
        0 => (0.0, 0.0),
        n => {
            let (n, a, b, mean) = (n as f64, summed as f64, zeros as f64, num("mean"));
            (mean * a / n, num("m2") + mean * mean * a * b / n)
        }
    };
    let mut histogram: Vec<(String, u64)> = raw
        .iter()
        .filter_map(|(k, v)| {
            let b = k.strip_prefix(kind)?.strip_prefix(".b.")?;
            Some((b.to_owned(), v.parse().unwrap_or(0)))
        })
        .collect();
    if zeros > 0 {
        match histogram.iter_mut().find(|(b, _)| b == "s0") {
            Some((_, n)) => *n += zeros,
            None => histogram.push(("s0".to_owned(), zeros)),
        }
    }
    histogram.sort_by_key(|(b, _)| bucket_rank(b));
    Timing {
        count,
        mean_ms: mean,
        std_dev_ms: if count > 0 {
            (m2 / count as f64).sqrt()
        } else {
            0.0
        },
        histogram,
    }
}

impl RedisBoard {
    /// Statistics of `queue` for `day` (days since the epoch, UTC; `None`
    /// is today on the server's clock).
    pub async fn stats(&self, queue: &str, day: Option<i64>) -> Result<QueueStats> {
        let keys = self.keys(queue)?;
        let day = match day {
            Some(d) => d,
            None => self.server_ms().await?.div_euclid(DAY_MS),
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
    /// with `tracked_only` only tracked jobs' events (`<prefix>:ev:*`). On
    /// a cluster, every queue's own channels (`<namespace>:log`,
    /// `<namespace>:ev`), queues posted to later included. Each item is the
    /// event's JSON object (`event`, `queue`, `job`, `at` and details).
    pub async fn events(&self, tracked_only: bool) -> Result<impl Stream<Item = serde_json::Value>> {
        let messages = if self.conn.is_cluster() {
            let channel = if tracked_only { ":ev" } else { ":log" };
            every_queue(self, move |keys| format!("{}{channel}", keys.events))
                .await?
                .boxed()
        } else {
            let mut pubsub = self.conn.pubsub().await?;
            let prefix = &self.options().prefix;
            if tracked_only {
                pubsub.psubscribe(&format!("{prefix}:ev:*")).await?;
            } else {
                pubsub.subscribe(&format!("{prefix}:log")).await?;
            }
            pubsub.into_stream().boxed()
        };
        Ok(messages.filter_map(|msg| async move {
            let text: String = msg.get_payload().ok()?;
            serde_json::from_str(&text).ok()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stats hash as HGETALL returns it.
    fn hash(fields: &[(&str, &str)]) -> HashMap<String, String> {
        fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn timing_reads_welford_fields_and_orders_buckets() {
        let raw = hash(&[
            ("wait.count", "4"),
            ("wait.mean", "1500"),
            ("wait.m2", "4000000"),
            ("wait.b.h1", "1"),
            ("wait.b.s1", "2"),
            ("wait.b.m3", "1"),
            ("run.count", "9"),
        ]);
        let t = timing(&raw, "wait");
        assert_eq!(t.count, 4);
        assert_eq!(t.std_dev_ms, 1000.0);
        let order: Vec<&str> = t.histogram.iter().map(|(b, _)| b.as_str()).collect();
        assert_eq!(order, ["s1", "m3", "h1"]);
    }

    /// Samples 10, 10 in the sums and two of 0 ms counted apart read as
    /// 10, 10, 0, 0: mean 5, standard deviation 5, all in s0.
    #[test]
    fn samples_of_0_ms_counted_apart_are_folded_in() {
        let raw = hash(&[
            ("run.count", "2"),
            ("run.mean", "10"),
            ("run.m2", "0"),
            ("run.b.s0", "2"),
            ("run.zero", "2"),
            ("wait.zero", "3"),
        ]);
        let run = timing(&raw, "run");
        assert_eq!((run.count, run.mean_ms, run.std_dev_ms), (4, 5.0, 5.0));
        assert_eq!(run.histogram, [("s0".to_owned(), 4)]);
        let wait = timing(&raw, "wait");
        assert_eq!((wait.count, wait.mean_ms, wait.std_dev_ms), (3, 0.0, 0.0));
        assert_eq!(wait.histogram, [("s0".to_owned(), 3)]);
    }
}
