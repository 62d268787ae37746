//! Writing a [`Snapshot`] as metric families (a prometheus-client
//! [`Collector`]). A family with no sample (what the backend does not
//! keep) is left out whole, descriptor included.

use std::collections::HashMap;
use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, EncodeMetric, NoLabelSet,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::buckets::histogram;
use super::snapshot::{QueueSnapshot, Snapshot};
use crate::board::STATES;
use crate::stats::{QueueStats, Timing};

/// The `queue` label.
type QueueLabel<'a> = [(&'static str, &'a str); 1];

/// The `queue` label and one more.
type TwoLabels<'a> = [(&'static str, &'a str); 2];

/// A count of the daily statistics: its name, what it counts, and where
/// it is in a day's statistics.
type DailyCount = (&'static str, &'static str, fn(&QueueStats) -> u64);

/// A timing of the daily statistics, likewise.
type DailyTiming = (&'static str, &'static str, fn(&QueueStats) -> &Timing);

/// What the daily figures' help texts end with.
const DAILY: &str = "today (UTC), from the board's daily statistics: resets at 00:00 UTC, \
                     which rate() and increase() treat as a counter reset";

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        self.encode_queues(&mut enc)?;
        self.encode_daily(&mut enc)?;
        self.encode_trash(&mut enc)?;
        self.encode_workers(&mut enc)
    }
}

impl Snapshot {
    /// Each queue's jobs by state, settings and oldest ready job.
    fn encode_queues(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let known = || {
            self.queues
                .iter()
                .filter_map(|q| Some((q.name.as_str(), q.overview.as_ref()?)))
        };
        let jobs: Vec<(TwoLabels, u64)> = known()
            .flat_map(|(q, o)| {
                STATES
                    .iter()
                    .filter_map(move |s| Some(([("queue", q), ("state", s.as_str())], o.counts.get(*s)?)))
            })
            .collect();
        gauges(
            enc,
            "jobworker_jobs",
            "Jobs of the queue in each state",
            None,
            &jobs,
        )?;
        let settings: Vec<_> = known().filter_map(|(q, o)| Some((q, o.settings?))).collect();
        let paused: Vec<(QueueLabel, u64)> = settings
            .iter()
            .map(|(q, s)| ([("queue", *q)], u64::from(s.paused)))
            .collect();
        gauges(
            enc,
            "jobworker_queue_paused",
            "1 while the queue is paused, else 0",
            None,
            &paused,
        )?;
        let limits: Vec<(QueueLabel, u64)> = settings
            .iter()
            .filter_map(|(q, s)| Some(([("queue", *q)], u64::from(s.limit?))))
            .collect();
        let help = "At most this many jobs of the queue are claimed at once (only when a limit is set)";
        gauges(enc, "jobworker_queue_limit", help, None, &limits)?;
        let ages: Vec<(QueueLabel, f64)> = known()
            .map(|(q, o)| {
                let ms = o.oldest_ready_ms.map_or(0, |at| (self.now_ms - at).max(0));
                ([("queue", q)], ms as f64 / 1000.0)
            })
            .collect();
        let help = "How long the queue's oldest ready job has waited (server clock; 0 when none is ready)";
        gauges(
            enc,
            "jobworker_oldest_ready_age",
            help,
            Some(&Unit::Seconds),
            &ages,
        )
    }

