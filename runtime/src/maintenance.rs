//! Maintenance: the side work no claim should wait for, run by one elected
//! worker per queue (River's leader election and maintenance services are
//! the model).
//!
//! Each worker process starts a [`Maintainer`] on its runtime (never the
//! supervisor, which forks and stays single-threaded). For each of the
//! worker's queues it asks the board for the queue's leadership every
//! `ttl / 3` ([`Maintenance::elect`]: take it when free, renew it when
//! held); while it leads a queue it runs each service on the service's own
//! interval; when stopped it resigns, so another worker takes over at its
//! next election instead of after the ttl. A worker that dies stops
//! renewing, and its leadership expires after the ttl.
//!
//! The services, one per file:
//!
//! | service | what | interval |
//! | --- | --- | --- |
//! | [`index`] | index taskflow's postings (quarantining undecodable ones) | [`index::INTERVAL`] |
//! | [`outbox`] | resolve dependency releases owed to other queues | [`outbox::INTERVAL`] |
//! | [`recurring`] | spawn due recurring slots | [`recurring::INTERVAL`] |
//!
//! Pruning the completed history and the trash stays inside `claim.lua`:
//! it costs no round trip there (the claim runs anyway, in the queue's
//! slot) and is bounded per claim, so a service would only add traffic.
//!
//! Errors are logged and never stop the worker. A board without these
//! features answers the election with an `is_unsupported` error, and the
//! runner then ends without running anything. Both boards have them: on
//! ZooKeeper the leadership is an ephemeral znode of the leader's session
//! and only the recurring service has work (no index, no outboxes).

pub mod index;
pub mod outbox;
pub mod recurring;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::board::Maintenance;
use crate::error::Result;

/// How long a leadership lasts unless renewed (it is renewed every third
/// of it): a dead leader's queues are taken over within about this long.
pub const DEFAULT_TTL: Duration = Duration::from_secs(5);

/// How long [`Maintainer::stop`] waits for the runner to resign (a board
/// that does not answer must not hold up a worker's exit).
const STOP_GRACE: Duration = Duration::from_secs(1);

/// One maintenance service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// Index taskflow's postings ([`index`]).
    Index,
    /// Resolve releases owed to other queues ([`outbox`]).
    Outbox,
    /// Spawn due recurring slots ([`recurring`]).
    Recurring,
}

impl Service {
    /// Every service, in the order a leader runs them.
    pub const ALL: [Service; 3] = [Service::Index, Service::Outbox, Service::Recurring];

    /// The service's name, for logs.
    pub fn name(self) -> &'static str {
        match self {
            Service::Index => "index",
            Service::Outbox => "outbox",
            Service::Recurring => "recurring",
        }
    }

    /// How often a leader runs it.
    pub fn interval(self) -> Duration {
        match self {
            Service::Index => index::INTERVAL,
            Service::Outbox => outbox::INTERVAL,
            Service::Recurring => recurring::INTERVAL,
        }
    }

    /// One pass over `queue`; returns how much it did.
    async fn run<B: Maintenance>(self, board: &B, queue: &str) -> Result<usize> {
        match self {
            Service::Index => index::run(board, queue).await,
            Service::Outbox => outbox::run(board, queue).await,
            Service::Recurring => recurring::run(board, queue).await,
        }
    }
}

/// A running maintenance runner (see the module doc). Dropping it without
/// [`stop`](Self::stop) aborts it without resigning, as a crash would.
///
/// ```
/// # use jobworker::embedded::{RedisServer, ServerOptions};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> jobworker::Result<()> {
/// # let server = RedisServer::start(ServerOptions::default())?;
/// use jobworker::maintenance::Maintainer;
/// use jobworker::redis::RedisBoard;
///
/// // A program that claims jobs itself runs the maintenance jobworker's
/// // workers run: promoting, recurring spawns, releases owed.
/// let board = RedisBoard::connect(&server.url()).await?;
/// let maintainer = Maintainer::start(board, vec!["reports".into()], "reporter-1".into());
/// assert!(maintainer.is_running());
/// maintainer.stop().await; // resigns its leadership
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Maintainer {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    leading: Arc<Mutex<BTreeSet<String>>>,
}

