//! The cancels of a chaos run: a steady trickle of `jobworker cancel`
//! calls while the faults go on, one job per call (a call with several
//! ids is all or nothing: a refusal would hide which job had finished).
//!
//! The plan is drawn before the jobs are posted ([`CancelPlan`]):
//!
//! - a third of the jobs to cancel are posted **slow** (their handler
//!   sleeps [`SLOW_JOB_MS`](crate::chaos::config::SLOW_JOB_MS)) and are
//!   cancelled as soon as the run log shows a run of theirs in flight on a
//!   live worker: the cancel lands while they run;
//! - a third are **racing**: an ordinary job (5–30 ms) drawn among those
//!   in flight, whose cancel races its end and consume (most lose: the CLI
//!   takes longer than the job; the others are cancelled as their handler
//!   ends, and their consume must be refused);
//! - the rest are **waiting**: drawn among the jobs with no run yet.
//!
//! Racing and waiting jobs are drawn at a steady pace, each when the jobs
//! that succeeded reach its share of the run. One more job is cancelled
//! when a worker is frozen: one of its runs in flight, held by a worker
//! that cannot hear of it until it is let go. The calls run in the
//! background (the run goes on ticking), at most [`MAX_CALLS`] at once
//! (the frozen worker's job aside), never while the board server is down
//! (the server's kill waits until none is in flight: a call that met it
//! would have no answer); each answer is recorded in [`Events::cancels`].

use std::collections::{HashSet, VecDeque};
use std::io::{self, Read};
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use jobworker::JobId;

use crate::chaos::events::{now_us, Cancel, CancelAnswer, Events};
use crate::chaos::rng::Rng;
use crate::chaos::runs::Runs;
use crate::chaos::supervisor::Launch;

/// `jobworker cancel` calls in flight at once.
pub const MAX_CALLS: usize = 4;
/// How long the calls still in flight at the end of the run may take.
pub const LAST_CALLS_WAIT: Duration = Duration::from_secs(30);

/// A cancel drawn during the run, when its share of the jobs succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draw {
    /// A job with no run yet.
    Waiting,
    /// An ordinary job with a run in flight (waits for one).
    Racing,
}

impl Draw {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Draw::Waiting => "waiting",
            Draw::Racing => "racing",
        }
    }
}

/// Which posted jobs are cancelled, drawn from the run's seed.
#[derive(Debug, Clone, Default)]
pub struct CancelPlan {
    /// Indices (in post order) of the slow jobs, cancelled while they run.
    pub slow: HashSet<usize>,
    /// The cancels drawn during the run, in order.
    pub draws: Vec<Draw>,
}

impl CancelPlan {
    /// `cancels` of `jobs` jobs: a third (rounded down) slow, a third
    /// racing, the rest waiting; the draws in a random order.
    pub fn new(jobs: usize, cancels: usize, rng: &mut Rng) -> CancelPlan {
        let third = (cancels / 3).min(jobs);
        let mut slow = HashSet::with_capacity(third);
        while slow.len() < third {
            slow.insert(rng.index(jobs));
        }
        let mut draws = vec![Draw::Racing; third];
        draws.resize(cancels - third, Draw::Waiting);
        for i in (1..draws.len()).rev() {
            draws.swap(i, rng.index(i + 1));
        }
        CancelPlan { slow, draws }
    }
}

/// A `jobworker cancel` in flight.
#[derive(Debug)]
struct Call {
    id: String,
    running: bool,
    asked_us: u64,
    child: Child,
}

/// What the canceller needs to see of the run on a tick.
pub struct View<'a> {
    /// The run log.
    pub runs: &'a Runs,
    /// The live workers.
    pub workers: &'a [u32],
    /// Every posted job.
    pub ids: &'a [JobId],
    /// Jobs whose handler returned `ok` so far.
    pub ok: usize,
    /// Every job has succeeded or been cancelled: no job is left to draw.
    pub done: bool,
}

