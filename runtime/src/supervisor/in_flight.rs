//! How many jobs each worker runs now, told to the supervisor without a
//! thread, a runtime or a board read: a small memory file (`memfd`) made
//! before the first fork and shared by every worker, one little-endian
//! `u32` per slot at `4 * slot`. A worker writes its count (one `pwrite`)
//! each time it changed, just before the worker waits again, so that the
//! value is its count as of its last wait; the supervisor reads the file
//! when it is scraped, and writes 0 for a slot whose worker exited (a
//! killed worker cannot say it stopped running its jobs).
//!
//! Made only with `--metrics-listen`: without it no worker writes anything.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use nix::sys::memfd::{memfd_create, MFdFlags};

use crate::error::{Error, Result};

/// Bytes per slot.
const WIDTH: usize = 4;

/// The shared counts (the supervisor's handle; a worker's is
/// [`InFlightReport`]).
#[derive(Debug, Clone)]
pub(crate) struct InFlight {
    file: Arc<File>,
}

impl InFlight {
    /// A fresh, empty file (every count 0). It closes on exec; a forked
    /// worker keeps it (that is the point).
    pub(crate) fn new() -> Result<InFlight> {
        let fd = memfd_create("jobworker-in-flight", MFdFlags::MFD_CLOEXEC)
            .map_err(|e| Error::io("cannot make the workers' in-flight counts", e.into()))?;
        Ok(InFlight {
            file: Arc::new(File::from(fd)),
        })
    }

    /// Sets slot `slot`'s count.
    pub(crate) fn set(&self, slot: usize, jobs: usize) {
        let value = u32::try_from(jobs).unwrap_or(u32::MAX).to_le_bytes();
        let _ = self.file.write_all_at(&value, (slot * WIDTH) as u64);
    }

    /// Slot `slot`'s count (0 when never written).
    pub(crate) fn get(&self, slot: usize) -> usize {
        let mut value = [0u8; WIDTH];
        match self.file.read_exact_at(&mut value, (slot * WIDTH) as u64) {
            Ok(()) => u32::from_le_bytes(value) as usize,
            Err(_) => 0,
        }
    }

    /// Slot `slot`'s writer, for the worker forked into it.
    pub(crate) fn report(&self, slot: usize) -> InFlightReport {
        InFlightReport {
            shared: self.clone(),
            slot,
            last: None,
        }
    }
}

/// Two handles are equal when they share the file.
impl PartialEq for InFlight {
    fn eq(&self, other: &InFlight) -> bool {
        Arc::ptr_eq(&self.file, &other.file)
    }
}

/// A worker's end: writes its count when it changed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct InFlightReport {
    shared: InFlight,
    slot: usize,
    /// The count last written.
    last: Option<usize>,
}

impl InFlightReport {
    /// Says the worker runs `jobs` jobs now (writes only a change).
    pub(crate) fn report(&mut self, jobs: usize) {
        if self.last != Some(jobs) {
            self.shared.set(self.slot, jobs);
            self.last = Some(jobs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_per_slot_and_seen_through_every_handle() {
        let shared = InFlight::new().unwrap();
        assert_eq!(shared.get(3), 0, "never written");
        let mut w3 = shared.report(3);
        let mut w0 = shared.report(0);
        w3.report(2);
        w0.report(1);
        assert_eq!((shared.get(0), shared.get(3), shared.get(1)), (1, 2, 0));
        w3.report(0);
        assert_eq!(shared.get(3), 0);
        shared.set(0, 0);
        assert_eq!(shared.clone().get(0), 0);
    }
}
