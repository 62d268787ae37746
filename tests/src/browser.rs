//! A real headless Chromium for browser tests, driven over WebDriver.
//!
//! [`Browser::start`] finds Debian's `chromium` and `chromedriver`, starts
//! chromedriver on a free loopback port and opens a
//! [fantoccini](https://docs.rs/fantoccini/0.22) session with a fresh
//! profile. The methods wait on conditions (an element, a text, an alert)
//! with a generous deadline, [`WAIT`], and panic with the page's current
//! text when it passes; tests never sleep.
//!
//! ```no_run
//! # async fn demo() {
//! use jobworker_tests::browser::Browser;
//! let browser = Browser::start().await;
//! browser.goto("http://127.0.0.1:8080/").await;
//! browser.fill("#name", "ada").await;
//! browser.submit("form#add").await;
//! browser.wait_for_text("#flash", "added").await;
//! browser.screenshot("after_add").await;
//! browser.close().await;
//! # }
//! ```
//!
//! Clicking a link or submitting a form does not wait for the next page:
//! wait for something only the next page has ([`Browser::wait_for`],
//! [`Browser::wait_for_text`], [`Browser::wait_for_url`]).
//!
//! Nothing is skipped when a program is missing: [`Browser::start`] panics
//! and names `scripts/install-deps --tests`. A 2-core machine runs one
//! browser at a time best, so keep a binary's browser scenarios in one test.
//!
//! Cleanup: [`Browser::close`] ends the session (chromedriver quits
//! Chromium), then stops chromedriver and kills by PID whatever of the
//! browser is left. Dropping a `Browser` without `close` (a failed test)
//! does the same without waiting for a graceful exit.

mod actions;
mod launch;
mod poll;
mod reap;
mod shots;

use std::path::PathBuf;
use std::time::Duration;

use fantoccini::Client;
use tempfile::TempDir;

pub use reap::running;
pub use shots::screenshots_dir;

use launch::Driver;

/// How long the methods wait for their condition before they panic.
pub const WAIT: Duration = Duration::from_secs(30);

/// How long [`Browser::start`] waits for chromedriver and the session.
pub const START_WAIT: Duration = Duration::from_secs(60);

/// The flags Chromium gets (with `--user-data-dir=<a fresh temp dir>`):
/// headless, no sandbox (needed as root), no GPU, no `/dev/shm` (small in
/// containers), and a fixed window for screenshots.
pub const CHROMIUM_ARGS: [&str; 5] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
];

/// A chromedriver process and one WebDriver session of a headless Chromium.
///
/// See the [module docs](self) for an example.
#[derive(Debug)]
pub struct Browser {
    /// `None` once the session is closed.
    client: Option<Client>,
    session: Option<String>,
    driver: Driver,
    /// Holds Chromium's `--user-data-dir` (`profile/`) and its XDG config
    /// and cache dirs (so its crash handler keeps its database here, not in
    /// `~/.config`); its path also marks Chromium's processes (it is on
    /// their command lines).
    home: TempDir,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a session of
    /// a headless Chromium with a fresh profile.
    ///
    /// Uses `$JOBWORKER_CHROMIUM` / `$JOBWORKER_CHROMEDRIVER` when set,
    /// else `/usr/bin/chromium` (or `chromium` on `PATH`) and `chromedriver`
    /// on `PATH`. Panics, naming `scripts/install-deps --tests`, when one is
    /// missing or is Ubuntu's snap stub, and when chromedriver or the
    /// session does not come up within [`START_WAIT`].
    pub async fn start() -> Browser {
        let programs = launch::find_programs();
        let home = tempfile::Builder::new()
            .prefix("jobworker-chromium.")
            .tempdir()
            .expect("cannot make a temp dir for Chromium's profile");
        let driver = Driver::spawn(&programs, home.path()).await;
        let client = launch::connect(&driver, &programs, home.path()).await;
        let session = client.session_id().await.ok().flatten();
        Browser {
            client: Some(client),
            session,
            driver,
            home,
        }
    }

    /// The fantoccini client, for what the methods here do not cover.
    pub fn client(&self) -> &Client {
        self.client.as_ref().expect("the browser session is closed")
    }

    /// The PIDs of chromedriver and of every Chromium process it started,
    /// as of now (to check with [`running`] that none outlives the test).
    pub fn process_ids(&self) -> Vec<u32> {
        let mut pids = vec![self.driver.pid()];
        pids.extend(reap::browser_processes(self.driver.live_pid(), self.home.path()));
        pids
    }

    /// Chromium's profile directory (`--user-data-dir`), removed when the
    /// `Browser` is closed or dropped.
    pub fn profile_dir(&self) -> PathBuf {
        self.home.path().join("profile")
    }

    /// Ends the session (chromedriver quits Chromium), waits up to [`WAIT`]
    /// for Chromium's processes to exit, then stops chromedriver and kills
    /// by PID any process of the browser still there.
    ///
    /// Panics when the session could not be closed (after cleaning up).
    pub async fn close(mut self) {
        let client = self.client.take().expect("the browser session is closed");
        let closed = client.close().await;
        self.session = None;
        reap::wait_gone(self.driver.live_pid(), self.home.path(), WAIT).await;
        self.stop();
        if let Err(e) = closed {
            panic!("closing the WebDriver session failed: {e}");
        }
    }

    /// Kills what is left: the browser's processes, then chromedriver.
    fn stop(&mut self) {
        reap::kill_all(&reap::browser_processes(self.driver.live_pid(), self.home.path()));
        self.driver.kill();
    }
}

impl Drop for Browser {
    /// Best effort, without an async runtime: asks chromedriver to end the
    /// session if it is still open, then kills what is left by PID.
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            reap::delete_session(self.driver.port(), &session);
        }
        self.client = None;
        self.stop();
    }
}