/// The cancels still to make, and the calls in flight.
#[derive(Debug, Default)]
pub struct Canceller {
    /// Slow jobs not asked yet.
    slow: Vec<String>,
    /// The draws still to make, each with the success count at which it
    /// is due, in order.
    draws: VecDeque<(usize, Draw)>,
    /// Every job asked (or to ask): a drawn job is one of the others.
    chosen: HashSet<String>,
    calls: Vec<Call>,
    /// Slow jobs planned.
    slow_planned: usize,
}

impl Canceller {
    /// The canceller of `plan` over the posted `ids` (in post order).
    pub fn new(plan: &CancelPlan, ids: &[JobId]) -> Canceller {
        let mut slow: Vec<String> = plan.slow.iter().map(|&i| ids[i].to_string()).collect();
        slow.sort();
        let shares = plan.draws.len() + 1;
        Canceller {
            chosen: slow.iter().cloned().collect(),
            slow_planned: slow.len(),
            slow,
            draws: (1..shares)
                .map(|i| ids.len() * i / shares)
                .zip(plan.draws.iter().copied())
                .collect(),
            calls: Vec::new(),
        }
    }

    /// Calls not answered yet.
    pub fn calls_in_flight(&self) -> usize {
        self.calls.len()
    }

    /// Nothing left to ask, and no call in flight.
    pub fn is_idle(&self) -> bool {
        self.slow.is_empty() && self.draws.is_empty() && self.calls.is_empty()
    }

    /// One tick: records the calls that ended, then (unless `hold`: the
    /// server is down, or about to be) asks the cancels that are due.
    pub fn tick(
        &mut self,
        view: &View<'_>,
        hold: bool,
        launch: &Launch,
        queue: &str,
        rng: &mut Rng,
        events: &mut Events,
    ) -> io::Result<()> {
        self.collect(events)?;
        if hold {
            return Ok(());
        }
        for id in self.slow_due(view) {
            if self.calls.len() >= MAX_CALLS {
                break;
            }
            let running = in_flight(view).any(|r| r == id);
            self.slow.retain(|s| *s != id);
            self.ask(launch, queue, id, running)?;
        }
        if self.calls.len() < MAX_CALLS {
            self.draw(view, launch, queue, rng, events)?;
        }
        Ok(())
    }

    /// Asks the next draw if it is due: a waiting job (none left: recorded
    /// as missed), or a racing one (none in flight: tried again next tick).
    fn draw(
        &mut self,
        view: &View<'_>,
        launch: &Launch,
        queue: &str,
        rng: &mut Rng,
        events: &mut Events,
    ) -> io::Result<()> {
        let Some(&(due, draw)) = self.draws.front() else {
            return Ok(());
        };
        if view.done {
            self.draws.pop_front();
            events.missed.push(format!(
                "cancel of a {} job: every job was done first",
                draw.name()
            ));
            return Ok(());
        }
        if view.ok < due {
            return Ok(());
        }
        let candidates: Vec<&str> = match draw {
            Draw::Waiting => view
                .ids
                .iter()
                .map(JobId::as_str)
                .filter(|id| !view.runs.ran(id))
                .collect(),
            Draw::Racing => in_flight(view).collect(),
        };
        let free: Vec<&str> = candidates
            .into_iter()
            .filter(|id| !self.chosen.contains(*id))
            .collect();
        if free.is_empty() {
            if draw == Draw::Waiting {
                self.draws.pop_front();
                events
                    .missed
                    .push("cancel of a waiting job: every job had run when it was due".into());
            }
            return Ok(());
        }
        let id = free[rng.index(free.len())].to_owned();
        self.draws.pop_front();
        self.chosen.insert(id.clone());
        self.ask(launch, queue, id, draw == Draw::Racing)
    }

    /// Cancels one of `held` (jobs with a run in flight on the worker just
    /// frozen) not chosen before, if any.
    pub fn cancel_frozen(
        &mut self,
        held: &[String],
        launch: &Launch,
        queue: &str,
        rng: &mut Rng,
    ) -> io::Result<()> {
        let free: Vec<&String> = held.iter().filter(|id| !self.chosen.contains(*id)).collect();
        if free.is_empty() {
            return Ok(());
        }
        let id = free[rng.index(free.len())].clone();
        self.chosen.insert(id.clone());
        self.ask(launch, queue, id, true)
    }

