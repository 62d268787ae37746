//! Sandboxes: `<workdir>/jobworker-workers/sandbox-<k>` (mode 0700), one
//! sub-directory per concurrent job slot when concurrency > 1, emptied
//! before and after every job.

use std::fs;

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::fcntl::{Flock, FlockArg};

use crate::error::{Error, Result};

/// The sandbox directories of one worker.
#[derive(Debug, Clone)]
pub(crate) struct Sandbox {
    root: PathBuf,
    slots: usize,
    /// An exclusive `flock` on `sandbox-<k>.lock`, held while the worker
    /// lives, so that no two workers ever use (and empty) one sandbox.
    _lock: Arc<Flock<fs::File>>,
}

fn make_private_dir(path: &Path) -> Result<()> {
    if let Ok(meta) = fs::symlink_metadata(path) {
        let me = nix::unistd::geteuid();
        if meta.file_type().is_symlink() || !meta.is_dir() || meta.uid() != me.as_raw() {
            return Err(Error::invalid(format!(
                "refusing sandbox {}: it is a symlink, not a directory, or owned by another user",
                path.display()
            )));
        }
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| Error::io(&format!("cannot create sandbox {}", path.display()), e))?;
    // An existing directory keeps its old mode: set it.
    fs::set_permissions(path, fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::io(&format!("cannot chmod sandbox {}", path.display()), e))
}

/// Removes everything inside `dir`, keeping `dir`.
fn empty_dir(dir: &Path) -> Result<()> {
    let entries =
        fs::read_dir(dir).map_err(|e| Error::io(&format!("cannot read sandbox {}", dir.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("cannot read sandbox entry", e))?;
        let path = entry.path();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if is_dir {
            // A handler may have left a directory without write permission.
            let _ = fs::set_permissions(&path, fs::Permissions::from_mode(0o700));
        }
        let removed = if is_dir {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        removed.map_err(|e| Error::io(&format!("cannot empty sandbox entry {}", path.display()), e))?;
    }
    Ok(())
}

impl Sandbox {
    /// Creates (or reuses) worker `worker`'s sandbox with `slots` job slots.
    pub(crate) fn create(workdir: &Path, worker: usize, slots: usize) -> Result<Sandbox> {
        let base = workdir.join("jobworker-workers");
        make_private_dir(&base)?;
        let root = base.join(format!("sandbox-{worker}"));
        make_private_dir(&root)?;
        let lock_path = base.join(format!("sandbox-{worker}.lock"));
        let lock = fs::File::create(&lock_path)
            .map_err(|e| Error::io(&format!("cannot create {}", lock_path.display()), e))?;
        let lock = Flock::lock(lock, FlockArg::LockExclusiveNonblock).map_err(|_| {
            Error::invalid(format!(
                "sandbox {} is in use by another worker; give each supervisor its own --workdir",
                root.display()
            ))
        })?;
        empty_dir(&root)?;
        let sandbox = Sandbox {
            root,
            slots,
            _lock: Arc::new(lock),
        };
        for slot in 0..slots {
            make_private_dir(&sandbox.slot_dir(slot))?;
        }
        Ok(sandbox)
    }

    /// The worker's sandbox directory.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of job slot `slot`: the root itself with one slot.
    pub(crate) fn slot_dir(&self, slot: usize) -> PathBuf {
        if self.slots <= 1 {
            self.root.clone()
        } else {
            self.root.join(format!("slot-{slot}"))
        }
    }

    /// Empties slot `slot` and returns its directory (created and checked
    /// once, at [`Sandbox::create`]; made again only if something removed it).
    pub(crate) fn prepare(&self, slot: usize) -> Result<PathBuf> {
        let dir = self.slot_dir(slot);
        match empty_dir(&dir) {
            Ok(()) => Ok(dir),
            Err(_) if !dir.exists() => {
                make_private_dir(&dir)?;
                Ok(dir)
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_emptied_and_separate() {
        let tmp = tempfile::tempdir().unwrap();
        let one = Sandbox::create(tmp.path(), 0, 1).unwrap();
        let many = Sandbox::create(tmp.path(), 1, 3).unwrap();
        assert!(one.root().ends_with("jobworker-workers/sandbox-0"));
        assert_eq!(one.slot_dir(0), one.root());
        assert_ne!(many.slot_dir(0), many.slot_dir(1));
        let dir = many.prepare(2).unwrap();
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        fs::write(dir.join("left.txt"), b"x").unwrap();
        fs::create_dir_all(dir.join("sub/deeper")).unwrap();
        fs::set_permissions(dir.join("sub"), fs::Permissions::from_mode(0o500)).unwrap();
        let again = many.prepare(2).unwrap();
        assert_eq!(
            fs::read_dir(&again).unwrap().count(),
            0,
            "files left by one job are gone before the next"
        );
        let taken = Sandbox::create(tmp.path(), 1, 3).unwrap_err();
        assert!(taken.message().contains("in use"), "{taken}");
        drop(many);
        Sandbox::create(tmp.path(), 1, 3).expect("free again once the first worker is gone");
    }

    #[test]
    fn symlinked_sandbox_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join("jobworker-workers")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), tmp.path().join("jobworker-workers/sandbox-0")).unwrap();
        fs::write(elsewhere.path().join("precious"), b"x").unwrap();
        let err = Sandbox::create(tmp.path(), 0, 1).unwrap_err();
        assert!(err.message().contains("symlink"), "{err}");
        assert!(
            elsewhere.path().join("precious").exists(),
            "nothing outside the sandbox is touched"
        );
    }
}
