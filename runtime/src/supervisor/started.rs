//! A worker's "I started" notice to the supervisor: one byte on a pipe
//! made before `fork`. The supervisor gives up on start failures only while
//! no worker has ever started; once one has, it never exits for crashes.

use std::io::{PipeReader, PipeWriter, Read, Write};

use nix::fcntl::{fcntl, FcntlArg, OFlag};

use crate::error::{Error, Result};

/// The supervisor's end: read without blocking when a worker exits (the
/// notice stays in the pipe until then).
#[derive(Debug)]
pub(crate) struct StartedReader(PipeReader);

/// The worker's end: written once, when the worker has started.
#[derive(Debug)]
pub(crate) struct StartedWriter(PipeWriter);

/// A fresh pipe (both ends close on exec).
pub(crate) fn pipe() -> Result<(StartedReader, StartedWriter)> {
    let (r, w) = std::io::pipe().map_err(|e| Error::io("cannot make a pipe for a worker", e))?;
    fcntl(&r, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
        .map_err(|e| Error::io("cannot make a worker's pipe non-blocking", e.into()))?;
    Ok((StartedReader(r), StartedWriter(w)))
}

impl StartedReader {
    /// True once the worker said it started.
    pub(crate) fn started(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.0.read(&mut byte), Ok(1))
    }
}

impl StartedWriter {
    /// Tells the supervisor the worker started.
    pub(crate) fn send(mut self) {
        let _ = self.0.write_all(b"s");
    }
}