impl Maintainer {
    /// Starts the runner for `queues` as `who` (the worker's owner string)
    /// on the current tokio runtime, with [`DEFAULT_TTL`].
    pub fn start<B>(board: B, queues: Vec<String>, who: String) -> Maintainer
    where
        B: Maintenance + Send + 'static,
    {
        Maintainer::with_ttl(board, queues, who, DEFAULT_TTL)
    }

    /// [`start`](Self::start) with a leadership ttl of its own.
    pub fn with_ttl<B>(board: B, queues: Vec<String>, who: String, ttl: Duration) -> Maintainer
    where
        B: Maintenance + Send + 'static,
    {
        let (stop, stopped) = oneshot::channel();
        let leading = Arc::new(Mutex::new(BTreeSet::new()));
        let runner = Runner {
            board,
            queues,
            who,
            ttl: ttl.max(Duration::from_millis(30)),
            leading: leading.clone(),
        };
        Maintainer {
            stop: Some(stop),
            task: Some(tokio::spawn(runner.run(stopped))),
            leading,
        }
    }

    /// True while this runner leads `queue`'s maintenance.
    pub fn leads(&self, queue: &str) -> bool {
        self.leading.lock().is_ok_and(|l| l.contains(queue))
    }

    /// False once the runner has ended: stopped, or on a board without
    /// maintenance (see [`Maintenance`]).
    pub fn is_running(&self) -> bool {
        self.task.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the runner: it finishes the pass it is in and resigns.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(STOP_GRACE, task).await.is_err() {
                abort.abort();
                tracing::warn!("maintenance did not stop in time; its leadership expires instead");
            }
        }
    }
}

impl Drop for Maintainer {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The runner's task.
struct Runner<B> {
    board: B,
    queues: Vec<String>,
    who: String,
    ttl: Duration,
    leading: Arc<Mutex<BTreeSet<String>>>,
}

impl<B: Maintenance> Runner<B> {
    async fn run(self, mut stopped: oneshot::Receiver<()>) {
        let start = Instant::now();
        let mut next_elect = start;
        let mut next_run = [start; Service::ALL.len()];
        loop {
            if Instant::now() >= next_elect {
                if !self.elect().await {
                    return;
                }
                next_elect = Instant::now() + self.ttl / 3;
            }
            for (service, next) in Service::ALL.into_iter().zip(&mut next_run) {
                if Instant::now() >= *next {
                    self.serve(service).await;
                    *next = Instant::now() + service.interval();
                }
            }
            let wake = next_run.iter().copied().fold(next_elect, Instant::min);
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
        self.resign().await;
    }

    /// Takes or renews each queue's leadership; false when the board has
    /// no maintenance (nothing to run, ever).
    async fn elect(&self) -> bool {
        for queue in &self.queues {
            let leads = match self.board.elect(queue, &self.who, self.ttl).await {
                Ok(leads) => leads,
                Err(e) if e.is_unsupported() => {
                    tracing::debug!(error = %e, "no maintenance on this board");
                    return false;
                }
                Err(e) => {
                    tracing::warn!(queue = %queue, error = %e, "maintenance election failed; not leading");
                    false
                }
            };
            self.set_leading(queue, leads);
        }
        true
    }

    fn set_leading(&self, queue: &str, leads: bool) {
        let Ok(mut leading) = self.leading.lock() else {
            return;
        };
        let changed = if leads {
            leading.insert(queue.to_owned())
        } else {
            leading.remove(queue)
        };
        if changed {
            tracing::debug!(queue = %queue, leads, who = %self.who, "maintenance leadership changed");
        }
    }

    fn led(&self) -> Vec<String> {
        self.leading
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// One pass of `service` over every queue this runner leads.
    async fn serve(&self, service: Service) {
        for queue in self.led() {
            match service.run(&self.board, &queue).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(queue = %queue, service = service.name(), n, "maintenance did work"),
                Err(e) => {
                    tracing::warn!(queue = %queue, service = service.name(), error = %e, "maintenance failed")
                }
            }
        }
    }

    async fn resign(&self) {
        for queue in self.led() {
            if let Err(e) = self.board.resign(&queue, &self.who).await {
                tracing::debug!(queue = %queue, error = %e, "resigning maintenance failed");
            }
            self.set_leading(&queue, false);
        }
    }
}
