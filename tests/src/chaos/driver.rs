//! The chaos run itself: posts the jobs, runs the real supervisor over
//! them, injects the faults while the jobs run, lets the board settle,
//! stops the supervisor, and gathers what the report needs.
//!
//! Everything happens on the calling thread (the servers it starts die
//! with it), ticking every [`TICK`]: read the run log, find new workers
//! and exits, restart a supervisor that exited on its own (it is recorded
//! as a failure), end a freeze that is due, kill a worker when the kill
//! timer fires, start and collect the cancels that are due (see
//! [`cancels`](crate::chaos::cancels)), and start the next planned fault
//! when its share of the jobs has succeeded.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use jobworker::{AnyBoard, Board, JobId, NewJob};
use jobworker_examples::scripted::{Action, Script};

use crate::chaos::analysis::{analyse, Facts};
use crate::chaos::cancels::{CancelPlan, Canceller, View};
use crate::chaos::config::{
    Backend, ChaosConfig, JOB_MAX_ATTEMPTS, PAUSE_FOR, SERVER_DOWN, SLOW_JOB_MS, SUPERVISOR_GRACE,
};
use crate::chaos::events::{now_us, Events, Freeze, Outage};
use crate::chaos::evidence;
use crate::chaos::faults::{Fault, PLAN};
use crate::chaos::report::Report;
use crate::chaos::rng::Rng;
use crate::chaos::runs::Runs;
use crate::chaos::server::Server;
use crate::chaos::supervisor::{Launch, Supervisor};
use crate::chaos::verify;

/// The queue the jobs go to.
pub const QUEUE: &str = "chaos";
/// How often the run looks at its processes and the run log.
pub const TICK: Duration = Duration::from_millis(10);
/// How often the board is asked whether every job is settled.
const SETTLE_POLL: Duration = Duration::from_millis(250);
/// Jobs posted per Redis call.
const POST_BATCH: usize = 100;
/// ZooKeeper posts in flight at once.
const POST_PARALLEL: usize = 16;
/// Extra time the final SIGTERM gets on top of the supervisor's grace.
const STOP_MARGIN: Duration = Duration::from_secs(15);

/// Runs `cfg` and reports. Errors are failures to run at all (a server
/// that does not start, a binary that cannot be spawned); what went wrong
/// with the jobs is in the report.
pub fn run(cfg: &ChaosConfig) -> io::Result<Report> {
    cfg.validate().map_err(io::Error::other)?;
    let (dir, temp) = match &cfg.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            (dir.canonicalize()?, None)
        }
        None => {
            let temp = tempfile::Builder::new().prefix("jobworker-chaos-").tempdir()?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    // A thread for the board clients' background work (pings, reconnects)
    // while this one sleeps between ticks.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let server = Server::start(cfg.backend, &dir, cfg.appendfsync, cfg.seed)?;
    let board = rt.block_on(server.spec().connect()).map_err(other)?;
    let log = dir.join("runs.log");
    let mut rng = Rng::new(cfg.seed);
    let plan = CancelPlan::new(cfg.jobs, cfg.cancels, &mut rng);
    let ids = rt
        .block_on(post_jobs(&board, cfg, &plan, &log, &mut rng))
        .map_err(other)?;
    let workdir = dir.join("work");
    std::fs::create_dir_all(&workdir)?;
    let launch = Launch {
        jobworker: cfg.jobworker.clone(),
        board_args: server.board_args(),
        args: supervisor_args(cfg, &workdir),
        log_dir: dir.clone(),
    };
    let mut chaos = Chaos {
        cfg,
        rng,
        events: Events::default(),
        runs: Runs::new(&log),
        server,
        launch,
        sup: None,
        started: 0,
        frozen: None,
        next_kill: Instant::now(),
        next_fault: 0,
        server_down: false,
        canceller: Canceller::new(&plan, &ids),
        cancels_held: false,
        ids,
    };
    let timing = chaos.run(&rt, &board)?;
    let mut report = chaos.report(&rt, &board, timing)?;
    // The servers stop here, before their directory goes.
    drop(chaos);
    report.dir = match temp {
        Some(temp) if report.passed() => {
            drop(temp);
            None
        }
        Some(temp) => Some(temp.keep()),
        None => Some(dir),
    };
    Ok(report)
}

