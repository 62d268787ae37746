//! A real ZooKeeper ensemble (quorum) on loopback ports for one test.
//!
//! [`ZooKeeperEnsemble::start`] runs `n` members, each a
//! [`ZooKeeperServer`] (one JVM, spawned by the launcher thread with
//! `PDEATHSIG`, signalled by PID only) in `<tmp>/member-<id>/`: `zoo.cfg`
//! (its `clientPort` and a `server.<id>=127.0.0.1:<quorum>:<election>`
//! line per member), `data/myid` (`id` = index + 1), `zookeeper.log`.
//! `tickTime` is 200 ms; [`INIT_LIMIT`] and [`SYNC_LIMIT`] are generous
//! (20 s, 10 s) so that a slow, busy machine does not drop followers (a
//! killed leader closes its sockets, so followers notice it at once).
//! A member serves (answers `srvr` with a `Mode:` line) only in a quorum,
//! so all are spawned, then waited for together.
//!
//! Each member logs the sessions it establishes (its `ZooKeeperServer`
//! logger is at `debug` through a `simplelogger.properties` on its
//! classpath), which [`ZooKeeperEnsemble::established_sessions`] reads.
//!
//! Nothing here skips a test when ZooKeeper or Java is missing: the start
//! panics with a message naming the Debian package to install.

use std::net::{Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};
use std::{fs, io, thread};

use tempfile::TempDir;

use super::zookeeper::{ZooKeeperOptions, ZooKeeperServer};

/// `initLimit` in ticks (200 ms each): how long a follower may take to
/// connect to and sync with a new leader.
pub const INIT_LIMIT: u32 = 100;
/// `syncLimit` in ticks (200 ms each): how long a follower may lag (or a
/// leader stay silent) before it is dropped.
pub const SYNC_LIMIT: u32 = 50;
/// How long [`ZooKeeperEnsemble::start`] and
/// [`ZooKeeperEnsemble::restart`] wait for members to serve.
pub const ENSEMBLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How many times a start is tried on fresh ports when one was taken.
const START_ATTEMPTS: usize = 3;
/// Pause between two looks at the members' modes.
const MODE_POLL: Duration = Duration::from_millis(25);
/// Lines of each member's log in [`ZooKeeperEnsemble::log_tails`].
const TAIL_LINES: usize = 30;
/// Makes each member log the sessions it establishes (at `debug`, with
/// about three lines per request from its ACL checks: a few MB a minute).
const LOGGER_PROPERTIES: &str =
    "org.slf4j.simpleLogger.log.org.apache.zookeeper.server.ZooKeeperServer=debug\n";

/// What a member says it is (`srvr`'s `Mode:` line; the ensembles started
/// here have no observers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZooKeeperMode {
    /// It leads the quorum.
    Leader,
    /// It follows the leader.
    Follower,
}

impl ZooKeeperMode {
    fn parse(srvr: &str) -> Option<ZooKeeperMode> {
        let mode = srvr.lines().find_map(|l| l.strip_prefix("Mode: "))?;
        match mode.trim() {
            "leader" => Some(ZooKeeperMode::Leader),
            "follower" => Some(ZooKeeperMode::Follower),
            _ => None,
        }
    }
}

/// A session a member established for a client (a new session, or one
/// that moved to this member), from the member's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EstablishedSession {
    /// The session id, as the server writes it (`0x…`).
    pub session: String,
    /// The negotiated session timeout in ms.
    pub timeout_ms: u64,
}

/// `n` ZooKeeper servers in one quorum; every member is killed (by PID)
/// when dropped. Members are numbered by index `0..n` (ZooKeeper's
/// `myid` is index + 1).
#[derive(Debug)]
pub struct ZooKeeperEnsemble {
    members: Vec<ZooKeeperServer>,
    /// Declared last: removed only after the members were killed.
    _dir: TempDir,
}

