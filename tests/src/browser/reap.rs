//! Finding the browser's processes in `/proc` and ending them by PID.
//!
//! Chromium's processes are chromedriver's descendants, or (once
//! reparented, like its daemonized crash handlers) carry the browser's
//! temp dir (`home`: profile, XDG dirs) on their command line. Zombies
//! count as gone.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

/// How long [`kill_all`] waits for the killed processes to be gone.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// The PIDs of `pids` that are still running (present and not zombies).
pub fn running(pids: &[u32]) -> Vec<u32> {
    pids.iter()
        .copied()
        .filter(|&pid| stat(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X'))
        .collect()
}

/// The live processes of the browser: descendants of `driver` (not
/// `driver` itself; none once it is reaped, as its PID may be reused) and
/// processes whose command line names `home`.
pub(super) fn browser_processes(driver: Option<u32>, home: &Path) -> Vec<u32> {
    let marker = home.to_string_lossy().into_owned().into_bytes();
    let me = std::process::id();
    let mut parent = HashMap::new();
    let mut found = Vec::new();
    for pid in all_pids() {
        let Some((state, ppid)) = stat(pid) else { continue };
        if state == 'Z' || state == 'X' || pid == me || Some(pid) == driver {
            continue;
        }
        parent.insert(pid, ppid);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline.windows(marker.len()).any(|w| w == marker.as_slice()) {
            found.push(pid);
        }
    }
    for &pid in parent.keys() {
        let child = driver.is_some_and(|driver| descends_from(pid, driver, &parent));
        if child && !found.contains(&pid) {
            found.push(pid);
        }
    }
    found
}

fn descends_from(mut pid: u32, ancestor: u32, parent: &HashMap<u32, u32>) -> bool {
    for _ in 0..64 {
        match parent.get(&pid) {
            Some(&ppid) if ppid == ancestor => return true,
            Some(&ppid) if ppid > 1 => pid = ppid,
            _ => return false,
        }
    }
    false
}

fn all_pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// `(state, ppid)` from `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = text[text.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.next()?.parse().ok()?))
}

/// SIGKILLs each PID (found just before, so not reused in between), then
/// waits a little (blocking) until none runs any more.
pub(super) fn kill_all(pids: &[u32]) {
    for &pid in pids {
        let Ok(pid) = i32::try_from(pid) else { continue };
        // SAFETY: kill(2) with a PID we just read from /proc as one of the
        // browser's processes; no memory is involved.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    let deadline = std::time::Instant::now() + KILL_WAIT;
    while !running(pids).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits up to `timeout` for the browser's processes to exit on their own.
pub(super) async fn wait_gone(driver: Option<u32>, home: &Path, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while !browser_processes(driver, home).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Ends the WebDriver `session` with a blocking `DELETE /session/<id>`
/// (chromedriver then quits Chromium); for `Drop`, where no async runtime
/// may be left. Errors are ignored: the caller kills what remains.
pub(super) fn delete_session(port: u16, session: &str) {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else {
        return;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
    let request = format!(
        "DELETE /session/{session} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Connection: close\r\nContent-Length: 0\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_ok() {
        read_response(&mut stream);
    }
}

/// Reads one HTTP response (headers and a `Content-Length` body):
/// chromedriver keeps the connection open despite `Connection: close`.
fn read_response(stream: &mut TcpStream) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = stream.read(&mut buf) {
        got.extend_from_slice(&buf[..n]);
        let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|n| n.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if got.len() >= end + 4 + length {
            return;
        }
    }
}
