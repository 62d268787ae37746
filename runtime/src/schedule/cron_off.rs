//! Cron rules without the `cron` feature: refused with a clear error, so
//! a stored cron template fails to load instead of misbehaving.

use crate::error::{Error, Result};

/// Never built: without the `cron` feature no expression is parsed.
pub(super) enum Compiled {}

impl Compiled {
    /// Refuses every cron rule.
    pub(super) fn new(expr: &str, _tz: &str) -> Result<Compiled> {
        Err(Error::unsupported(format!(
            "cron rule '{expr}': this build of jobworker lacks its `cron` feature"
        )))
    }

    pub(super) fn zone_name(&self) -> String {
        match *self {}
    }

    pub(super) fn ever_matches(&self) -> bool {
        match *self {}
    }

    pub(super) fn next_after(&self, _: i64) -> Option<i64> {
        match *self {}
    }

    pub(super) fn due(&self, _: i64, _: i64, _: usize) -> (Vec<i64>, i64) {
        match *self {}
    }
}
