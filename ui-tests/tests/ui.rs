//! Compile tests of `#[jobworker::handler]`: handlers that must build (and
//! whose `main` checks the registry and the typed helpers), and misuses that
//! must fail with an error at the offending token.
//!
//! They live in this crate, not in `jobworker`'s, because trybuild builds
//! the crate under test's whole dependency graph again (in
//! `target/tests/trybuild`), with that crate's features: from `jobworker`
//! with its default `cli` feature that was the web app, ZooKeeper, cron's
//! time zones and the command line too, for ~270 s of the suite on a
//! 2-core machine. Here they build against `jobworker` without default
//! features, which is all the attribute needs.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.compile_fail("tests/ui/fail_*.rs");
}
