//! The version of the `redis-server` binary on `PATH`.

use std::io;
use std::process::{Command, Stdio};

use super::{MISSING_HINT, REDIS_SERVER_BIN};
use crate::error::{Error, Result};

/// Runs `redis-server --version` and returns the version, e.g. `"7.0.15"`.
pub fn redis_server_version() -> Result<String> {
    let out = Command::new(REDIS_SERVER_BIN)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                Error::unavailable(MISSING_HINT)
            } else {
                Error::io("cannot run redis-server --version", e)
            }
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_version(&text).ok_or_else(|| {
        Error::unavailable(format!(
            "cannot read the version in `redis-server --version` output: {:?}",
            text.trim()
        ))
    })
}

/// Finds `v=X.Y.Z` in `redis-server --version` output.
pub(super) fn parse_version(text: &str) -> Option<String> {
    text.split_whitespace()
        .find_map(|word| word.strip_prefix("v="))
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}
