//! `shape`: prints the largest production files and functions of the
//! workspace (see `jobworker_tests::shape`); exits 1 when one is over its
//! limit.

use std::process::ExitCode;

use jobworker_tests::shape::{measure, MAX_FILE_LINES, MAX_FN_LINES};
use jobworker_tests::workspace_dir;

fn main() -> ExitCode {
    let top: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(5);
    let (files, fns) = measure(&workspace_dir());
    println!("largest files (limit {MAX_FILE_LINES} lines):");
    for f in files.iter().take(top) {
        println!("  {:5}  {}", f.lines, f.name);
    }
    println!("largest functions (limit {MAX_FN_LINES} lines):");
    for f in fns.iter().take(top) {
        println!("  {:5}  {}", f.lines, f.name);
    }
    let over = files.iter().filter(|f| f.lines > MAX_FILE_LINES).count()
        + fns.iter().filter(|f| f.lines > MAX_FN_LINES).count();
    if over > 0 {
        println!("{over} over the limit");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
