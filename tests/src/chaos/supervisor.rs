//! The real `jobworker` supervisor of a chaos run, and its workers as the
//! run sees them: started, watched (new workers found in `/proc`, exits
//! seen through pidfds), killed one by one, frozen, killed with the whole
//! tree, and stopped at the end.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::chaos::events::{now_us, Events, Kill, KillKind, SupervisorEnd, SupervisorLife};
use crate::chaos::procs::{children_of, is_zookeeper_agent, Proc};

/// How long a killed process may take to be seen dead.
pub const DEATH_WAIT: Duration = Duration::from_secs(5);
/// Bytes of a supervisor log quoted when it exits on its own.
const LOG_TAIL_BYTES: u64 = 4_000;

/// The flags every supervisor of the run gets.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The `jobworker` binary.
    pub jobworker: PathBuf,
    /// Board flags (`--redis URL` / `--zookeeper host:port/root`).
    pub board_args: Vec<String>,
    /// The rest: `--queues … --workers … --expiry …`.
    pub args: Vec<String>,
    /// Where the logs go: `supervisor-<n>.log`.
    pub log_dir: PathBuf,
}

impl Launch {
    /// Runs `jobworker <board> VERB -q QUEUE` as an operator would; an
    /// error unless it succeeds.
    pub fn operator(&self, verb: &str, queue: &str) -> std::io::Result<()> {
        let out = std::process::Command::new(&self.jobworker)
            .args(&self.board_args)
            .args([verb, "-q", queue])
            .output()?;
        if out.status.success() {
            return Ok(());
        }
        Err(std::io::Error::other(format!(
            "jobworker {verb} -q {queue} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )))
    }

    /// Starts `jobworker <board> cancel ID -q QUEUE` as an operator would,
    /// for one job (see [`Cancel`](crate::chaos::events::Cancel)); its
    /// output is piped, to read once it has exited.
    pub fn cancel(&self, id: &str, queue: &str) -> io::Result<Child> {
        Command::new(&self.jobworker)
            .args(&self.board_args)
            .args(["cancel", id, "-q", queue])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    }
}

/// A running supervisor and the workers seen so far.
#[derive(Debug)]
pub struct Supervisor {
    child: Child,
    pid: u32,
    log: PathBuf,
    /// Live workers (pidfds), by pid.
    workers: BTreeMap<u32, Proc>,
}

impl Supervisor {
    /// Starts supervisor number `n` (its log is `supervisor-<n>.log`) and
    /// records it.
    pub fn start(launch: &Launch, n: usize, events: &mut Events) -> io::Result<Supervisor> {
        let log = launch.log_dir.join(format!("supervisor-{n}.log"));
        let mut cmd = Command::new(&launch.jobworker);
        cmd.args(&launch.board_args)
            .args(&launch.args)
            .env("RUST_LOG", "info")
            .env_remove("JOBWORKER_REDIS_URL")
            .env_remove("JOBWORKER_ZOOKEEPER")
            .env_remove("JOBWORKER_QUEUES")
            .env_remove("JOBWORKER_WORKERS")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log)?);
        // SAFETY: runs in the forked child before exec; prctl is
        // async-signal-safe and nothing is allocated. If the chaos run dies,
        // the supervisor is told to drain and stop.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        let pid = child.id();
        events.supervisors.push(SupervisorLife {
            pid,
            started_us: now_us(),
            end: None,
        });
        Ok(Supervisor {
            child,
            pid,
            log,
            workers: BTreeMap::new(),
        })
    }

    /// The supervisor's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Finds new workers and notes the exit of those that are gone.
    pub fn watch(&mut self, events: &mut Events) {
        for pid in children_of(self.pid) {
            if is_zookeeper_agent(pid)
                || self.workers.contains_key(&pid)
                || events.worker_exits.contains_key(&pid)
            {
                continue;
            }
            if let Ok(proc) = Proc::child_of(pid, self.pid) {
                events.worker_seen.entry(pid).or_insert_with(now_us);
                self.workers.insert(pid, proc);
            }
        }
        let now = now_us();
        self.workers.retain(|&pid, proc| {
            // The agent names itself just after its fork: seen before, it
            // passed for a worker.
            if is_zookeeper_agent(pid) {
                return false;
            }
            if proc.has_exited() {
                events.worker_exits.entry(pid).or_insert(now);
                false
            } else {
                true
            }
        });
    }

    /// The live workers' pids.
    pub fn workers(&self) -> Vec<u32> {
        self.workers.keys().copied().collect()
    }

    /// Sends `sig` to worker `pid`; false when it is not a live worker.
    pub fn signal_worker(&self, pid: u32, sig: libc::c_int) -> bool {
        self.workers.get(&pid).is_some_and(|p| p.signal(sig))
    }

    /// Kills worker `pid` with SIGKILL, waits until it is dead and records
    /// the kill; false when it is not a live worker.
    pub fn kill_worker(&mut self, pid: u32, open_runs: usize, events: &mut Events) -> bool {
        let Some(proc) = self.workers.remove(&pid) else {
            return false;
        };
        let sent_us = now_us();
        proc.signal(libc::SIGKILL);
        let dead_us = proc.wait_exit(DEATH_WAIT).then(now_us);
        events.worker_exits.insert(pid, dead_us.unwrap_or_else(now_us));
        events.kills.push(Kill {
            pid,
            kind: KillKind::Worker,
            sent_us,
            dead_us,
            open_runs,
        });
        true
    }

    /// Has the supervisor exited? Then records that it did on its own.
    pub fn exited_on_its_own(&mut self, events: &mut Events) -> bool {
        let Ok(Some(status)) = self.child.try_wait() else {
            return false;
        };
        self.watch(events);
        let end = SupervisorEnd::OnItsOwn {
            status: status.to_string(),
            log_tail: tail(&self.log),
        };
        self.record_end(events, end);
        true
    }

    /// Kills the whole tree with SIGKILL: the supervisor is stopped first
    /// (SIGSTOP) so that it cannot react, then every worker is killed, then
    /// the supervisor. `open_runs` gives each worker's runs in flight.
    pub fn kill_tree(mut self, events: &mut Events, open_runs: impl Fn(u32) -> usize) -> io::Result<()> {
        signal_pid(self.pid, libc::SIGSTOP)?;
        self.watch(events);
        let at = now_us();
        events.tree_kills.push(at);
        let workers = std::mem::take(&mut self.workers);
        for (&pid, proc) in &workers {
            let sent_us = now_us();
            proc.signal(libc::SIGKILL);
            events.kills.push(Kill {
                pid,
                kind: KillKind::Tree,
                sent_us,
                dead_us: None,
                open_runs: open_runs(pid),
            });
        }
        self.child.kill()?;
        self.child.wait()?;
        for (pid, proc) in workers {
            let dead_us = proc.wait_exit(DEATH_WAIT).then(now_us);
            events.worker_exits.insert(pid, dead_us.unwrap_or_else(now_us));
            if let Some(kill) = events.kills.iter_mut().rev().find(|k| k.pid == pid) {
                kill.dead_us = dead_us;
            }
        }
        self.record_end(events, SupervisorEnd::Killed);
        Ok(())
    }

    /// Stops the supervisor with SIGTERM (drain) and waits up to `timeout`;
    /// then kills the tree. Returns the exit status.
    pub fn stop(mut self, timeout: Duration, events: &mut Events) -> io::Result<ExitStatus> {
        signal_pid(self.pid, libc::SIGTERM)?;
        let deadline = Instant::now() + timeout;
        let status = loop {
            self.watch(events);
            if let Some(status) = self.child.try_wait()? {
                break status;
            }
            if Instant::now() >= deadline {
                for proc in self.workers.values() {
                    proc.signal(libc::SIGKILL);
                }
                self.child.kill()?;
                break self.child.wait()?;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // The workers went before the supervisor (it waits for them).
        let now = now_us();
        for (pid, proc) in std::mem::take(&mut self.workers) {
            proc.wait_exit(DEATH_WAIT);
            events.worker_exits.entry(pid).or_insert(now);
        }
        self.record_end(events, SupervisorEnd::Stopped(status.to_string()));
        Ok(status)
    }

    fn record_end(&self, events: &mut Events, end: SupervisorEnd) {
        if let Some(life) = events.supervisors.iter_mut().rev().find(|s| s.pid == self.pid) {
            life.end.get_or_insert((now_us(), end));
        }
    }
}

impl Drop for Supervisor {
    /// A supervisor still running when the run ends (a panic, an error):
    /// its tree is killed, so nothing outlives the run.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            for proc in self.workers.values() {
                proc.signal(libc::SIGCONT);
                proc.signal(libc::SIGKILL);
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// kill(2) of our own child `pid` (not reaped yet, so not a reused pid).
fn signal_pid(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    // SAFETY: plain kill(2) on the pid of a child we hold and have not waited.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The last bytes of `path`, from a line start.
fn tail(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(path) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)));
        let mut bytes = Vec::new();
        let _ = f.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
        if len > LOG_TAIL_BYTES {
            if let Some(i) = text.find('\n') {
                text.drain(..=i);
            }
        }
    }
    text
}
