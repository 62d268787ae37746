//! How the supervisor waits: blocked in `poll(2)` until something happens,
//! never polling on a timer of its own.
//!
//! The classic self-pipe. Every signal of the supervisor's table (SIGCHLD
//! included, so a worker's exit) is caught by signal-hook's handler, which
//! does only async-signal-safe things: it sets the signal's atomic flag,
//! then `send`s one byte with `MSG_DONTWAIT` on a socket pair (a full
//! buffer drops the byte, which is fine: the reader is woken all the same).
//! The loop `poll`s the read end, with the workers' log pipe and the
//! metrics listener and its clients (`metrics_http.rs`) beside it,
//! for at most the time to its next deadline (a respawn, the stop's grace,
//! the progress redraw), then drains the bytes and reads the flags.
//!
//! A signal that lands between the drain and the loop's next `poll` set
//! its flag and wrote its byte after the drain, so that `poll` returns at
//! once: nothing is missed, at worst the loop wakes once for nothing.
//!
//! No `unsafe` here: signal-hook installs the handler (its registry is the
//! one tokio uses in the workers, so a forked worker that drops this
//! struct can register its own handlers, see `fork.rs`).

use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use signal_hook::iterator::backend::SignalDelivery;
use signal_hook::iterator::exfiltrator::SignalOnly;

use crate::error::{Error, Result};
use crate::supervisor::signals::{handled, Sig};

/// Pause after a failed `poll` (it fails only when the system is out of
/// memory), so that the loop does not spin.
const POLL_FAILED_PAUSE: Duration = Duration::from_millis(100);

/// The supervisor's wake-ups: its signals through a self-pipe.
pub(super) struct Wakeups {
    delivery: SignalDelivery<UnixStream, SignalOnly>,
}

impl Wakeups {
    /// Catches every signal of the supervisor's table from now on.
    pub(super) fn register() -> Result<Wakeups> {
        Wakeups::on(handled())
    }

    /// Catches `signals` from now on.
    fn on(signals: impl IntoIterator<Item = i32>) -> Result<Wakeups> {
        let (read, write) =
            UnixStream::pair().map_err(|e| Error::io("cannot make the supervisor's signal pipe", e))?;
        let delivery = SignalDelivery::with_pipe(read, write, SignalOnly, signals)
            .map_err(|e| Error::io("cannot register signal handlers", e))?;
        Ok(Wakeups { delivery })
    }

    /// Blocks until a signal arrives, one of `also` (the workers' log
    /// pipe, the metrics listener and its clients) has something to read,
    /// or `deadline` passes (`None`: no deadline); returns the signals that
    /// arrived, each once, in signal-number order (none after a readable
    /// fd or the deadline).
    pub(super) fn wait(&mut self, also: &[BorrowedFd<'_>], deadline: Option<Instant>) -> Vec<Sig> {
        let timeout = deadline.map_or(PollTimeout::NONE, |d| timeout_until(d, Instant::now()));
        let mut fds = vec![PollFd::new(self.delivery.get_read().as_fd(), PollFlags::POLLIN)];
        fds.extend(also.iter().map(|fd| PollFd::new(*fd, PollFlags::POLLIN)));
        match poll(&mut fds, timeout) {
            // EINTR: a signal came in during the poll; it is read below.
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the supervisor cannot wait; pausing");
                std::thread::sleep(POLL_FAILED_PAUSE);
            }
        }
        self.pending()
    }

    /// The signals that arrived since the last look, without waiting.
    pub(super) fn pending(&mut self) -> Vec<Sig> {
        self.delivery.pending().filter_map(Sig::from_raw).collect()
    }
}

/// The `poll` timeout that ends at `deadline`: whole milliseconds rounded
/// up (so that the loop never wakes just before its deadline and spins),
/// zero once it passed, capped at `poll`'s longest.
fn timeout_until(deadline: Instant, now: Instant) -> PollTimeout {
    let left = deadline.saturating_duration_since(now);
    let millis = left.as_micros().div_ceil(1000);
    PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_round_up_to_the_deadline_and_never_go_negative() {
        let now = Instant::now();
        let ms = |t: PollTimeout| i32::from(t);
        assert_eq!(ms(timeout_until(now + Duration::from_micros(200), now)), 1);
        assert_eq!(ms(timeout_until(now + Duration::from_millis(250), now)), 250);
        assert_eq!(ms(timeout_until(now, now + Duration::from_secs(1))), 0);
        let far = now + Duration::from_secs(100 * 24 * 3600);
        assert_eq!(ms(timeout_until(far, now)), i32::MAX);
    }

    #[test]
    fn a_child_exit_wakes_the_wait() {
        let mut w = Wakeups::on([nix::libc::SIGCHLD]).unwrap();
        let status = std::process::Command::new("true").status().unwrap();
        assert!(status.success());
        // No deadline: only the SIGCHLD (this one, or another test's) ends it.
        assert_eq!(w.wait(&[], None), [Sig::Chld]);
    }

    #[test]
    fn a_log_line_wakes_the_wait_without_a_signal() {
        let mut w = Wakeups::on([nix::libc::SIGCHLD]).unwrap();
        let (read, mut write) = std::io::pipe().unwrap();
        std::io::Write::write_all(&mut write, b"line\n").unwrap();
        // No deadline: the readable pipe ends it.
        let got = w.wait(&[read.as_fd()], None);
        assert!(got.iter().all(|s| *s == Sig::Chld), "{got:?}");
    }
}
