//! stderr shared by log lines and a progress bar: while a bar is shown,
//! every log line is written above it (the bar is cleared, the line
//! written, the bar drawn again), so the two never share a line. The CLI's
//! logging writes through [`Stderr`]; the supervisor shows the bar and
//! relays its workers' log lines here (see `supervisor::relay`).

use std::io::Write;
use std::sync::Mutex;

/// The bar being shown, if any.
static BAR: Mutex<Option<indicatif::ProgressBar>> = Mutex::new(None);

/// Shows `bar` from now on (log lines go above it).
pub(crate) fn show(bar: indicatif::ProgressBar) {
    if let Ok(mut shown) = BAR.lock() {
        *shown = Some(bar);
    }
}

/// Stops showing the bar (it is cleared); returns it.
pub(crate) fn hide() -> Option<indicatif::ProgressBar> {
    let bar = BAR.lock().ok()?.take()?;
    bar.finish_and_clear();
    Some(bar)
}

/// Forgets the bar without drawing: for a forked child, which must never
/// draw the parent's bar.
pub(crate) fn forget() {
    if let Ok(mut shown) = BAR.lock() {
        std::mem::forget(shown.take());
    }
}

/// Writes `bytes` (whole lines) to stderr, above the bar when one is shown.
pub(crate) fn write(bytes: &[u8]) {
    let shown = BAR.lock().ok().and_then(|b| b.clone());
    let write = || {
        let _ = std::io::stderr().write_all(bytes);
    };
    match shown {
        Some(bar) => bar.suspend(write),
        None => write(),
    }
}

/// A `tracing` writer for stderr that keeps clear of the progress bar.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        write(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Stderr {
    type Writer = Stderr;

    fn make_writer(&'a self) -> Self::Writer {
        Stderr
    }
}
