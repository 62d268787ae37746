//! The supervisor's own metrics (`--metrics-listen`): counters bumped where
//! things happen (a fork, an exit, a recovery), gauges read from its state
//! when scraped, encoded with `prometheus-client` (OpenMetrics text, which
//! Prometheus scrapes). Served from the loop by `metrics_http.rs`.

use std::sync::atomic::AtomicU64;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use nix::sys::wait::WaitStatus;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use crate::supervisor::respawn::Ending;
use crate::supervisor::run::Supervisor;
use crate::supervisor::slot::Asked;

/// The label set of `worker_exits_total`: how the worker ended.
type Why = [(&'static str, &'static str); 1];

/// The supervisor's metrics.
pub(super) struct Metrics {
    /// Every metric below, named `jobworker_supervisor_*`.
    registry: Registry,
    /// Worker processes configured (slots not retiring).
    workers: Gauge,
    /// Worker processes running now.
    alive: Gauge,
    /// Jobs the workers run now (from `in_flight.rs`).
    in_flight: Gauge,
    /// Workers gone whose leases could not be given back yet.
    pending: Gauge,
    /// Workers forked to replace one that exited.
    respawns: Counter,
    /// Workers that died by a signal or a non-zero exit nobody asked for.
    crashes: Counter,
    /// Worker exits by how they ended.
    exits: Family<Why, Counter>,
    /// Leases of dead workers given back.
    recovered: Counter,
    /// Leases of dead workers trashed (no attempt left).
    trashed: Counter,
    /// When the supervisor started, in Unix seconds.
    start: Gauge<f64, AtomicU64>,
}

impl Metrics {
    /// Every metric registered, counters at 0, the start time now.
    pub(super) fn new() -> Metrics {
        let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let m = Metrics {
            registry: Registry::with_prefix("jobworker_supervisor"),
            workers: Gauge::default(),
            alive: Gauge::default(),
            in_flight: Gauge::default(),
            pending: Gauge::default(),
            respawns: Counter::default(),
            crashes: Counter::default(),
            exits: Family::default(),
            recovered: Counter::default(),
            trashed: Counter::default(),
            start: Gauge::default(),
        };
        m.start.set(since_epoch.as_secs_f64());
        m.registered()
    }

    /// Registers every metric with its help text.
    fn registered(mut self) -> Metrics {
        let r = &mut self.registry;
        r.register("workers", "Worker processes configured", self.workers.clone());
        r.register(
            "workers_alive",
            "Worker processes running now",
            self.alive.clone(),
        );
        r.register(
            "jobs_in_flight",
            "Jobs the workers run now (each worker's count as of its last wait)",
            self.in_flight.clone(),
        );
        r.register(
            "respawns",
            "Workers forked to replace one that exited (after a crash, a kill or a restart)",
            self.respawns.clone(),
        );
        r.register(
            "worker_crashes",
            "Workers that died by a signal or a non-zero exit the supervisor did not ask for",
            self.crashes.clone(),
        );
        r.register(
            "worker_exits",
            "Worker exits by how they ended: asked (to stop, restart or retire), or on their own: crashed, killed (SIGKILL), stuck, cannot_start",
            self.exits.clone(),
        );
        r.register(
            "recovered_leases",
            "Leases of dead workers given back to their queues at once",
            self.recovered.clone(),
        );
        r.register(
            "recovered_leases_trashed",
            "Leases of dead workers whose jobs had no attempt left, trashed at once",
            self.trashed.clone(),
        );
        r.register(
            "recoveries_pending",
            "Workers gone whose leases could not be given back yet (the board unreachable)",
            self.pending.clone(),
        );
        let help = "When the supervisor started (Unix time)";
        r.register_with_unit("start_time", help, Unit::Seconds, self.start.clone());
        self
    }

    /// A worker was forked into a slot whose previous worker exited.
    pub(super) fn respawned(&self) {
        self.respawns.inc();
    }

