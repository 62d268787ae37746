//! Processes the chaos run signals: the supervisor's children found in
//! `/proc`, held through a pidfd so that a signal never reaches a reused
//! pid, and whose exit is seen as soon as it happens.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// The children of `pid` (its main thread's: the supervisor forks from
/// it), from `/proc/<pid>/task/<pid>/children`; empty once it is gone.
pub fn children_of(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// True when `pid` is a supervisor's ZooKeeper agent (by its process
/// name), not a worker.
pub fn is_zookeeper_agent(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == "jobworker-agent")
}

/// The parent pid of `pid` (field 4 of `/proc/<pid>/stat`), if it exists.
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// A process held by a pidfd.
#[derive(Debug)]
pub struct Proc {
    pid: u32,
    fd: OwnedFd,
}

impl Proc {
    /// Opens a pidfd on `pid` if it is (still) a child of `parent`: the
    /// check comes after the open, so the pidfd names that child even if
    /// the pid is reused later.
    pub fn child_of(pid: u32, parent: u32) -> io::Result<Proc> {
        let raw = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
        // SAFETY: pidfd_open(2) takes a pid and flags and returns a new fd
        // (or -1); no memory is shared with the kernel.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, raw, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by pidfd_open and is owned by no
        // one else. Truncation is impossible: fds fit in a c_int.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
        if parent_of(pid) != Some(parent) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("pid {pid} is no longer a child of {parent}"),
            ));
        }
        Ok(Proc { pid, fd })
    }

    /// The pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `sig`; false when the process has exited already.
    pub fn signal(&self, sig: libc::c_int) -> bool {
        // SAFETY: pidfd_send_signal(2) on a pidfd we own, with no siginfo
        // (null) and no flags.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        rc == 0
    }

    /// True once the process has exited (it may not be reaped yet).
    pub fn has_exited(&self) -> bool {
        self.poll(0)
    }

    /// Waits up to `timeout` for the process to exit; true when it has.
    pub fn wait_exit(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ms = libc::c_int::try_from(left.as_millis()).unwrap_or(libc::c_int::MAX);
            if self.poll(ms) {
                return true;
            }
            if left.is_zero() {
                return false;
            }
        }
    }

    /// poll(2) for readability (the process exited) for `ms` milliseconds.
    fn poll(&self, ms: libc::c_int) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd on the stack for the duration of the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        rc > 0 && pfd.revents != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_child_is_found_signalled_and_seen_exiting() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let me = std::process::id();
        // Test threads fork from their own thread, not the main one: look
        // the child up by its parent instead of the main thread's list.
        assert_eq!(parent_of(child.id()), Some(me));
        let proc = Proc::child_of(child.id(), me).unwrap();
        assert!(!proc.has_exited());
        assert!(proc.signal(libc::SIGKILL));
        assert!(proc.wait_exit(Duration::from_secs(10)));
        child.wait().unwrap();
        assert!(Proc::child_of(child.id(), me).is_err());
        assert!(children_of(u32::MAX).is_empty());
    }
}
