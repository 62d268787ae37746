//! The work directory of a `jobworker run` given no `--workdir`: one of its
//! own, so that two supervisors on one machine never share sandboxes. It is
//! `$XDG_RUNTIME_DIR/jobworker/<name>` (else `<temp>/jobworker-<uid>/<name>`),
//! where the name is `--name` or the supervisor's pid, and it is removed
//! when the supervisor exits. Directories that killed supervisors left
//! behind (named by a pid that no longer runs) are removed at start.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A work directory made for one run, removed on drop.
pub(crate) struct OwnWorkdir {
    path: PathBuf,
}

impl OwnWorkdir {
    /// Makes the directory for this run (named `name`, else by pid).
    pub(crate) fn make(name: Option<&str>) -> Result<OwnWorkdir> {
        let base = base();
        clean_stale(&base);
        let leaf = name.map_or_else(|| std::process::id().to_string(), str::to_owned);
        if leaf.is_empty() || leaf.contains('/') || leaf.starts_with('.') {
            return Err(Error::invalid(format!(
                "--name {leaf:?} must be a plain file name"
            )));
        }
        let path = base.join(leaf);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)
            .map_err(|e| Error::io(&format!("cannot create the work directory {}", path.display()), e))?;
        Ok(OwnWorkdir { path })
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for OwnWorkdir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Where the directories of runs live.
fn base() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("jobworker"),
        _ => std::env::temp_dir().join(format!("jobworker-{}", nix::unistd::getuid())),
    }
}

/// Removes the directories of runs named by a pid that no longer runs.
fn clean_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else { return };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let gone =
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH);
        if gone {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}