/// How long the phases of a run took.
#[derive(Debug, Clone, Copy)]
struct Timing {
    /// From the first supervisor start to the end of the faults.
    chaos: Duration,
    /// From then until every job was settled (or the timeout).
    settle: Duration,
    /// Whether every job was settled.
    settled: bool,
}

fn other(e: jobworker::Error) -> io::Error {
    io::Error::other(e.to_string())
}

/// The supervisor's flags (besides the board).
fn supervisor_args(cfg: &ChaosConfig, workdir: &Path) -> Vec<String> {
    vec![
        "--queues".into(),
        QUEUE.into(),
        "--workers".into(),
        cfg.workers.to_string(),
        "--concurrency".into(),
        cfg.concurrency.to_string(),
        "--expiry".into(),
        cfg.expiry.as_secs_f64().to_string(),
        "--grace".into(),
        SUPERVISOR_GRACE.as_secs_f64().to_string(),
        "--workdir".into(),
        workdir.display().to_string(),
        "--log-format".into(),
        "json".into(),
    ]
}

/// Posts `cfg.jobs` scripted jobs that sleep a random time (the slow jobs
/// of `plan` longer) and log their runs to `log`.
async fn post_jobs(
    board: &AnyBoard,
    cfg: &ChaosConfig,
    plan: &CancelPlan,
    log: &Path,
    rng: &mut Rng,
) -> jobworker::Result<Vec<JobId>> {
    let mut jobs = Vec::with_capacity(cfg.jobs);
    for i in 0..cfg.jobs {
        let millis = if plan.slow.contains(&i) {
            &SLOW_JOB_MS
        } else {
            &cfg.job_ms
        };
        let script = Script {
            action: Action::Sleep,
            millis: rng.in_range(millis),
            until_attempt: 0,
            count_key: None,
            sandbox_key: None,
            thread_key: None,
            next_queue: None,
            log_file: Some(log.display().to_string()),
        };
        jobs.push(
            NewJob::new("scripted")
                .args(&script)?
                .max_attempts(JOB_MAX_ATTEMPTS),
        );
    }
    let mut ids = Vec::with_capacity(cfg.jobs);
    if let Some(redis) = board.as_redis() {
        for batch in jobs.chunks(POST_BATCH) {
            for id in redis.post_many(QUEUE, batch).await? {
                ids.push(id?);
            }
        }
    } else {
        let posted: Vec<jobworker::Result<JobId>> = stream::iter(jobs)
            .map(|job| board.post(QUEUE, job))
            .buffer_unordered(POST_PARALLEL)
            .collect()
            .await;
        for id in posted {
            ids.push(id?);
        }
    }
    Ok(ids)
}

/// The state of a run in progress.
struct Chaos<'a> {
    cfg: &'a ChaosConfig,
    rng: Rng,
    events: Events,
    runs: Runs,
    server: Server,
    launch: Launch,
    sup: Option<Supervisor>,
    /// Supervisors started so far.
    started: usize,
    /// The frozen worker and when to let it go.
    frozen: Option<(u32, Instant)>,
    next_kill: Instant,
    /// Index in [`PLAN`] of the next fault.
    next_fault: usize,
    /// The board server is killed and not restarted yet.
    server_down: bool,
    /// The cancels.
    canceller: Canceller,
    /// No cancel may start (the server is about to be killed).
    cancels_held: bool,
    /// Every posted job, in post order.
    ids: Vec<JobId>,
}