impl ZooKeeperEnsemble {
    /// Starts `n` (at least 2) members on free loopback ports and waits
    /// (up to [`ENSEMBLE_TIMEOUT`]) until all serve with exactly one leader;
    /// tries again on new ports when one was taken meanwhile.
    ///
    /// Panics when ZooKeeper or Java is missing (naming the package to
    /// install) or when the ensemble does not come up (printing the
    /// members' logs).
    pub fn start(n: usize) -> ZooKeeperEnsemble {
        assert!(n >= 2, "a quorum of one runs standalone: start a ZooKeeperServer");
        let why = format!("cannot start a ZooKeeper ensemble of {n}");
        for attempt in 1..=START_ATTEMPTS {
            let ensemble = Self::spawn_all(n).unwrap_or_else(|e| panic!("{why}: {e}"));
            let port_lost = |l: &str| l.contains("Address already in use").then_some(());
            match ensemble.wait_settled(n, ENSEMBLE_TIMEOUT) {
                Ok(_) => return ensemble,
                Err(_) if attempt < START_ATTEMPTS && !ensemble.log_lines(port_lost).is_empty() => {}
                Err(e) => panic!("{why}: {e}"),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    /// Writes each member's dir and spawns every JVM.
    fn spawn_all(n: usize) -> io::Result<ZooKeeperEnsemble> {
        let dir = tempfile::Builder::new()
            .prefix("jobworker-zk-ensemble-")
            .tempdir()?;
        // Per member: client, quorum and election port.
        let ports = free_ports(3 * n)?;
        let mut config = vec![
            ("initLimit".to_owned(), INIT_LIMIT.to_string()),
            ("syncLimit".to_owned(), SYNC_LIMIT.to_string()),
        ];
        config.extend(ports.chunks(3).enumerate().map(|(i, p)| {
            let address = format!("127.0.0.1:{}:{}", p[1], p[2]);
            (format!("server.{}", i + 1), address)
        }));
        let mut members = Vec::with_capacity(n);
        for i in 0..n {
            let member_dir = dir.path().join(format!("member-{}", i + 1));
            fs::create_dir_all(member_dir.join("data"))?;
            fs::write(member_dir.join("data/myid"), format!("{}\n", i + 1))?;
            fs::write(member_dir.join("simplelogger.properties"), LOGGER_PROPERTIES)?;
            members.push(ZooKeeperServer::spawn_unready(ZooKeeperOptions {
                port: Some(ports[3 * i]),
                dir: Some(member_dir),
                extra_config: config.clone(),
                ..ZooKeeperOptions::default()
            })?);
        }
        Ok(ZooKeeperEnsemble { members, _dir: dir })
    }

    /// `127.0.0.1:P1,127.0.0.1:P2,…`: every member's client port.
    pub fn connect_string(&self) -> String {
        let hosts: Vec<String> = self.members.iter().map(|m| m.connect_string()).collect();
        hosts.join(",")
    }

    /// [`connect_string`](Self::connect_string) followed by `path`, which
    /// must be absolute: a chroot for ZooKeeper clients, the root of the
    /// queues for jobworker's `--zookeeper`.
    pub fn connect_string_with_chroot(&self, path: &str) -> String {
        assert!(path.starts_with('/'), "path {path:?} must be absolute");
        format!("{}{path}", self.connect_string())
    }

    /// How many members the ensemble has (live or not).
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// Member `i` itself (its four-letter words, log, dirs).
    pub fn member(&self, i: usize) -> &ZooKeeperServer {
        &self.members[i]
    }

    /// The loopback client port of member `i`.
    pub fn port(&self, i: usize) -> u16 {
        self.members[i].port()
    }

    /// PID of member `i` (of its last start).
    pub fn pid(&self, i: usize) -> u32 {
        self.members[i].pid()
    }

    /// True while member `i`'s process has not exited.
    pub fn is_running(&self, i: usize) -> bool {
        self.members[i].is_running()
    }

    /// What member `i` says it is now; `None` when it is down or does not
    /// serve (no quorum, or still syncing).
    pub fn mode(&self, i: usize) -> Option<ZooKeeperMode> {
        if !self.is_running(i) {
            return None;
        }
        self.members[i]
            .four_letter_word("srvr")
            .ok()
            .and_then(|s| ZooKeeperMode::parse(&s))
    }

    /// The member that leads now.
    ///
    /// Panics unless exactly one member says it leads.
    pub fn leader(&self) -> usize {
        let leaders: Vec<usize> = (0..self.size())
            .filter(|&i| self.mode(i) == Some(ZooKeeperMode::Leader))
            .collect();
        match leaders[..] {
            [one] => one,
            _ => panic!("expected one leader, found {leaders:?}; {}", self.modes_text()),
        }
    }

    /// Kills member `i` with `SIGKILL` (by PID) and reaps it. Its data dir
    /// stays for [`restart`](Self::restart).
    pub fn kill(&mut self, i: usize) {
        let pid = self.pid(i);
        self.members[i]
            .kill()
            .unwrap_or_else(|e| panic!("cannot kill ZooKeeper member {i} (pid {pid}): {e}"));
    }

    /// Starts member `i` again on the same ports, dir and config (a running
    /// one is stopped first) and waits (up to [`ENSEMBLE_TIMEOUT`]) until it
    /// serves, as leader or follower, in a settled quorum.
    ///
    /// Panics when it does not.
    pub fn restart(&mut self, i: usize) {
        self.members[i]
            .respawn()
            .unwrap_or_else(|e| panic!("cannot restart ZooKeeper member {i}: {e}"));
        if let Err(e) = self.members[i].wait_serving(ENSEMBLE_TIMEOUT) {
            panic!("ZooKeeper member {i} did not rejoin: {e}");
        }
        self.wait_leader(ENSEMBLE_TIMEOUT);
        assert!(self.is_running(i), "ZooKeeper member {i} died after it rejoined");
    }

    /// Waits until every live member serves as leader or follower, exactly
    /// one leads, and the live members are a quorum; returns the leader.
    ///
    /// Panics after `timeout`, with the members' modes.
    pub fn wait_leader(&self, timeout: Duration) -> usize {
        let quorum = self.size() / 2 + 1;
        self.wait_settled(quorum, timeout)
            .unwrap_or_else(|why| panic!("{why}"))
    }

    /// [`wait_leader`](Self::wait_leader) after
    /// [`kill`](Self::kill)`(previous)` of the leader: waits until the live
    /// members have elected a new one, and returns it.
    ///
    /// Panics after `timeout`, or when `previous` still runs.
    pub fn wait_new_leader(&self, previous: usize, timeout: Duration) -> usize {
        assert!(!self.is_running(previous), "member {previous} was not killed");
        self.wait_leader(timeout)
    }

    /// Waits until at least `need` members live, every live one serves as
    /// leader or follower and exactly one leads; returns the leader.
    fn wait_settled(&self, need: usize, timeout: Duration) -> Result<usize, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let live: Vec<(usize, Option<ZooKeeperMode>)> = (0..self.size())
                .filter(|&i| self.is_running(i))
                .map(|i| (i, self.mode(i)))
                .collect();
            let leaders: Vec<usize> = live
                .iter()
                .filter_map(|&(i, m)| (m == Some(ZooKeeperMode::Leader)).then_some(i))
                .collect();
            let all_serve = live
                .iter()
                .all(|(_, m)| matches!(m, Some(ZooKeeperMode::Leader | ZooKeeperMode::Follower)));
            if live.len() >= need && all_serve && leaders.len() == 1 {
                return Ok(leaders[0]);
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "no settled quorum after {timeout:?} ({need} members needed); {}",
                    self.modes_text()
                ));
            }
            thread::sleep(MODE_POLL);
        }
    }

    /// `[member i pid P port Q: mode]` for each member, for messages.
    pub fn modes_text(&self) -> String {
        let text = |i: usize| {
            let mode = match (self.is_running(i), self.mode(i)) {
                (false, _) => "down".to_owned(),
                (true, None) => "not serving".to_owned(),
                (true, Some(m)) => format!("{m:?}"),
            };
            format!("[member {i} pid {} port {}: {mode}]", self.pid(i), self.port(i))
        };
        let all: Vec<String> = (0..self.size()).map(text).collect();
        format!("modes: {}", all.join(" "))
    }

    /// The last [`TAIL_LINES`] lines of every member's log, each under a
    /// header naming the file, but `debug` entries and the answers to
    /// four-letter words: what to print when a test fails (the ensemble
    /// prints them itself when it is dropped by a panicking test).
    pub fn log_tails(&self) -> String {
        let tail = |(i, m): (usize, &ZooKeeperServer)| {
            let text = fs::read_to_string(m.log_path()).unwrap_or_default();
            let mut quiet = false;
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| {
                    // An entry starts with its time; others continue it.
                    if l.as_bytes().get(2) == Some(&b':') {
                        quiet = l.contains(" DEBUG ") || l.contains("NIOServerCnxn - Processing ");
                    }
                    !quiet
                })
                .collect();
            let tail = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
            format!("--- member {i}: {} ---\n{tail}\n", m.log_path().display())
        };
        self.members.iter().enumerate().map(tail).collect()
    }

    /// Every session established by a member so far (new sessions and
    /// sessions that moved to it), in each member's log order.
    pub fn established_sessions(&self) -> Vec<EstablishedSession> {
        self.log_lines(|line| {
            let (session, timeout_ms) = parse_established(line)?;
            Some(EstablishedSession { session, timeout_ms })
        })
    }

    /// The ids of sessions a leader expired so far (`Expiring session 0x…`).
    pub fn expired_sessions(&self) -> Vec<String> {
        self.log_lines(|l| {
            let rest = &l[l.find("Expiring session 0x")? + "Expiring session ".len()..];
            Some(rest.split([',', ' ']).next()?.to_owned())
        })
    }

    /// What `pick(line)` finds in the members' logs, member by member.
    fn log_lines<T>(&self, pick: impl Fn(&str) -> Option<T>) -> Vec<T> {
        let logs = self.members.iter().map(|m| fs::read_to_string(m.log_path()));
        let logs: Vec<String> = logs.map(Result::unwrap_or_default).collect();
        logs.iter()
            .flat_map(|log| log.lines().filter_map(&pick))
            .collect()
    }
}

