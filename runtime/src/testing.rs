//! Testing handlers and the code that posts jobs, without a worker process
//! (feature `testing`, in the default features; with `default-features =
//! false`, add it to your dev-dependencies:
//! `jobworker = { version = "…", features = ["testing"] }`).
//!
//! Three kinds of test, as Oban's `Oban.Testing`, River's `rivertest` and
//! Sidekiq's `Sidekiq::Testing` offer them:
//!
//! - **A handler alone** ([`InlineJob`]): run the handler registered for a
//!   job's name with a context of your choosing (attempt, sandbox,
//!   cancellation, optionally a board) and check its [`Outcome`]: what a
//!   worker would do with the job (consume, retry, trash).
//! - **What your code posts** ([`posted_during`]): run your code against a
//!   real board and assert that it posted a job of a name, with arguments,
//!   to a queue ([`Posted::assert_posted`]).
//! - **A queue run to its end** ([`run_until_empty`]): claim, run and
//!   settle every job of some queues in the test's own process, follow-up
//!   jobs included, for integration tests.
//!
//! [`TestBoard`] starts a private `redis-server` for one test (it needs
//! `redis-server` installed, and says so when it is not).
//!
//! Handlers are found as a worker finds them: those of the crates linked
//! into the test binary. An integration test (`tests/*.rs`) of your handler
//! crate links it by naming it (`use my_handlers as _;` when nothing else
//! of it is used).

mod board;
mod drain;
mod inline;
mod posted;

pub use board::TestBoard;
pub use drain::{run_until_empty, Drained};
pub use inline::{InlineJob, Outcome};
pub use posted::{posted_during, Posted};
