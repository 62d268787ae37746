//! Example handlers for jobworker.
//!
//! A handler crate is an ordinary library: `#[jobworker::handler]`
//! registers each function when the crate is linked into a binary. A
//! binary links it with one line, as `worker-bin/src/main.rs` does:
//!
//! ```no_run
//! use jobworker_examples as _; // links the handlers
//! fn main() { jobworker::cli::main() }
//! ```

pub mod quickstart;
pub mod scripted;