    /// A worker exited with `status`; `asked` is what the supervisor had
    /// asked of it.
    pub(super) fn exited(&self, asked: Asked, status: &WaitStatus) {
        let why = match asked {
            Asked::Nothing => match Ending::of(status) {
                Ending::CannotStart => "cannot_start",
                Ending::Killed => "killed",
                Ending::Stuck => "stuck",
                Ending::Crashed => "crashed",
            },
            Asked::Stop | Asked::Retire | Asked::Restart => "asked",
        };
        self.exits.get_or_create(&[("how", why)]).inc();
        let failed = !matches!(status, WaitStatus::Exited(_, 0));
        if asked == Asked::Nothing && failed {
            self.crashes.inc();
        }
    }

    /// The supervisor gave back `back` leases of a dead worker and trashed
    /// `trashed`.
    pub(super) fn recovered(&self, back: usize, trashed: usize) {
        self.recovered.inc_by(back as u64);
        self.trashed.inc_by(trashed as u64);
    }
}

impl Supervisor {
    /// Slot `index`'s worker exited with `status`: counted, and its count
    /// of jobs in flight cleared.
    pub(super) fn note_exit(&mut self, index: usize, asked: Asked, status: &WaitStatus) {
        self.metrics.exited(asked, status);
        if let Some(in_flight) = &self.in_flight {
            in_flight.set(index, 0);
        }
    }

    /// The metrics text now: the gauges read from the supervisor's state,
    /// then every metric encoded.
    pub(super) fn metrics_text(&self) -> String {
        let m = &self.metrics;
        let configured = self.slots.iter().filter(|s| !s.retiring).count();
        let running: Vec<usize> = self
            .slots
            .iter()
            .filter(|s| s.pid.is_some())
            .map(|s| s.index)
            .collect();
        let jobs: usize = match &self.in_flight {
            Some(f) => running.iter().map(|&i| f.get(i)).sum(),
            None => 0,
        };
        m.workers.set(configured as i64);
        m.alive.set(running.len() as i64);
        m.in_flight.set(jobs as i64);
        m.pending.set(self.pending.len() as i64);
        let mut text = String::new();
        if let Err(e) = encode(&mut text, &m.registry) {
            tracing::warn!(error = %e, "cannot encode the metrics");
        }
        text
    }

    /// Answers the metrics clients that are ready at `now` (accepts new
    /// ones, reads their requests, drops the slow).
    pub(super) fn serve_metrics(&mut self, now: Instant) {
        if let Some(mut http) = self.http.take() {
            http.serve(now, || self.metrics_text());
            self.http = Some(http);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::Signal;
    use nix::unistd::Pid;

    const PID: Pid = Pid::from_raw(7);

    fn text(m: &Metrics) -> String {
        let mut s = String::new();
        encode(&mut s, &m.registry).unwrap();
        s
    }

    #[test]
    fn crashes_are_unasked_signals_and_non_zero_exits() {
        let m = Metrics::new();
        m.exited(Asked::Nothing, &WaitStatus::Signaled(PID, Signal::SIGKILL, false));
        m.exited(Asked::Nothing, &WaitStatus::Exited(PID, 3));
        m.exited(Asked::Nothing, &WaitStatus::Exited(PID, 0));
        m.exited(Asked::Stop, &WaitStatus::Signaled(PID, Signal::SIGKILL, false));
        m.exited(Asked::Restart, &WaitStatus::Exited(PID, 0));
        m.respawned();
        m.recovered(2, 1);
        assert_eq!(m.crashes.get(), 2);
        let t = text(&m);
        for line in [
            "jobworker_supervisor_worker_crashes_total 2",
            "jobworker_supervisor_respawns_total 1",
            "jobworker_supervisor_worker_exits_total{how=\"killed\"} 1",
            "jobworker_supervisor_worker_exits_total{how=\"crashed\"} 2",
            "jobworker_supervisor_worker_exits_total{how=\"asked\"} 2",
            "jobworker_supervisor_recovered_leases_total 2",
            "jobworker_supervisor_recovered_leases_trashed_total 1",
            "# TYPE jobworker_supervisor_start_time_seconds gauge",
        ] {
            assert!(t.lines().any(|l| l == line), "{line:?} missing from\n{t}");
        }
        assert!(t.ends_with("# EOF\n"), "{t}");
    }
}
