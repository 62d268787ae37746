//! The runs the scripted handler logged, read from its run log while the
//! workers append to it (see `jobworker_examples::scripted::run_log`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use jobworker_examples::scripted::run_log::{RunLine, RunOutcome};

/// One run of a job: a `start` line and, unless its process died first,
/// an `end` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The job id.
    pub id: String,
    /// The worker process.
    pub pid: u32,
    /// The fencing token of the claim it ran under.
    pub token: u64,
    /// When it started (µs since the epoch).
    pub start_us: u64,
    /// When and how it ended, if it logged its end.
    pub end: Option<(u64, RunOutcome)>,
}

/// The run log, read incrementally.
#[derive(Debug)]
pub struct Runs {
    path: PathBuf,
    /// Where the first line not read yet begins.
    offset: u64,
    runs: Vec<Run>,
    /// Run index by (job id, pid, token).
    by_key: HashMap<(String, u32, u64), usize>,
    /// Runs without an end line, by pid.
    open: HashMap<u32, BTreeSet<usize>>,
    /// Every pid that logged a run.
    pids: HashSet<u32>,
    /// Every job with a run.
    jobs: HashSet<String>,
    /// Jobs with at least one run that ended `ok`.
    ok_jobs: HashSet<String>,
    /// Lines that are not run lines, or `end` lines without their `start`.
    bad: Vec<String>,
}

impl Runs {
    /// A reader of the run log at `path` (which may not exist yet).
    pub fn new(path: &Path) -> Runs {
        Runs {
            path: path.to_path_buf(),
            offset: 0,
            runs: Vec::new(),
            by_key: HashMap::new(),
            open: HashMap::new(),
            pids: HashSet::new(),
            jobs: HashSet::new(),
            ok_jobs: HashSet::new(),
            bad: Vec::new(),
        }
    }

    /// Reads the lines appended since the last call. A line still being
    /// written is read again whole next time, not kept in part: a read
    /// racing an append sees part of it, and should a filesystem show the
    /// new size before the bytes, zeros in their place. (Kept in part, such
    /// a line would be lost for good: a guess at the one job of a sentinel
    /// drain that never ran, unconfirmed.)
    pub fn poll(&mut self) -> io::Result<()> {
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let Some(last_newline) = bytes.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        self.offset += last_newline as u64 + 1;
        for line in String::from_utf8_lossy(&bytes[..last_newline]).lines() {
            self.add(line);
        }
        Ok(())
    }

    fn add(&mut self, line: &str) {
        match RunLine::parse(line) {
            Some(RunLine::Start {
                id,
                pid,
                token,
                at_us,
            }) => {
                let index = self.runs.len();
                self.runs.push(Run {
                    id: id.clone(),
                    pid,
                    token,
                    start_us: at_us,
                    end: None,
                });
                self.by_key.insert((id.clone(), pid, token), index);
                self.open.entry(pid).or_default().insert(index);
                self.pids.insert(pid);
                self.jobs.insert(id);
            }
            Some(RunLine::End {
                id,
                pid,
                token,
                at_us,
                outcome,
            }) => {
                let Some(&index) = self.by_key.get(&(id.clone(), pid, token)) else {
                    self.bad.push(line.to_owned());
                    return;
                };
                self.runs[index].end = Some((at_us, outcome));
                if let Some(open) = self.open.get_mut(&pid) {
                    open.remove(&index);
                }
                if outcome == RunOutcome::Ok {
                    self.ok_jobs.insert(id);
                }
            }
            None => self.bad.push(line.to_owned()),
        }
    }

    /// Every run so far, in the order they started (log order).
    pub fn all(&self) -> &[Run] {
        &self.runs
    }

    /// Runs of `pid` without an end line.
    pub fn open_count(&self, pid: u32) -> usize {
        self.open.get(&pid).map_or(0, BTreeSet::len)
    }

    /// Runs without an end line (of live and dead processes alike).
    pub fn open_runs(&self) -> impl Iterator<Item = &Run> {
        self.open.values().flatten().map(|&i| &self.runs[i])
    }

    /// True when job `id` has a run.
    pub fn ran(&self, id: &str) -> bool {
        self.jobs.contains(id)
    }

    /// True when job `id` has a run that ended `ok`.
    pub fn ended_ok(&self, id: &str) -> bool {
        self.ok_jobs.contains(id)
    }

    /// True when `pid` has logged a run (so its worker had started).
    pub fn has_run(&self, pid: u32) -> bool {
        self.pids.contains(&pid)
    }

    /// How many jobs have a run that ended `ok`.
    pub fn ok_jobs(&self) -> usize {
        self.ok_jobs.len()
    }

    /// Lines that could not be matched (bad format, or an end without a start).
    pub fn bad_lines(&self) -> &[String] {
        &self.bad
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_appended_lines_and_matches_ends_to_starts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.log");
        let mut runs = Runs::new(&path);
        runs.poll().unwrap();
        let mut f = std::fs::File::create(&path).unwrap();
        write!(f, "start a 10 1 100\nstart b 10 1 101\nend a 10 1 150 ok\nsta").unwrap();
        runs.poll().unwrap();
        assert_eq!(runs.all().len(), 2);
        assert_eq!(runs.open_count(10), 1);
        assert_eq!(runs.ok_jobs(), 1);
        write!(f, "rt c 11 4 160\nend b 10 1 170 aborted\nend z 1 1 1 ok\n").unwrap();
        runs.poll().unwrap();
        assert_eq!(runs.all().len(), 3);
        assert_eq!(runs.open_count(10), 0);
        assert_eq!(runs.open_count(11), 1);
        assert!(runs.has_run(11) && !runs.has_run(12));
        assert!(runs.ran("c") && !runs.ran("z"));
        assert!(runs.ended_ok("a") && !runs.ended_ok("b"));
        let open: Vec<&str> = runs.open_runs().map(|r| r.id.as_str()).collect();
        assert_eq!(open, ["c"]);
        assert_eq!(runs.all()[1].end, Some((170, RunOutcome::Aborted)));
        assert_eq!(runs.bad_lines(), ["end z 1 1 1 ok"]);
    }

    /// A read that saw an unfinished line, even with zeros for bytes not
    /// yet written, reads it again whole.
    #[test]
    fn an_unfinished_line_is_read_again_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.log");
        let mut runs = Runs::new(&path);
        std::fs::write(&path, "start a 10 1 100\nstart b 10 1 1\0\0").unwrap();
        runs.poll().unwrap();
        assert_eq!(runs.all().len(), 1);
        std::fs::write(&path, "start a 10 1 100\nstart b 10 1 101\nend b 10 1 150 ok\n").unwrap();
        runs.poll().unwrap();
        assert_eq!(runs.all().len(), 2);
        assert!(runs.ended_ok("b"), "{:?}", runs.bad_lines());
        assert!(runs.bad_lines().is_empty(), "{:?}", runs.bad_lines());
    }
}
