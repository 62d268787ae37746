//! Paths of the workspace and of the shared taskflow fixtures.

use std::path::{Path, PathBuf};

/// The Cargo workspace root (the parent of the `tests/` package).
pub fn workspace_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    dir.canonicalize().unwrap_or(dir)
}

/// `shared/fixtures/taskflow` beside the repository
/// (`CARGO_MANIFEST_DIR/../../shared/fixtures/taskflow`): golden postings
/// and scenarios recorded from real taskflow.
///
/// Panics with the path it looked at when the folder is missing.
pub fn fixtures_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/taskflow");
    match dir.canonicalize() {
        Ok(found) if found.is_dir() => found,
        _ => panic!(
            "taskflow fixtures not found at {}: the tests expect the project's shared/ folder \
             beside the repository checkout (shared/fixtures/taskflow)",
            dir.display()
        ),
    }
}
