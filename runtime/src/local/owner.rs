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

    /// Why the server started now is gone, when it is: it wrote its pid
    /// file and that process has exited, as on an append-only file it
    /// cannot read. The reason is the log's last warning line (Redis marks
    /// those ` # `).
    pub(super) fn exited(&self) -> Option<String> {
        let pid = self.pid_file()?;
        if kill(Pid::from_raw(pid), None) != Err(Errno::ESRCH) {
            return None;
        }
        let log = fs::read_to_string(self.log()).unwrap_or_default();
        let last = log
            .lines()
            .rev()
            .find_map(|l| l.split_once(" # ").map(|(_, why)| why.trim().to_owned()));
        Some(last.unwrap_or_else(|| format!("process {pid} is gone")))
    }
}
