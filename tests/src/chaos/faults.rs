//! The faults of a chaos run, in order, each when a share of the jobs has
//! succeeded: the whole supervisor tree killed and restarted, the queue
//! paused and resumed by an operator, the board server killed and
//! restarted, a worker frozen past its lease. Worker kills (see `driver`)
//! and cancels (see `cancels`) go on all along.

/// One planned fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL the supervisor and every worker, then start a new
    /// supervisor; the killed workers' leases expire.
    TreeKill,
    /// `jobworker pause` of the queue, and `jobworker resume` after
    /// [`PAUSE_FOR`](crate::chaos::config::PAUSE_FOR).
    Pause,
    /// SIGKILL the board server, then restart it on the same port and data.
    ServerRestart,
    /// SIGSTOP a worker with runs in flight past its lease (on ZooKeeper
    /// past its session too), then SIGCONT it.
    Freeze,
}

impl Fault {
    /// Name for the report.
    pub fn name(self) -> &'static str {
        match self {
            Fault::TreeKill => "supervisor tree kill",
            Fault::Pause => "queue pause + resume",
            Fault::ServerRestart => "server restart",
            Fault::Freeze => "worker freeze (SIGSTOP)",
        }
    }
}

/// The plan: each fault once, when this share of the jobs has succeeded
/// (and the one before is over). The freeze comes last, so that the
/// other workers still have work while it lasts.
pub const PLAN: [(f64, Fault); 4] = [
    (0.20, Fault::TreeKill),
    (0.30, Fault::Pause),
    (0.40, Fault::ServerRestart),
    (0.60, Fault::Freeze),
];
