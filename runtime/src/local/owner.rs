//! The private board's server process as its pid file names it: whether
//! one owns the data directory although it does not answer, and why one
//! just started is gone.

use std::fs;
use std::path::PathBuf;

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;

use super::{LocalBoard, PID_FILE};
use crate::embedded::LOG_FILE;

impl LocalBoard {
    /// The server's log file.
    pub(super) fn log(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
    }

    /// The pid in the pid file (Redis writes it early, before it loads its
    /// data, and leaves it behind when killed).
    fn pid_file(&self) -> Option<i32> {
        fs::read_to_string(self.dir.join(PID_FILE))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The pid of a live redis-server working in this directory, whether it
    /// answers or not. A pid file left by a killed server names a process
    /// that is gone, or (the pid reused) one working elsewhere.
    pub(crate) fn owner(&self) -> Option<u32> {
        let pid = self.pid_file()?;
        let cwd = fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        let ours = fs::canonicalize(&self.dir).is_ok_and(|dir| dir == cwd);
        (ours && comm.trim() == "redis-server").then_some(pid as u32)
    }

    /// The log's length now: where a server started next begins to write.
    pub(super) fn log_len(&self) -> u64 {
        fs::metadata(self.log()).map_or(0, |m| m.len())
    }

    /// Why the server started now is gone, when it is: it wrote its pid
    /// file and that process has exited, as on an append-only file it
    /// cannot read. The reason is the last warning line (Redis marks those
    /// ` # `) the log got after byte `since` (what earlier runs wrote is
    /// not this start's reason).
    pub(super) fn exited(&self, since: u64) -> Option<String> {
        let pid = self.pid_file()?;
        if alive(pid) {
            return None;
        }
        let log = fs::read(self.log()).unwrap_or_default();
        let start = usize::try_from(since).map_or(log.len(), |s| s.min(log.len()));
        let last = String::from_utf8_lossy(&log[start..])
            .lines()
            .rev()
            .find_map(|l| l.split_once(" # ").map(|(_, why)| why.trim().to_owned()));
        Some(last.unwrap_or_else(|| format!("process {pid} is gone")))
    }
}

/// True while process `pid` runs. A zombie (ended, not yet reaped by its
/// parent, as under an init that reaps nothing) counts as gone.
pub(super) fn alive(pid: i32) -> bool {
    if kill(Pid::from_raw(pid), None) == Err(Errno::ESRCH) {
        return false;
    }
    // The state is the field after the command name, which ends with the
    // stat line's last `)`.
    let state = fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| Some(stat.rsplit_once(')')?.1.trim_start().starts_with('Z')));
    state != Some(true)
}
