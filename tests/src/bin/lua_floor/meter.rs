//! What one phase of one way cost the server: `CONFIG RESETSTAT`, then
//! `INFO cpu` before and after, and `INFO commandstats` after.

use std::time::Instant;

use jobworker_tests::lua_bench::measure::{field, info};
use redis::aio::MultiplexedConnection;

/// One phase (post, claim or consume) of N jobs, per job.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    /// Server time of the commands the client sent (`usec` in `INFO
    /// commandstats` of EVALSHA, or of the plain commands), µs per job.
    pub server_us: f64,
    /// `used_cpu_user + used_cpu_sys` growth, µs per job (includes reading
    /// and writing the sockets).
    pub cpu_us: f64,
    /// Data commands run per job: inside the scripts, or sent plain.
    pub commands: f64,
    /// Calls the client sent per job (EVALSHA, or the plain commands).
    pub calls: f64,
    /// Jobs per second the client saw.
    pub jobs_per_s: f64,
}

/// A phase being measured.
pub struct Mark {
    cpu_us: f64,
    started: Instant,
}

fn cpu_us(info: &str) -> f64 {
    (field(info, "used_cpu_user") + field(info, "used_cpu_sys")) * 1e6
}

/// Resets the server's statistics and notes its CPU time.
pub async fn start(con: &mut MultiplexedConnection) -> Mark {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(con)
        .await
        .expect("CONFIG RESETSTAT");
    let cpu_us = cpu_us(&info(con, "cpu").await);
    Mark {
        cpu_us,
        started: Instant::now(),
    }
}

/// The commands that run a script (the board's scripts on Redis before 7,
/// its Functions library from 7 on): the commands inside them are counted,
/// not the call itself.
pub const SCRIPT_CALLS: [&str; 2] = ["evalsha", "fcall"];

/// The figures since `mark` for `jobs` jobs; `sent` names the commands the
/// client sent (lower case, as in `cmdstat_<name>`): their server time is
/// the phase's, the others ran inside them (or are the meter's own INFO
/// and CONFIG, left out).
pub async fn finish(con: &mut MultiplexedConnection, mark: Mark, jobs: usize, sent: &[&str]) -> Figures {
    let wall = mark.started.elapsed().as_secs_f64();
    let cpu = cpu_us(&info(con, "cpu").await) - mark.cpu_us;
    let stats = info(con, "commandstats").await;
    let (mut usec, mut calls, mut commands) = (0.0, 0.0, 0.0);
    for line in stats.lines() {
        let Some((name, rest)) = line
            .trim()
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let n = field(rest, "calls");
        if sent.contains(&name) {
            usec += field(rest, "usec");
            calls += n;
            if SCRIPT_CALLS.contains(&name) {
                continue;
            }
        }
        if name != "info" && name != "config" {
            commands += n;
        }
    }
    let n = jobs as f64;
    Figures {
        server_us: usec / n,
        cpu_us: cpu / n,
        commands: commands / n,
        calls: calls / n,
        jobs_per_s: n / wall,
    }
}