impl Drop for ZooKeeperEnsemble {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("ZooKeeper ensemble logs:\n{}", self.log_tails());
        }
    }
}

/// `(session, timeout)` of an `Established session 0x… with negotiated
/// timeout N for client …` log line.
fn parse_established(line: &str) -> Option<(String, u64)> {
    let rest = &line[line.find("Established session 0x")? + "Established session ".len()..];
    let mut words = rest.split_whitespace();
    let session = words.next()?.to_owned();
    let timeout = words.nth(3)?.parse().ok()?;
    Some((session, timeout))
}

/// `k` distinct free loopback ports (all bound at once, then released).
fn free_ports(k: usize) -> io::Result<Vec<u16>> {
    let listeners = (0..k)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<io::Result<Vec<_>>>()?;
    listeners.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_modes_and_session_lines() {
        assert_eq!(
            ZooKeeperMode::parse("Zookeeper version: 3.8\nMode: follower\nNode count: 5\n"),
            Some(ZooKeeperMode::Follower)
        );
        assert_eq!(
            ZooKeeperMode::parse("This ZooKeeper instance is not currently serving requests\n"),
            None
        );
        let line = "12:00:00.000 [NIOWorkerThread-1] DEBUG org.apache.zookeeper.server.ZooKeeperServer - \
                    Established session 0x10000a1b2c30000 with negotiated timeout 10000 for client /127.0.0.1:4242";
        assert_eq!(
            parse_established(line),
            Some(("0x10000a1b2c30000".to_owned(), 10000))
        );
        assert_eq!(parse_established("Established nothing"), None);
    }
}
