//! Real taskflow (PyPI) in a virtualenv, for interop tests.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use crate::workspace_dir;

/// The taskflow release the interop tests are written against.
pub const TASKFLOW_VERSION: &str = "6.5.0";
/// Environment variable naming the virtualenv to use instead of
/// `<workspace>/target/taskflow-venv`.
pub const TASKFLOW_VENV_ENV: &str = "JOBWORKER_TASKFLOW_VENV";
/// How long one [`run_python`] script may run before it is killed.
pub const PYTHON_TIMEOUT: Duration = Duration::from_secs(120);

/// Packages installed into a new virtualenv.
const PIP_PACKAGES: &[&str] = &["taskflow==6.5.0", "redis", "kazoo"];
/// Lines of pip output quoted when the install fails.
const OUTPUT_TAIL_LINES: usize = 40;
/// Hint printed when the virtualenv cannot be made.
const VENV_HINT: &str = "install Python's venv support with `apt-get install -y python3-venv`";

static PYTHON: OnceLock<PathBuf> = OnceLock::new();

/// The `python` of a virtualenv with `taskflow==6.5.0`, `redis` and `kazoo`.
///
/// Uses `$JOBWORKER_TASKFLOW_VENV` if set, else
/// `<workspace>/target/taskflow-venv`. A missing venv, or one without the
/// right taskflow, is (re)made with `python3 -m venv` and `pip install`
/// (about a minute the first time) under an exclusive `flock` on
/// `<venv>.lock`, so parallel test binaries do not race. Checked once per
/// process.
///
/// Panics with the tail of the pip output and the hint
/// `apt-get install -y python3-venv` when that fails.
pub fn taskflow_python() -> PathBuf {
    PYTHON.get_or_init(ensure_venv).clone()
}

fn venv_dir() -> PathBuf {
    match std::env::var_os(TASKFLOW_VENV_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => workspace_dir().join("target").join("taskflow-venv"),
    }
}

fn ensure_venv() -> PathBuf {
    let venv = venv_dir();
    let python = venv.join("bin").join("python");
    if venv_ready(&python) {
        return python;
    }
    if let Some(parent) = venv.parent() {
        fs::create_dir_all(parent).unwrap_or_else(|e| panic!("cannot create {}: {e}", parent.display()));
    }
    let mut lock_path = OsString::from(venv.as_os_str());
    lock_path.push(".lock");
    let lock = lock_exclusive(Path::new(&lock_path));
    // Another process may have finished the venv while we waited.
    if !venv_ready(&python) {
        build_venv(&venv, &python);
    }
    drop(lock);
    python
}

/// True when `python` runs and imports the right taskflow, redis and kazoo.
fn venv_ready(python: &Path) -> bool {
    if !python.exists() {
        return false;
    }
    let check = format!(
        "import importlib.metadata as m, taskflow, redis, kazoo\n\
         assert m.version('taskflow') == '{TASKFLOW_VERSION}', m.version('taskflow')"
    );
    Command::new(python)
        .args(["-c", &check])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn build_venv(venv: &Path, python: &Path) {
    // Straight to stderr, past the test harness's capture: this takes a while.
    let _ = writeln!(
        io::stderr(),
        "jobworker-tests: making the taskflow {TASKFLOW_VERSION} virtualenv at {} \
         (takes about a minute, once)",
        venv.display()
    );
    // Also on an existing venv: it is idempotent and brings back a pip that
    // an interrupted earlier run did not finish installing.
    let made = dies_with_us(Command::new("python3").arg("-m").arg("venv").arg(venv))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run python3 ({e}); install it with `apt-get install -y python3 python3-venv`")
        });
    if !made.status.success() || !python.exists() {
        panic!(
            "`python3 -m venv {}` failed ({}); {VENV_HINT}\n{}",
            venv.display(),
            made.status,
            output_tail(&made)
        );
    }
    let out = dies_with_us(
        Command::new(python)
            .args(["-m", "pip", "install", "--disable-pip-version-check"])
            .args(PIP_PACKAGES),
    )
    .stdin(Stdio::null())
    .output()
    .unwrap_or_else(|e| panic!("cannot run {}: {e}; {VENV_HINT}", python.display()));
    if !out.status.success() {
        panic!(
            "`pip install {}` into {} failed ({}); {VENV_HINT}\n{}",
            PIP_PACKAGES.join(" "),
            venv.display(),
            out.status,
            output_tail(&out)
        );
    }
    if !venv_ready(python) {
        panic!(
            "the virtualenv at {} still cannot import taskflow {TASKFLOW_VERSION}, redis and \
             kazoo after pip install; {VENV_HINT}\n{}",
            venv.display(),
            output_tail(&out)
        );
    }
}

