//! What code under test posted: the jobs that appeared on a real board's
//! queues while a scope ran.

use std::collections::HashSet;
use std::future::Future;

use serde::Serialize;

use crate::board::Board;
use crate::codec::value_to_json;
use crate::error::Result;
use crate::job::{JobInfo, JobState, ListFilter, NewJob, Page};

/// The jobs posted to some queues while a scope ran (see
/// [`posted_during`]), with assertions naming what was posted when they
/// fail.
#[derive(Debug, Clone, Default)]
pub struct Posted {
    jobs: Vec<JobInfo>,
}

impl Posted {
    /// Every job posted, in no particular order.
    pub fn jobs(&self) -> &[JobInfo] {
        &self.jobs
    }

    /// The jobs named `name` posted to `queue`.
    pub fn named(&self, queue: &str, name: &str) -> Vec<&JobInfo> {
        self.jobs
            .iter()
            .filter(|j| j.queue == queue && j.name == name)
            .collect()
    }

    /// The one job named `name` posted to `queue` with arguments `args`.
    ///
    /// # Panics
    ///
    /// When there is none, or several, listing what was posted.
    pub fn assert_posted<T: Serialize + ?Sized>(&self, queue: &str, name: &str, args: &T) -> &JobInfo {
        let want = match NewJob::new(name).args(args) {
            Ok(job) => value_to_json(&job.args),
            Err(e) => panic!("the expected arguments of job {name} cannot be encoded: {e}"),
        };
        let found: Vec<&JobInfo> = self
            .named(queue, name)
            .into_iter()
            .filter(|j| j.args == want)
            .collect();
        match found.as_slice() {
            [one] => one,
            [] => panic!(
                "no job {name} with arguments {want} was posted to queue {queue}; posted: {}",
                self.summary()
            ),
            many => panic!(
                "{} jobs {name} with arguments {want} were posted to queue {queue}, not one",
                many.len()
            ),
        }
    }

    /// Asserts that no job named `name` was posted to `queue`.
    ///
    /// # Panics
    ///
    /// When one was, listing it.
    pub fn assert_none(&self, queue: &str, name: &str) {
        let found = self.named(queue, name);
        assert!(
            found.is_empty(),
            "{} jobs {name} were posted to queue {queue}: {}",
            found.len(),
            self.summary()
        );
    }

    /// `queue/name(args)` of every job, for messages.
    fn summary(&self) -> String {
        if self.jobs.is_empty() {
            return "nothing".to_owned();
        }
        let each: Vec<String> = self
            .jobs
            .iter()
            .map(|j| format!("{}/{}({})", j.queue, j.name, j.args))
            .collect();
        each.join(", ")
    }
}

/// Runs `scope` and returns its output with the jobs posted to `queues`
/// meanwhile: those on the board (ready, scheduled, claimed or waiting for
/// dependencies) after the scope that were not before. A job posted and
/// already consumed within the scope (a worker ran) is not seen: run the
/// scope with no worker serving the queues.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> jobworker::Result<()> {
/// use jobworker::testing::{posted_during, TestBoard};
/// use jobworker::{Board, NewJob};
///
/// /// The code under test: signing up posts a welcome email.
/// async fn sign_up<B: Board>(board: &B, email: &str) -> jobworker::Result<()> {
///     board.post("emails", NewJob::new("welcome").args(&email)?).await?;
///     Ok(())
/// }
///
/// let test = TestBoard::start().await?;
/// let board = test.board();
/// let (signed_up, posted) = posted_during(board, &["emails"], sign_up(board, "ada@example.com")).await?;
/// signed_up?;
/// posted.assert_posted("emails", "welcome", "ada@example.com");
/// posted.assert_none("emails", "goodbye");
/// # Ok(())
/// # }
/// ```
pub async fn posted_during<B: Board, F: Future>(
    board: &B,
    queues: &[&str],
    scope: F,
) -> Result<(F::Output, Posted)> {
    let before = on_board(board, queues).await?;
    let seen: HashSet<(String, String)> = before.iter().map(|j| (j.queue.clone(), j.id.clone())).collect();
    let out = scope.await;
    let jobs = on_board(board, queues)
        .await?
        .into_iter()
        .filter(|j| !seen.contains(&(j.queue.clone(), j.id.clone())))
        .collect();
    Ok((out, Posted { jobs }))
}

/// Every job of `queues` on the board: live (ready, scheduled, claimed)
/// and waiting for dependencies.
async fn on_board<B: Board>(board: &B, queues: &[&str]) -> Result<Vec<JobInfo>> {
    const PAGE: usize = 1_000;
    let mut jobs = Vec::new();
    for queue in queues {
        for filter in [ListFilter::Live, ListFilter::State(JobState::Waiting)] {
            let mut offset = 0;
            loop {
                let page = board.list(queue, filter, Page { offset, limit: PAGE }).await?;
                let n = page.len();
                jobs.extend(page);
                if n < PAGE {
                    break;
                }
                offset += n;
            }
        }
    }
    Ok(jobs)
}
