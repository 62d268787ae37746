//! The production code keeps its shape: no file over
//! `shape::MAX_FILE_LINES` lines and no function over `shape::MAX_FN_LINES`
//! in `runtime/src`, `macros/src` and `worker-bin/src` (unit tests
//! excepted). `cargo run -p jobworker-tests --bin shape` lists the largest.

use jobworker_tests::shape::{measure, MAX_FILE_LINES, MAX_FN_LINES};
use jobworker_tests::workspace_dir;

#[test]
fn no_production_file_or_function_is_over_its_limit() {
    let (files, fns) = measure(&workspace_dir());
    assert!(files.len() > 50 && fns.len() > 500, "the trees were read");
    let over: Vec<String> = files
        .iter()
        .filter(|f| f.lines > MAX_FILE_LINES)
        .chain(fns.iter().filter(|f| f.lines > MAX_FN_LINES))
        .map(|s| format!("{} ({} lines)", s.name, s.lines))
        .collect();
    assert!(
        over.is_empty(),
        "over the limit ({MAX_FILE_LINES} lines a file, {MAX_FN_LINES} a function): {over:#?}"
    );
}
