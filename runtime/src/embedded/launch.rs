//! Spawning one server process: its command line, its log, and the wait
//! until it answers.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Instant;

use nix::sys::signal::Signal;

use super::{
    RedisServer, StartFailure, LOG_TAIL_LINES, MISSING_HINT, PROBE_INTERVAL, READY_TIMEOUT, REDIS_SERVER_BIN,
};
use crate::error::Error;

impl RedisServer {
    /// Spawns one server process and waits for it to answer.
    pub(super) fn launch(&mut self) -> std::result::Result<(), StartFailure> {
        let log_path = self.log_path();
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| {
                StartFailure::Fatal(Error::io(
                    &format!("cannot open redis log {}", log_path.display()),
                    e,
                ))
            })?;
        let log_start = log.seek(SeekFrom::End(0)).unwrap_or(0);
        let log_err = log.try_clone().map_err(|e| {
            StartFailure::Fatal(Error::io(
                &format!("cannot open redis log {}", log_path.display()),
                e,
            ))
        })?;

        let mut cmd = Command::new(REDIS_SERVER_BIN);
        cmd.args(self.server_args())
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .process_group(0);
        crate::fork::die_with_parent(&mut cmd, Signal::SIGKILL);
        let child = cmd.spawn().map_err(|e| {
            StartFailure::Fatal(if e.kind() == io::ErrorKind::NotFound {
                Error::unavailable(MISSING_HINT)
            } else {
                Error::io("cannot spawn redis-server", e)
            })
        })?;
        self.pid = child.id();
        self.child = Some(child);

        match self.wait_ready() {
            Ok(()) => Ok(()),
            Err(failure) => {
                // Leave no half-started server behind.
                let _ = self.kill();
                let tail = log_tail(&log_path, log_start);
                let failure = match failure {
                    StartFailure::Exited(e) if port_taken(&tail) => StartFailure::PortLost(e),
                    StartFailure::Exited(e) => StartFailure::Fatal(e),
                    other => other,
                };
                Err(failure.map(|e| {
                    Error::unavailable(format!(
                        "{} (data dir {}); end of {}:\n{tail}",
                        e.message(),
                        self.dir.display(),
                        log_path.display()
                    ))
                }))
            }
        }
    }

    /// The command line for the current port / socket and options.
    fn server_args(&self) -> Vec<String> {
        let mut args: Vec<String> = Vec::new();
        let mut push = |name: &str, value: &str| {
            args.push(format!("--{name}"));
            args.push(value.to_owned());
        };
        match &self.socket {
            Some(socket) => {
                push("port", "0");
                push("unixsocket", &socket.to_string_lossy());
                push("unixsocketperm", "700");
            }
            None => {
                push("bind", "127.0.0.1");
                push("port", &self.port.unwrap_or(0).to_string());
            }
        }
        if self.opts.appendonly {
            push("appendonly", "yes");
            push("appendfsync", "everysec");
        } else {
            push("save", "");
        }
        push("dir", &self.dir.to_string_lossy());
        push("daemonize", "no");
        push("protected-mode", "no");
        args.extend(self.opts.extra_args.iter().cloned());
        args
    }

    /// Polls until the server we spawned answers `PING` with `PONG` and
    /// reports our PID, the process exits, or [`READY_TIMEOUT`] passes.
    fn wait_ready(&mut self) -> std::result::Result<(), StartFailure> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut() {
                match child.try_wait() {
                    Ok(None) => {}
                    Ok(Some(status)) => {
                        return Err(StartFailure::Exited(Error::unavailable(format!(
                            "redis-server exited before answering PING ({status})"
                        ))));
                    }
                    Err(e) => return Err(StartFailure::Fatal(Error::io("waiting for redis-server", e))),
                }
            }
            let last_error = match self.probe() {
                Ok(Some(pid)) if pid == self.pid => return Ok(()),
                Ok(Some(pid)) => {
                    // Someone else's server answers on the port we picked.
                    return Err(StartFailure::PortLost(Error::unavailable(format!(
                        "another redis-server (pid {pid}) answers on port {}",
                        self.port.unwrap_or(0)
                    ))));
                }
                Ok(None) => String::from("server is still loading"),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(StartFailure::Fatal(Error::unavailable(format!(
                    "redis-server (pid {}) did not answer PING at {} within {:?}: {last_error}",
                    self.pid,
                    self.url(),
                    READY_TIMEOUT
                ))));
            }
            thread::sleep(PROBE_INTERVAL);
        }
    }
}

/// True when a server log says the TCP port could not be bound.
pub(super) fn port_taken(log: &str) -> bool {
    log.contains("Address already in use") || log.contains("Failed listening on port")
}

/// The last [`LOG_TAIL_LINES`] lines of the log written since `from`.
fn log_tail(path: &Path, from: u64) -> String {
    let mut text = String::new();
    let read = File::open(path).and_then(|mut f| {
        f.seek(SeekFrom::Start(from))?;
        f.read_to_string(&mut text)
    });
    if let Err(e) = read {
        return format!("(cannot read log: {e})");
    }
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return String::from("(log is empty)");
    }
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}