    /// At the end of the run: waits for the calls in flight (killing those
    /// that outlast [`LAST_CALLS_WAIT`]), records the cancels that never
    /// happened, and whether one reached a running job.
    pub fn finish(&mut self, events: &mut Events) -> io::Result<()> {
        let deadline = Instant::now() + LAST_CALLS_WAIT;
        while !self.calls.is_empty() && Instant::now() < deadline {
            self.collect(events)?;
            std::thread::sleep(Duration::from_millis(10));
        }
        for mut call in self.calls.drain(..) {
            // Our own child, by its handle: it outlasted its wait.
            call.child.kill()?;
            call.child.wait()?;
            events.cancels.push(Cancel {
                answer: CancelAnswer::Failed(format!("no answer within {LAST_CALLS_WAIT:?}: killed")),
                id: call.id,
                running: call.running,
                asked_us: call.asked_us,
                answered_us: now_us(),
            });
        }
        for id in self.slow.drain(..) {
            events
                .missed
                .push(format!("cancel of slow job {id}: no run of it was seen"));
        }
        for (_, draw) in self.draws.drain(..) {
            events
                .missed
                .push(format!("cancel of a {} job: the run ended first", draw.name()));
        }
        let hit_running = events
            .cancels
            .iter()
            .any(|c| c.running && c.answer == CancelAnswer::Cancelled);
        if self.slow_planned > 0 && !hit_running {
            events
                .missed
                .push("cancel of a running job: none was cancelled while it ran".into());
        }
        Ok(())
    }

    /// Slow jobs to ask now: those with a run in flight, and those whose
    /// run ended `ok` before one was seen in flight (a lost race: asked
    /// anyway, as not running).
    fn slow_due(&self, view: &View<'_>) -> Vec<String> {
        let flying: HashSet<&str> = in_flight(view).collect();
        self.slow
            .iter()
            .filter(|id| flying.contains(id.as_str()) || view.runs.ended_ok(id))
            .cloned()
            .collect()
    }

    /// Starts the cancel of `id`.
    fn ask(&mut self, launch: &Launch, queue: &str, id: String, running: bool) -> io::Result<()> {
        let asked_us = now_us();
        let child = launch.cancel(&id, queue)?;
        self.calls.push(Call {
            id,
            running,
            asked_us,
            child,
        });
        Ok(())
    }

    /// Records the calls that have exited.
    fn collect(&mut self, events: &mut Events) -> io::Result<()> {
        let mut i = 0;
        while i < self.calls.len() {
            let Some(status) = self.calls[i].child.try_wait()? else {
                i += 1;
                continue;
            };
            let mut call = self.calls.swap_remove(i);
            events.cancels.push(Cancel {
                answer: answer(status, &mut call.child),
                id: call.id,
                running: call.running,
                asked_us: call.asked_us,
                answered_us: now_us(),
            });
        }
        Ok(())
    }
}

/// Jobs with a run in flight on a live worker.
fn in_flight<'v>(view: &'v View<'_>) -> impl Iterator<Item = &'v str> {
    view.runs
        .open_runs()
        .filter(|r| view.workers.contains(&r.pid))
        .map(|r| r.id.as_str())
}

/// What an exited `jobworker cancel` answered, by its status and output.
fn answer(status: ExitStatus, child: &mut Child) -> CancelAnswer {
    let said = format!(
        "{} {}",
        read_out(child.stdout.take()),
        read_out(child.stderr.take())
    );
    let said = said.trim();
    match status.code() {
        Some(0) => CancelAnswer::Cancelled,
        Some(jobworker::cli::EXIT_REFUSED) => CancelAnswer::Refused(said.to_owned()),
        _ => CancelAnswer::Failed(format!("{status}: {said}")),
    }
}

/// What an exited child wrote to `pipe` (its first few KB), trimmed.
fn read_out(pipe: Option<impl Read>) -> String {
    let mut text = String::new();
    if let Some(pipe) = pipe {
        let _ = pipe.take(4_096).read_to_string(&mut text);
    }
    text.trim().to_owned()
}