impl Chaos<'_> {
    /// Starts the supervisor, injects the faults, waits for the board to
    /// settle and stops the supervisor.
    fn run(&mut self, rt: &tokio::runtime::Runtime, board: &AnyBoard) -> io::Result<Timing> {
        let began = Instant::now();
        self.start_supervisor()?;
        self.faults()?;
        self.canceller.finish(&mut self.events)?;
        let chaos = began.elapsed();
        let settled = self.settle(rt, board)?;
        let settle = began.elapsed() - chaos;
        if let Some(sup) = self.sup.take() {
            sup.stop(SUPERVISOR_GRACE + STOP_MARGIN, &mut self.events)?;
        }
        self.runs.poll()?;
        Ok(Timing {
            chaos,
            settle,
            settled,
        })
    }

    /// Asks the board, reads the evidence, analyses the runs.
    fn report(&self, rt: &tokio::runtime::Runtime, board: &AnyBoard, timing: Timing) -> io::Result<Report> {
        let expired = match self.cfg.backend {
            Backend::Redis => rt
                .block_on(evidence::from_redis_history(board, QUEUE, &self.jobs_run_again()))
                .map_err(other)?,
            Backend::ZooKeeper => evidence::from_worker_logs(&self.supervisor_logs()),
        };
        let check = rt
            .block_on(verify::check(board, QUEUE, &self.ids))
            .map_err(other)?;
        let asked: HashSet<String> = self.events.cancels.iter().map(|c| c.id.clone()).collect();
        let completed_logged = evidence::completed_in_logs(&self.supervisor_logs(), &asked);
        let analysis = analyse(&Facts {
            runs: self.runs.all(),
            events: &self.events,
            horizon: self.cfg.lease_horizon(),
            expired: &expired,
            states: &check.states,
            completed_logged: &completed_logged,
        });
        let logged: HashSet<&str> = self.runs.all().iter().map(|r| r.id.as_str()).collect();
        let completed_without_run = check.completed_ids().filter(|id| !logged.contains(id)).count();
        Ok(Report {
            backend: self.cfg.backend.name(),
            server: self.server.describe(),
            seed: self.cfg.seed,
            supervisor_args: format!(
                "{} {}",
                self.launch.board_args.join(" "),
                self.launch.args.join(" ")
            ),
            horizon: self.cfg.lease_horizon(),
            chaos_time: timing.chaos,
            settle_time: timing.settle,
            settled: timing.settled,
            events: self.events.clone(),
            analysis,
            bad_log_lines: self.runs.bad_lines().to_vec(),
            board: check,
            completed_without_run,
            dir: None,
        })
    }

    /// The logs of every supervisor started.
    fn supervisor_logs(&self) -> Vec<PathBuf> {
        (1..=self.started)
            .map(|i| self.launch.log_dir.join(format!("supervisor-{i}.log")))
            .collect()
    }

    /// Jobs with more than one run.
    fn jobs_run_again(&self) -> Vec<String> {
        let mut count: HashMap<&str, usize> = HashMap::new();
        for run in self.runs.all() {
            *count.entry(run.id.as_str()).or_default() += 1;
        }
        let mut out: Vec<String> = count
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(id, _)| id.to_owned())
            .collect();
        out.sort();
        out
    }

    fn start_supervisor(&mut self) -> io::Result<()> {
        self.started += 1;
        self.sup = Some(Supervisor::start(&self.launch, self.started, &mut self.events)?);
        Ok(())
    }

    /// The live workers of the current supervisor.
    fn workers(&self) -> Vec<u32> {
        self.sup.as_ref().map(Supervisor::workers).unwrap_or_default()
    }

    /// Sends `sig` to worker `pid` of the current supervisor.
    fn signal(&self, pid: u32, sig: libc::c_int) -> bool {
        self.sup.as_ref().is_some_and(|s| s.signal_worker(pid, sig))
    }

    /// One look at the run log and the processes; a supervisor that exited
    /// on its own is recorded and replaced (once the board server is up: a
    /// supervisor that cannot reach it exits at once).
    fn watch(&mut self) -> io::Result<()> {
        self.runs.poll()?;
        if let Some(sup) = self.sup.as_mut() {
            sup.watch(&mut self.events);
            if sup.exited_on_its_own(&mut self.events) {
                self.sup = None;
            }
        }
        if self.sup.is_none() && !self.server_down {
            self.start_supervisor()?;
        }
        Ok(())
    }

    /// Ends the freeze when it is due (or when the frozen worker died).
    fn thaw(&mut self) {
        let Some((pid, until)) = self.frozen else {
            return;
        };
        let died = self.events.worker_exits.contains_key(&pid);
        if !died && Instant::now() < until {
            return;
        }
        let resumed = !died && self.signal(pid, libc::SIGCONT);
        let at = now_us();
        if let Some(freeze) = self.events.freezes.iter_mut().rev().find(|f| f.pid == pid) {
            freeze.to_us = resumed.then_some(at);
        }
        self.frozen = None;
    }

    /// Kills a random worker that runs two jobs or more (one running a
    /// single job is left alone: three such kills would rightly make its
    /// job a poison pill); false when there is none now.
    fn kill_one(&mut self) -> bool {
        let frozen = self.frozen.map(|(pid, _)| pid);
        let victims: Vec<u32> = self
            .workers()
            .into_iter()
            .filter(|&pid| Some(pid) != frozen && self.runs.open_count(pid) >= 2)
            .collect();
        if victims.is_empty() {
            return false;
        }
        let pid = victims[self.rng.index(victims.len())];
        let open = self.runs.open_count(pid);
        let events = &mut self.events;
        self.sup
            .as_mut()
            .is_some_and(|s| s.kill_worker(pid, open, events))
    }

    /// Starts `fault`; false when it cannot happen yet.
    fn fault(&mut self, fault: Fault) -> io::Result<bool> {
        match fault {
            Fault::TreeKill => {
                let Some(sup) = self.sup.take() else {
                    return Ok(false);
                };
                let runs = &self.runs;
                sup.kill_tree(&mut self.events, |pid| runs.open_count(pid))?;
                self.start_supervisor()?;
            }
            Fault::Pause => {
                let from_us = now_us();
                self.launch.operator("pause", QUEUE)?;
                let until = Instant::now() + PAUSE_FOR;
                while Instant::now() < until {
                    self.tick()?;
                    std::thread::sleep(TICK);
                }
                self.launch.operator("resume", QUEUE)?;
                self.events.pauses.push((from_us, now_us()));
            }
            Fault::ServerRestart => {
                self.quiet_cancels()?;
                let down_us = now_us();
                self.server.kill()?;
                self.server_down = true;
                let back = Instant::now() + SERVER_DOWN;
                while Instant::now() < back {
                    self.tick()?;
                    std::thread::sleep(TICK);
                }
                self.server.restart()?;
                self.server_down = false;
                self.cancels_held = false;
                self.events.outages.push(Outage {
                    down_us,
                    up_us: now_us(),
                });
            }
            Fault::Freeze => {
                let mut best: Vec<(usize, u32)> = self
                    .workers()
                    .into_iter()
                    .map(|pid| (self.runs.open_count(pid), pid))
                    .filter(|(open, _)| *open > 0)
                    .collect();
                best.sort();
                let Some(&(_, pid)) = best.last() else {
                    return Ok(false);
                };
                let from_us = now_us();
                if !self.signal(pid, libc::SIGSTOP) {
                    return Ok(false);
                }
                self.events.freezes.push(Freeze {
                    pid,
                    from_us,
                    to_us: None,
                });
                self.frozen = Some((pid, Instant::now() + self.cfg.freeze_for()));
                self.cancel_frozen(pid)?;
            }
        }
        Ok(true)
    }

    /// One tick of watching, thawing, cancelling and killing.
    fn tick(&mut self) -> io::Result<()> {
        self.watch()?;
        self.thaw();
        self.cancel()?;
        // A kill falls at a random time: when no worker runs two jobs
        // then, it is skipped (a kill that waited for one would always hit
        // a worker right after its first claim).
        let now = Instant::now();
        if now >= self.next_kill {
            if !self.kill_one() {
                self.events.kills_skipped += 1;
            }
            let ms = self.rng.in_range(&self.cfg.kill_every_ms);
            self.next_kill = now + Duration::from_millis(ms);
        }
        Ok(())
    }

    /// Starts and collects the cancels that are due.
    fn cancel(&mut self) -> io::Result<()> {
        let workers = self.workers();
        let view = View {
            runs: &self.runs,
            workers: &workers,
            ids: &self.ids,
            ok: self.runs.ok_jobs(),
            done: self.jobs_done() >= self.ids.len(),
        };
        self.canceller.tick(
            &view,
            self.server_down || self.cancels_held,
            &self.launch,
            QUEUE,
            &mut self.rng,
            &mut self.events,
        )
    }

    /// Holds new cancels and waits (ticking) until none is in flight: a
    /// call that met the server's kill would have no answer.
    fn quiet_cancels(&mut self) -> io::Result<()> {
        self.cancels_held = true;
        while self.canceller.calls_in_flight() > 0 {
            self.tick()?;
            std::thread::sleep(TICK);
        }
        Ok(())
    }

    /// Cancels one of the jobs the frozen worker `pid` runs (unless the
    /// run cancels none).
    fn cancel_frozen(&mut self, pid: u32) -> io::Result<()> {
        if self.cfg.cancels == 0 {
            return Ok(());
        }
        let held: Vec<String> = self
            .runs
            .open_runs()
            .filter(|r| r.pid == pid)
            .map(|r| r.id.clone())
            .collect();
        self.canceller
            .cancel_frozen(&held, &self.launch, QUEUE, &mut self.rng)?;
        Ok(())
    }

    /// Jobs done with for the faults: those that succeeded at least once,
    /// and the others the board cancelled (or may have: the CLI failed).
    fn jobs_done(&self) -> usize {
        let (cancelled, unknown) = self.events.cancelled_jobs();
        let never_ok = cancelled
            .iter()
            .chain(&unknown)
            .filter(|id| !self.runs.ended_ok(id))
            .count();
        self.runs.ok_jobs() + never_ok
    }

    /// Worker kills, the planned faults and the cancels, until every job
    /// has succeeded at least once or been cancelled, every fault is over
    /// and every cancel answered (or nothing progresses for the settle
    /// timeout).
    fn faults(&mut self) -> io::Result<()> {
        let (mut progress, mut progressed) = (0, Instant::now());
        loop {
            self.tick()?;
            let ok = self.runs.ok_jobs();
            if ok > progress {
                (progress, progressed) = (ok, Instant::now());
            }
            let all_ok = self.jobs_done() >= self.cfg.jobs;
            if self.frozen.is_none() {
                if let Some(&(share, fault)) = PLAN.get(self.next_fault) {
                    // Truncation intended: a share of the job count.
                    let due = ok >= (share * self.cfg.jobs as f64) as usize;
                    if due && self.fault(fault)? {
                        self.next_fault += 1;
                    } else if due && all_ok {
                        self.events
                            .missed
                            .push(format!("{}: no worker had a run in flight", fault.name()));
                        self.next_fault += 1;
                    }
                }
            }
            if all_ok && self.frozen.is_none() && self.next_fault >= PLAN.len() && self.canceller.is_idle() {
                return Ok(());
            }
            if progressed.elapsed() > self.cfg.settle_timeout {
                for (_, fault) in &PLAN[self.next_fault.min(PLAN.len())..] {
                    self.events.missed.push(format!("{}: no progress", fault.name()));
                }
                if let Some((pid, _)) = self.frozen {
                    self.signal(pid, libc::SIGCONT);
                    self.frozen = None;
                }
                return Ok(());
            }
            std::thread::sleep(TICK);
        }
    }

    /// Waits (no more faults) until the board holds none of the jobs; false
    /// when the settle timeout passes first.
    fn settle(&mut self, rt: &tokio::runtime::Runtime, board: &AnyBoard) -> io::Result<bool> {
        let deadline = Instant::now() + self.cfg.settle_timeout;
        let mut asked = Instant::now() - SETTLE_POLL;
        while Instant::now() < deadline {
            self.watch()?;
            if asked.elapsed() >= SETTLE_POLL {
                asked = Instant::now();
                if matches!(rt.block_on(board.job_count(QUEUE)), Ok(0)) {
                    return Ok(true);
                }
            }
            std::thread::sleep(TICK);
        }
        Ok(false)
    }
}
