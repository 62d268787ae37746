//! With a progress bar shown, the workers' stderr is a pipe that the
//! supervisor waits on (beside its signals) and drains whenever it is
//! readable, writing it line by line above the bar (see
//! [`crate::console`]). The pipe is made big (1 MiB) so that busy workers
//! do not wait on it while the supervisor is busy elsewhere.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};

use nix::fcntl::{fcntl, FcntlArg, OFlag};

use crate::error::{Error, Result};

/// Bytes asked for the pipe (the kernel may give less).
const PIPE_BYTES: i32 = 1 << 20;

/// The pipe the workers log into.
pub(crate) struct Relay {
    read: File,
    write: OwnedFd,
    /// The start of a line not yet complete.
    partial: Vec<u8>,
}

impl Relay {
    /// Makes the pipe (both ends close on exec; the read end never blocks).
    pub(crate) fn new() -> Result<Relay> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
            .map_err(|e| Error::io("cannot make the workers' log pipe", e.into()))?;
        let _ = fcntl(&write, FcntlArg::F_SETPIPE_SZ(PIPE_BYTES));
        fcntl(&read, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
            .map_err(|e| Error::io("cannot make the workers' log pipe non-blocking", e.into()))?;
        Ok(Relay {
            read: File::from(read),
            write,
            partial: Vec::new(),
        })
    }

    /// In a forked worker: its stderr becomes the pipe.
    pub(crate) fn become_stderr(&self) {
        let _ = nix::unistd::dup2_stderr(self.write.as_fd());
    }

    /// The end the supervisor reads (and waits on).
    pub(crate) fn read_end(&self) -> &File {
        &self.read
    }

    /// Writes every complete line the workers logged since the last call
    /// (above the bar).
    pub(crate) fn drain(&mut self) {
        let mut buf = [0u8; 64 * 1024];
        while let Ok(n @ 1..) = self.read.read(&mut buf) {
            self.partial.extend_from_slice(&buf[..n]);
        }
        if let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') {
            let lines: Vec<u8> = self.partial.drain(..=end).collect();
            crate::console::write(&lines);
        }
    }
}