/// Arms `PDEATHSIG=SIGKILL` on `cmd`'s process, so a killed test binary
/// leaves no installer (or script) running. It fires when the calling thread
/// exits, and every caller here waits for the child on that thread.
fn dies_with_us(cmd: &mut Command) -> &mut Command {
    // SAFETY: runs in the forked child before exec and only makes the
    // async-signal-safe `prctl` system call, without allocating.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        })
    }
}

/// Opens `path` and takes an exclusive `flock` on it; released on drop.
fn lock_exclusive(path: &Path) -> File {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("cannot open lock file {}: {e}", path.display()));
    loop {
        // SAFETY: flock on a descriptor we own for the duration of the call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return file;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            panic!("cannot lock {}: {err}", path.display());
        }
    }
}

/// The last [`OUTPUT_TAIL_LINES`] lines of stdout and stderr.
fn output_tail(out: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(OUTPUT_TAIL_LINES)..].join("\n")
}

/// What a Python script printed, and how it ended.
#[derive(Debug, Clone)]
pub struct PyOutput {
    /// Everything the script wrote to stdout.
    pub stdout: String,
    /// Everything the script wrote to stderr.
    pub stderr: String,
    /// The exit status.
    pub status: ExitStatus,
}

impl PyOutput {
    /// True when the script exited with status 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Panics, showing stdout and stderr, unless the script exited with 0.
    pub fn assert_success(&self) -> &Self {
        if !self.success() {
            panic!("python script failed ({})\n{}", self.status, self.dump());
        }
        self
    }

    /// The last non-empty line of stdout parsed as JSON.
    ///
    /// Panics, showing stdout and stderr, when the script failed or that
    /// line is missing or not JSON.
    pub fn json(&self) -> serde_json::Value {
        self.assert_success();
        let Some(line) = self.stdout.lines().rev().find(|l| !l.trim().is_empty()) else {
            panic!("python script printed nothing on stdout\n{}", self.dump());
        };
        serde_json::from_str(line).unwrap_or_else(|e| {
            panic!(
                "last stdout line of the python script is not JSON ({e}): {line:?}\n{}",
                self.dump()
            )
        })
    }

    fn dump(&self) -> String {
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout.trim_end(),
            self.stderr.trim_end()
        )
    }
}

/// Runs `script` with [`taskflow_python`] and `args` (as `sys.argv[1:]`),
/// from a file in a temp dir of its own, and returns what it printed.
///
/// Blocks the calling thread; inside a tokio test that runs Rust tasks at
/// the same time, use [`run_python_async`]. A script still running after
/// [`PYTHON_TIMEOUT`] is killed (by PID) and the test panics with its output.
pub fn run_python(script: &str, args: &[&str]) -> PyOutput {
    let python = taskflow_python();
    let dir = tempfile::Builder::new()
        .prefix("jobworker-py-")
        .tempdir()
        .expect("cannot create a temp dir for the python script");
    let path = dir.path().join("script.py");
    fs::write(&path, script).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    let child = dies_with_us(Command::new(&python).arg(&path).args(args))
        .current_dir(dir.path())
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    wait_with_timeout(child, PYTHON_TIMEOUT)
}

/// [`run_python`] on tokio's blocking pool, so the test's other tasks keep
/// running meanwhile.
pub async fn run_python_async(script: &str, args: &[&str]) -> PyOutput {
    let script = script.to_owned();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_python(&script, &args)
    })
    .await
    .unwrap_or_else(|e| match e.try_into_panic() {
        Ok(panic) => std::panic::resume_unwind(panic),
        Err(e) => panic!("python task failed: {e}"),
    })
}

/// Collects the child's output; kills it after `timeout`.
fn wait_with_timeout(mut child: Child, timeout: Duration) -> PyOutput {
    let stdout = reader(child.stdout.take());
    let stderr = reader(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().expect("cannot wait for the killed python script");
            }
            Err(e) => panic!("cannot wait for the python script: {e}"),
        }
    };
    let out = PyOutput {
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
        status,
    };
    if timed_out {
        panic!(
            "python script timed out after {timeout:?} and was killed\n{}",
            out.dump()
        );
    }
    out
}

fn reader(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}
