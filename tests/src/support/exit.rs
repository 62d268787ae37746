//! Servers shared by a test binary are statics, never dropped: an `atexit`
//! hook stops them by PID (SIGKILL, reap) and removes their directories.

use std::path::PathBuf;
use std::sync::{Mutex, Once};
use std::thread;
use std::time::{Duration, Instant};

/// How long the hook waits for each server to be reaped.
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// Servers to stop at exit: (pid, directory to remove).
static SERVERS: Mutex<Vec<(i32, PathBuf)>> = Mutex::new(Vec::new());
static HOOK: Once = Once::new();

/// Stops the server `pid` (our own child, never reaped elsewhere) and
/// removes `dir` when the test binary exits.
pub fn stop_at_exit(pid: u32, dir: PathBuf) {
    let pid = i32::try_from(pid).expect("pid fits in i32");
    SERVERS.lock().unwrap_or_else(|e| e.into_inner()).push((pid, dir));
    HOOK.call_once(|| {
        // SAFETY: `stop_servers` is a plain `extern "C" fn()` that stays
        // valid for the life of the process; `atexit` only records it.
        let rc = unsafe { libc::atexit(stop_servers) };
        assert_eq!(rc, 0, "atexit failed to register the shared-server hook");
    });
}

/// The `atexit` hook.
extern "C" fn stop_servers() {
    let servers = std::mem::take(&mut *SERVERS.lock().unwrap_or_else(|e| e.into_inner()));
    for (pid, dir) in servers {
        // SAFETY: `pid` is our own child, never reaped before (its owner is
        // a static that is never waited on), so it cannot be a reused PID.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        let deadline = Instant::now() + EXIT_WAIT;
        loop {
            // SAFETY: non-blocking wait for our own child; a null status
            // pointer is allowed.
            let rc = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
            if rc != 0 || Instant::now() >= deadline {
                break;
            }
            thread::sleep(Duration::from_millis(5));
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
