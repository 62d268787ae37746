//! Compile tests of `#[jobworker::handler]`: handlers that must build (and
//! whose `main` checks the registry and the typed helpers), and misuses that
//! must fail with an error at the offending token.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.compile_fail("tests/ui/fail_*.rs");
}
