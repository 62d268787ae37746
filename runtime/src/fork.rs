//! The only module with `unsafe` code: everything that runs code in a
//! forked child before it becomes what it will be. The rest of the crate
//! denies `unsafe_code`.

#[cfg(feature = "embedded")]
use std::{io, os::unix::process::CommandExt, process::Command};

#[cfg(feature = "embedded")]
use nix::sys::signal::Signal;
#[cfg(feature = "cli")]
use nix::unistd::ForkResult;

/// Forks the calling process.
///
/// The caller must be single-threaded (no async runtime, no client or
/// logging thread: see the supervisor), so that the child may run any code
/// after the fork.
#[cfg(feature = "cli")]
pub(crate) fn fork_single_threaded() -> nix::Result<ForkResult> {
    // SAFETY: the caller is single-threaded (the contract above), so no
    // lock or allocator state is held by a thread that the child lacks.
    unsafe { nix::unistd::fork() }
}

/// Makes the process `cmd` spawns receive `signal` when this process dies,
/// and refuse to start if this process is already gone, so that a private
/// server never outlives its owner.
#[cfg(feature = "embedded")]
pub(crate) fn die_with_parent(cmd: &mut Command, signal: Signal) {
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and only
    // makes async-signal-safe system calls (prctl, getppid) without
    // allocating. The spawning thread is blocked in `spawn` until exec,
    // so the parent-death signal is armed against a living thread.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(signal).map_err(|e| io::Error::from_raw_os_error(e as i32))?;
            if std::os::unix::process::parent_id() != parent {
                // The parent is already gone; do not outlive it.
                return Err(io::Error::from_raw_os_error(nix::libc::ESRCH));
            }
            Ok(())
        });
    }
}
