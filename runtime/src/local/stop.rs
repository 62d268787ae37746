//! Stopping the private board's server (`jobworker server stop`).

use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::owner::alive;
use super::{LocalBoard, POLL};
use crate::embedded::STOP_TIMEOUT;
use crate::error::{Error, Result};

impl LocalBoard {
    /// Stops the server (SIGTERM by pid: it writes its append-only file and
    /// exits; SIGKILL after [`STOP_TIMEOUT`]), also one that does not
    /// answer: a stopped one is continued to handle the SIGTERM. Returns
    /// once the process is gone, with the pid it stopped, `None` when none
    /// was running.
    pub(crate) fn stop(&self) -> Result<Option<u32>> {
        let _lock = self.lock()?;
        // A server that does not answer (stopped, or loading) is stopped too.
        let Some(pid) = self.probe().or_else(|| self.owner()) else {
            return Ok(None);
        };
        let target = Pid::from_raw(pid as i32);
        let _ = kill(target, Signal::SIGTERM);
        let _ = kill(target, Signal::SIGCONT);
        if !gone_within(pid, STOP_TIMEOUT) {
            let _ = kill(target, Signal::SIGKILL);
            if !gone_within(pid, STOP_TIMEOUT) {
                return Err(Error::unavailable(format!(
                    "the private redis-server in {} (pid {pid}) did not end, even after SIGKILL",
                    self.dir.display()
                )));
            }
        }
        Ok(Some(pid))
    }
}

/// Waits up to `limit` for process `pid` to end; true when it has.
fn gone_within(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while alive(pid as i32) && Instant::now() < deadline {
        thread::sleep(POLL);
    }
    !alive(pid as i32)
}