    /// Today's counts and wait and run times.
    fn encode_daily(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let stats: Vec<(&str, &QueueStats)> = self
            .queues
            .iter()
            .filter_map(|q| Some((q.name.as_str(), q.stats.as_ref()?)))
            .collect();
        let counters: [DailyCount; 3] = [
            ("jobworker_jobs_completed", "Jobs of the queue consumed", |s| {
                s.run.count
            }),
            ("jobworker_jobs_failed", "Jobs of the queue trashed", |s| s.failed),
            (
                "jobworker_jobs_retried",
                "Failed tries of the queue's jobs retried, and trashed jobs put back,",
                |s| s.retried,
            ),
        ];
        for (name, what, value) in counters {
            let samples: Vec<(QueueLabel, u64)> =
                stats.iter().map(|(q, s)| ([("queue", *q)], value(s))).collect();
            counter_family(enc, name, &format!("{what} {DAILY}"), &samples)?;
        }
        let timings: [DailyTiming; 2] = [
            (
                "jobworker_wait",
                "Time the queue's jobs waited from ready to claimed",
                |s| &s.wait,
            ),
            (
                "jobworker_run",
                "Time the queue's jobs ran from claimed to consumed",
                |s| &s.run,
            ),
        ];
        for (name, what, timing) in timings {
            let samples: Vec<(&str, &Timing)> = stats.iter().map(|(q, s)| (*q, timing(s))).collect();
            histogram_family(enc, name, &format!("{what}, {DAILY}"), &samples)?;
        }
        Ok(())
    }

    /// The trash by failure group (crashes and lost leases among them).
    fn encode_trash(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let groups: Vec<(TwoLabels, u64)> = self
            .queues
            .iter()
            .filter_map(|q: &QueueSnapshot| q.failed.as_ref())
            .flatten()
            .map(|g| {
                (
                    [("queue", g.queue.as_str()), ("group", g.group.as_str())],
                    g.count,
                )
            })
            .collect();
        let help = "Jobs in the queue's trash by failure group (crashed: their worker died; \
                    stalled: their lease expired; poison-pill, timeout, error, ...)";
        gauges(enc, "jobworker_trashed_jobs", help, None, &groups)
    }

    /// The live workers: in all, by queue, and the jobs they hold.
    fn encode_workers(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let Some(workers) = &self.workers else {
            return Ok(());
        };
        let help = "Live workers on the board (heartbeat within its TTL)";
        gauge(enc, "jobworker_workers_alive", help, workers.len() as u64)?;
        let by_queue: Vec<(QueueLabel, u64)> = self
            .queues
            .iter()
            .map(|q| {
                let serving = workers.iter().filter(|w| w.queues.contains(&q.name)).count();
                ([("queue", q.name.as_str())], serving as u64)
            })
            .collect();
        let help = "Live workers serving the queue";
        gauges(enc, "jobworker_workers_alive_by_queue", help, None, &by_queue)?;
        let held: usize = workers.iter().map(|w| w.jobs.len()).sum();
        let help = "Jobs the live workers hold (per queue, read jobworker_jobs of state claimed)";
        gauge(enc, "jobworker_jobs_held", help, held as u64)
    }
}

/// One gauge without labels.
fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> fmt::Result {
    ConstGauge::new(value).encode(enc.encode_descriptor(name, help, None, MetricType::Gauge)?)
}

/// A gauge family, one sample per label set; nothing when there is none.
fn gauges<L: EncodeLabelSet, V: EncodeGaugeValue + Copy>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: &[(L, V)],
) -> fmt::Result {
    if samples.is_empty() {
        return Ok(());
    }
    let mut family = enc.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    for (labels, value) in samples {
        ConstGauge::new(*value).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

/// A counter family (`_total` is added to the name), one sample per label
/// set; nothing when there is none.
fn counter_family<L: EncodeLabelSet, V: EncodeCounterValue + Copy>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: &[(L, V)],
) -> fmt::Result {
    if samples.is_empty() {
        return Ok(());
    }
    let mut family = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in samples {
        ConstCounter::new(*value).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

/// A histogram family in seconds, one per queue; nothing when there is
/// none.
fn histogram_family(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: &[(&str, &Timing)],
) -> fmt::Result {
    if samples.is_empty() {
        return Ok(());
    }
    let mut family = enc.encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Histogram)?;
    let no_exemplars: Option<&HashMap<usize, Exemplar<NoLabelSet, f64>>> = None;
    for (queue, timing) in samples {
        let (buckets, count, sum) = histogram(timing);
        family
            .encode_family(&[("queue", *queue)])?
            .encode_histogram(sum, count, &buckets, no_exemplars)?;
    }
    Ok(())
}
