//! Screenshots under `<target dir>/screenshots/`.

use std::path::{Path, PathBuf};

use super::Browser;

/// `<target dir>/screenshots`: the target dir is `$CARGO_TARGET_DIR` when
/// set at run time (relative to the workspace when relative), else the
/// workspace's `target/`.
pub fn screenshots_dir() -> PathBuf {
    let workspace = crate::workspace_dir();
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => workspace.join(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
    };
    let target = target.canonicalize().unwrap_or(target);
    target.join("screenshots")
}

impl Browser {
    /// Saves a PNG of the window as `<target dir>/screenshots/<name>.png`
    /// (see [`screenshots_dir`]) and returns its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let dir = screenshots_dir();
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let png = match self.client().screenshot().await {
            Ok(png) => png,
            Err(e) => panic!("cannot take the screenshot {name}: {e}"),
        };
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        path
    }
}
