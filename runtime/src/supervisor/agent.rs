//! Forking the supervisor's ZooKeeper agent (`board/agent.rs`) when the
//! board needs one: at the first question, and again after one failed.

use std::io::Write;
use std::os::unix::net::UnixStream;

use nix::sys::signal::Signal;
use nix::unistd::{getppid, setpgid, ForkResult, Pid};

use crate::board::agent::{self, Agent};
use crate::board::{BlockingBoard, QueueCounts};
use crate::supervisor::run::Supervisor;

impl Supervisor {
    /// The board, with its agent forked first where it needs one (a fork
    /// that fails leaves it without: counts fail, recoveries go to the next
    /// worker forked).
    pub(super) fn board(&mut self) -> &mut BlockingBoard {
        if let Some(opts) = self.board.wants_agent().cloned() {
            match self.fork_agent(opts) {
                Ok(agent) => self.board.set_agent(agent),
                Err(e) => tracing::warn!(error = %e, "cannot fork the zookeeper agent"),
            }
        }
        &mut self.board
    }

    /// How many jobs the supervisor's queues hold together.
    pub(super) fn counts(&mut self) -> crate::Result<QueueCounts> {
        let queues = self.cfg.worker.queues.clone();
        self.board().counts(&queues)
    }

    fn fork_agent(&mut self, opts: crate::zookeeper::ZooKeeperOptions) -> crate::Result<Agent> {
        let (ours, theirs) = UnixStream::pair()
            .map_err(|e| crate::Error::io("cannot make the zookeeper agent's socket", e))?;
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        let parent = nix::unistd::getpid();
        // The supervisor is single-threaded (see `fork.rs`).
        match crate::fork::fork_single_threaded() {
            Ok(ForkResult::Parent { child }) => {
                drop(theirs);
                tracing::debug!(pid = child.as_raw(), "zookeeper agent started");
                Agent::new(child, ours)
            }
            Ok(ForkResult::Child) => {
                drop(ours);
                let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.agent_main(parent, opts, theirs)
                }))
                .unwrap_or(101);
                std::process::exit(code);
            }
            Err(e) => Err(crate::Error::io("cannot fork the zookeeper agent", e.into())),
        }
    }

    /// The forked agent: lets go of what is the supervisor's (as a worker
    /// does), then serves. Never returns to the supervisor loop.
    fn agent_main(
        &mut self,
        parent: Pid,
        opts: crate::zookeeper::ZooKeeperOptions,
        stream: UnixStream,
    ) -> i32 {
        drop(self.wakeups.take());
        drop(self.http.take());
        crate::console::forget();
        if let Some(relay) = &self.relay {
            relay.become_stderr();
        }
        if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err() || getppid() != parent {
            return 1;
        }
        // Out of the terminal's process group: Ctrl-C is the supervisor's.
        let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
        // Told apart from the workers in `ps` (and by tests that signal
        // workers): the supervisor's other child.
        let _ = nix::sys::prctl::set_name(agent::PROCESS_NAME);
        agent::serve(opts, stream)
    }
}
