//! Replays the fuzz targets' committed inputs on stable, in the normal test
//! run: every seed in `fuzz/seeds/<target>/` and every reproducer of a
//! fixed bug in `fuzz/regressions/<target>/` goes through the target's
//! entry point in `jobworker::fuzzing`, which panics on a broken property.
//! (The fuzzing itself is `scripts/fuzz`; see the README's "Fuzzing".)

use std::path::{Path, PathBuf};

/// A `jobworker::fuzzing` entry point: panics when its input breaks a
/// property.
type Entry = fn(&[u8]);

/// The fuzz targets and the entry point each one drives.
const TARGETS: [(&str, Entry); 4] = [
    ("redis_posting", jobworker::fuzzing::redis_posting),
    ("oslo_datetime", jobworker::fuzzing::oslo_datetime),
    ("zookeeper_posting", jobworker::fuzzing::zookeeper_posting),
    (
        "zookeeper_lock_body",
        jobworker::fuzzing::zookeeper_lock_and_record,
    ),
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The files of `dir`, sorted; an absent folder has none.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| {
            e.unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
                .path()
        })
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Feeds every file of `dir` to `entry`, naming the file when it panics;
/// returns how many were fed.
fn replay(dir: &Path, entry: Entry) -> usize {
    let inputs = files(dir);
    for path in &inputs {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        if std::panic::catch_unwind(|| entry(&bytes)).is_err() {
            panic!("fuzz input {} breaks its target's property", path.display());
        }
    }
    inputs.len()
}

#[test]
fn every_seed_passes_its_target() {
    for (target, entry) in TARGETS {
        let dir = fuzz_dir().join("seeds").join(target);
        assert!(
            dir.is_dir(),
            "the seed folder {} is missing (regenerate it with `python3 fuzz/make_seeds.py`)",
            dir.display()
        );
        let fed = replay(&dir, entry);
        assert!(fed > 0, "the seed folder {} is empty", dir.display());
    }
}

#[test]
fn every_fixed_crash_stays_fixed() {
    let mut fed = 0;
    for (target, entry) in TARGETS {
        fed += replay(&fuzz_dir().join("regressions").join(target), entry);
    }
    assert!(
        fed > 0,
        "no reproducer under {}",
        fuzz_dir().join("regressions").display()
    );
}
