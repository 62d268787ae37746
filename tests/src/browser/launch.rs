//! Finding Chromium and chromedriver, starting chromedriver, opening the
//! session.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use tempfile::TempDir;
use tokio::time::Instant;

use super::{CHROMIUM_ARGS, START_WAIT};

/// What to run and how to install it.
const INSTALL_HINT: &str = "run `scripts/install-deps --tests` (Debian: `apt-get install -y \
     chromium chromium-driver fonts-dejavu-core`), or point $JOBWORKER_CHROMIUM and \
     $JOBWORKER_CHROMEDRIVER at a real Chromium and its chromedriver";

/// The two programs, checked to be real (not snap stubs).
#[derive(Debug)]
pub(super) struct Programs {
    pub(super) chromium: PathBuf,
    pub(super) chromedriver: PathBuf,
    /// `--version` of each, for error messages.
    versions: String,
}

/// Finds and checks Chromium and chromedriver, or panics with the install
/// hint.
pub(super) fn find_programs() -> Programs {
    let chromium = locate("JOBWORKER_CHROMIUM", &["/usr/bin/chromium"], "chromium");
    let chromedriver = locate("JOBWORKER_CHROMEDRIVER", &[], "chromedriver");
    let versions = format!(
        "{}; {}",
        check_real(&chromium, "Chromium"),
        check_real(&chromedriver, "ChromeDriver")
    );
    Programs {
        chromium,
        chromedriver,
        versions,
    }
}

/// `$env` if set, else the first of `fixed` that exists, else `name` on
/// `PATH`.
fn locate(env: &str, fixed: &[&str], name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return PathBuf::from(path);
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|dir| dir.join(name))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    fixed
        .iter()
        .map(PathBuf::from)
        .chain(on_path)
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("{name} not found (looked at {fixed:?} and PATH) for the browser tests; {INSTALL_HINT}")
        })
}

/// Panics unless `path` is a real program (not Ubuntu's snap transitional
/// stub) whose `--version` mentions `brand`; returns that version line.
fn check_real(path: &Path, brand: &str) -> String {
    let real = path.canonicalize().unwrap_or_else(|e| {
        panic!(
            "{} is not usable ({e}) for the browser tests; {INSTALL_HINT}",
            path.display()
        )
    });
    let head = std::fs::read(&real)
        .map(|b| b[..b.len().min(64 * 1024)].to_vec())
        .unwrap_or_default();
    let script = head.starts_with(b"#!");
    let snap = real.starts_with("/snap/") || (script && contains(&head, b"snap"));
    if snap {
        panic!(
            "{} ({}) is Ubuntu's snap stub, which does not run without snapd; {INSTALL_HINT}",
            path.display(),
            real.display()
        );
    }
    let out = Command::new(path).arg("--version").stdin(Stdio::null()).output();
    let version = out
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    if !version.contains(brand) {
        panic!(
            "{} --version printed {version:?}, not {brand}'s version; {INSTALL_HINT}",
            path.display()
        );
    }
    version
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A running chromedriver, killed (and reaped) on drop.
#[derive(Debug)]
pub(super) struct Driver {
    child: Child,
    /// Set once `child` is reaped: its PID may then be reused.
    reaped: bool,
    port: u16,
    /// Holds `chromedriver.out` (its stdout and stderr).
    dir: TempDir,
}

impl Driver {
    /// Starts chromedriver with `--port=0` and reads the port it chose from
    /// its output; waits until the port accepts connections.
    /// Chromium (its child) gets `home/config` and `home/cache` as its XDG
    /// config and cache dirs.
    pub(super) async fn spawn(programs: &Programs, home: &Path) -> Driver {
        let dir = tempfile::Builder::new()
            .prefix("jobworker-chromedriver.")
            .tempdir()
            .expect("temp dir");
        let out = File::create(dir.path().join("chromedriver.out")).expect("chromedriver.out");
        let child = Command::new(&programs.chromedriver)
            .arg("--port=0")
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup chromedriver.out"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {}: {e}; {INSTALL_HINT}",
                    programs.chromedriver.display()
                )
            });
        let mut driver = Driver {
            child,
            reaped: false,
            port: 0,
            dir,
        };
        driver.port = driver.wait_ready().await;
        driver
    }

    async fn wait_ready(&mut self) -> u16 {
        let deadline = Instant::now() + START_WAIT;
        loop {
            if let Some(port) = self.announced_port() {
                if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                    return port;
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                self.reaped = true;
                panic!(
                    "chromedriver exited ({status}) before it was ready: {}",
                    self.output()
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "chromedriver was not ready after {START_WAIT:?}: {}",
                    self.output()
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The port of "ChromeDriver was started successfully on port N.".
    fn announced_port(&self) -> Option<u16> {
        let out = self.output();
        let rest = out.split("started successfully on port ").nth(1)?;
        rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    }

    /// What chromedriver printed so far.
    pub(super) fn output(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("chromedriver.out")).unwrap_or_default()
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// chromedriver's PID while it is not reaped (so not reusable).
    pub(super) fn live_pid(&self) -> Option<u32> {
        (!self.reaped).then(|| self.child.id())
    }

    pub(super) fn port(&self) -> u16 {
        self.port
    }

    /// Kills and reaps chromedriver (a no-op once it is reaped).
    pub(super) fn kill(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.reaped = true;
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Opens the WebDriver session: headless Chromium with [`CHROMIUM_ARGS`]
/// and `home/profile` as its user data dir.
pub(super) async fn connect(driver: &Driver, programs: &Programs, home: &Path) -> Client {
    let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|a| a.to_string()).collect();
    args.push(format!("--user-data-dir={}", home.join("profile").display()));
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({ "binary": programs.chromium, "args": args }),
    );
    let url = format!("http://127.0.0.1:{}", driver.port());
    let mut builder = ClientBuilder::new(HttpConnector::new());
    builder.capabilities(caps);
    let result = tokio::time::timeout(START_WAIT, builder.connect(&url)).await;
    if !matches!(result, Ok(Ok(_))) {
        super::reap::kill_all(&super::reap::browser_processes(driver.live_pid(), home));
    }
    match result {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => panic!(
            "cannot open a Chromium session through chromedriver ({}): {e}\nchromedriver said: {}",
            programs.versions,
            driver.output()
        ),
        Err(_) => panic!(
            "no Chromium session after {START_WAIT:?} ({}); chromedriver said: {}",
            programs.versions,
            driver.output()
        ),
    }
}
