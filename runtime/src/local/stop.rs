//! Stopping the private board's server (`jobworker server stop`).

use std::thread;
use std::time::Instant;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::{LocalBoard, POLL};
use crate::embedded::STOP_TIMEOUT;
use crate::error::Result;

impl LocalBoard {
    /// Stops the server (SIGTERM by pid: it writes its append-only file and
    /// exits; SIGKILL after [`STOP_TIMEOUT`]). Returns the pid it stopped,
    /// `None` when none was running.
    pub(crate) fn stop(&self) -> Result<Option<u32>> {
        let _lock = self.lock()?;
        let Some(pid) = self.probe() else {
            return Ok(None);
        };
        let target = Pid::from_raw(pid as i32);
        let _ = kill(target, Signal::SIGTERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while alive(target) && Instant::now() < deadline {
            thread::sleep(POLL);
        }
        if alive(target) {
            let _ = kill(target, Signal::SIGKILL);
        }
        Ok(Some(pid))
    }
}

/// True while process `pid` exists.
fn alive(pid: Pid) -> bool {
    kill(pid, None).is_ok()
}
