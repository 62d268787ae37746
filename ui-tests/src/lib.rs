//! Compile tests of `#[jobworker::handler]`, in a crate of their own: see
//! `tests/ui.rs`. The library is empty.
