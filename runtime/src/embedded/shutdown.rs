//! Stopping a server: `SIGKILL`, `SIGTERM` with a grace period, a restart,
//! and signals by PID.

use std::io;
use std::thread;
use std::time::Instant;

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::{RedisServer, StartFailure, EXIT_POLL_INTERVAL, STOP_TIMEOUT};
use crate::error::{Error, Result};

impl RedisServer {
    /// True while the server process has not exited (it may have been
    /// killed from outside, e.g. by its parent-death signal).
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Kills the server with `SIGKILL` (by PID) and waits for it. Nothing is
    /// flushed; data the server had acknowledged is in the AOF (written
    /// before the reply) when `appendonly` is on. A no-op when it is not
    /// running.
    pub fn kill(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if matches!(child.try_wait(), Ok(None)) {
            signal(self.pid, Signal::SIGKILL)?;
        }
        child
            .wait()
            .map_err(|e| Error::io(&format!("waiting for redis-server {}", self.pid), e))?;
        Ok(())
    }

    /// Stops the server with `SIGTERM` (by PID), waits up to
    /// [`STOP_TIMEOUT`] for it to exit, then sends `SIGKILL`. A no-op when it
    /// is not running.
    pub fn stop(&mut self) -> Result<()> {
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if matches!(child.try_wait(), Ok(None)) {
            signal(self.pid, Signal::SIGTERM)?;
            let deadline = Instant::now() + STOP_TIMEOUT;
            while Instant::now() < deadline {
                match child.try_wait() {
                    Ok(None) => thread::sleep(EXIT_POLL_INTERVAL),
                    _ => break,
                }
            }
        }
        self.kill()
    }

    /// Starts the server again with the same port or socket, data dir and
    /// options, and waits until it answers `PING`. Meant for after
    /// [`kill`](Self::kill) or [`stop`](Self::stop); a server still running
    /// is stopped first. With `appendonly` the data survives (same dir).
    ///
    /// The new process dies with the thread that calls `restart`.
    pub fn restart(&mut self) -> Result<()> {
        self.stop()?;
        self.launch().map_err(StartFailure::into_error)
    }
}

/// Sends `sig` to `pid`; an already gone process is not an error.
fn signal(pid: u32, sig: Signal) -> Result<()> {
    let raw = i32::try_from(pid).map_err(|_| Error::invalid(format!("bad pid {pid}")))?;
    match kill(Pid::from_raw(raw), sig) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(Error::io(
            &format!("cannot send {sig} to redis-server {pid}"),
            io::Error::from(e),
        )),
    }
}
