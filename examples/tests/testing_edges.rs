//! What `jobworker::testing` does with handlers that panic, time out, are
//! cancelled, post without a board or are missing, and with a pipeline's
//! next step.

use std::time::Duration;

use jobworker::testing::{run_until_empty, Drained, InlineJob, Outcome, TestBoard};
use jobworker::{Board, HandlerError, JobContext, JobState, NewJob};

#[jobworker::handler(queue = "edges")]
async fn explode(_cx: JobContext, what: String) -> Result<(), HandlerError> {
    panic!("{what} exploded");
}

#[jobworker::handler(queue = "edges", timeout = "100ms")]
async fn dawdle(_cx: JobContext) -> Result<(), HandlerError> {
    tokio::time::sleep(Duration::from_secs(60)).await;
    Ok(())
}

#[jobworker::handler(queue = "edges")]
async fn patient(cx: JobContext) -> Result<(), HandlerError> {
    cx.cancelled().await;
    Err(HandlerError::retry_msg("stopped by its cancellation"))
}

#[jobworker::handler(queue = "edges")]
async fn follow_up(cx: JobContext, n: u32) -> Result<(), HandlerError> {
    cx.board()
        .post("edges", NewJob::new("step").args(&(n + 1))?)
        .await?;
    Ok(())
}

/// Moves through queues `edges`, `edges-2` and `edges-3`; `0` names its
/// own queue, which is refused.
#[jobworker::handler(queue = "edges")]
async fn step(cx: JobContext, n: u32) -> Result<(), HandlerError> {
    match n {
        0 => cx.complete_into(cx.queue(), NewJob::new("step").args(&1)?),
        1 | 2 => cx.complete_into(format!("edges-{}", n + 1), NewJob::new("step").args(&(n + 1))?),
        _ => {}
    }
    Ok(())
}

#[tokio::test]
async fn a_panic_and_a_timeout_are_retried_as_a_worker_retries_them() {
    let boom = InlineJob::new(explode::job(&"the boiler".to_owned()).unwrap());
    let outcome = boom.run().await.unwrap();
    assert_eq!(outcome.reason(), Some("panicked: the boiler exploded"));
    let slow = InlineJob::new(NewJob::new("dawdle")).run().await.unwrap();
    assert_eq!(slow.reason(), Some("timeout: timed out after 100ms"));
}

#[tokio::test]
async fn a_raised_cancellation_reaches_the_handler() {
    let job = InlineJob::new(NewJob::new("patient"));
    job.cancel_flag().cancel();
    let outcome = job.run().await.unwrap();
    assert_eq!(outcome.reason(), Some("error: stopped by its cancellation"));
}

#[tokio::test]
async fn a_handler_that_needs_the_board_gets_the_one_given() {
    let alone = InlineJob::new(follow_up::job(&1).unwrap()).run().await.unwrap();
    let reason = alone.reason().unwrap_or_default();
    assert!(
        reason.starts_with("panicked:") && reason.contains("without a board"),
        "{reason}"
    );

    let test = TestBoard::start().await.unwrap();
    let with = InlineJob::new(follow_up::job(&1).unwrap()).board(test.any());
    assert!(with.run().await.unwrap().is_consumed());
    assert_eq!(test.board().job_count("edges").await.unwrap(), 1);
}

#[tokio::test]
async fn a_pipeline_step_names_its_next_and_a_drain_runs_them_all() {
    let first = InlineJob::new(step::job(&1).unwrap()).run().await.unwrap();
    let Outcome::Consumed {
        next: Some((queue, next)),
    } = first
    else {
        panic!("expected a next step: {first:?}");
    };
    assert_eq!((queue.as_str(), next.name.as_str()), ("edges-2", "step"));

    let test = TestBoard::start().await.unwrap();
    let id = step::post(test.board(), &1).await.unwrap();
    let queues = ["edges", "edges-2", "edges-3"];
    let drained = run_until_empty(test.any(), &queues).await.unwrap();
    let all_consumed = Drained {
        consumed: 3,
        retried: 0,
        trashed: 0,
    };
    assert_eq!(drained, all_consumed);
    for q in queues {
        assert_eq!(
            test.board().state(q, &id).await.unwrap(),
            JobState::Completed,
            "{q}"
        );
    }

    // Into its own queue: the next step would be the job itself.
    let own = step::post(test.board(), &0).await.unwrap();
    let drained = run_until_empty(test.any(), &queues).await.unwrap();
    assert_eq!(
        drained,
        Drained {
            consumed: 0,
            retried: 0,
            trashed: 1
        }
    );
    let info = test.board().show("edges", &own).await.unwrap();
    assert!(info.reason.unwrap_or_default().contains("own queue"));
}

#[tokio::test]
async fn a_job_without_a_handler_is_an_error_and_stays_on_the_board() {
    let e = InlineJob::new(NewJob::new("nobody")).run().await.unwrap_err();
    assert!(e.is_invalid() && e.message().contains("nobody"), "{e}");

    let test = TestBoard::start().await.unwrap();
    let id = test.board().post("edges", NewJob::new("nobody")).await.unwrap();
    let e = run_until_empty(test.any(), &["edges"]).await.unwrap_err();
    assert!(e.message().contains("nobody"), "{e}");
    let state = test.board().state("edges", &id).await.unwrap();
    assert_eq!(state, JobState::Ready, "given back, no attempt counted");
}
