//! The quickstart handlers tested as a user tests theirs, with
//! `jobworker::testing`: each handler alone (inline), what code posts
//! (against a real board), and a queue run to its end in this process.

use jobworker::testing::{posted_during, run_until_empty, Drained, InlineJob, Outcome, TestBoard};
use jobworker::{Board, JobState};
use jobworker_examples::quickstart::{crunch, flaky, write_report, Crunch, Flaky, Report};
use std::time::Duration;

fn report() -> Report {
    Report {
        title: "q3".into(),
        lines: 3,
    }
}

#[tokio::test]
async fn each_handler_alone() {
    let written = InlineJob::new(write_report::job(&report()).unwrap())
        .run()
        .await
        .unwrap();
    assert!(written.is_consumed(), "{written:?}");

    // A sandbox with something left in it: the handler gives up.
    let dirty = tempfile::tempdir().unwrap();
    std::fs::write(dirty.path().join("leftover"), b"x").unwrap();
    let job = InlineJob::new(write_report::job(&report()).unwrap()).sandbox(dirty.path());
    match job.run().await.unwrap() {
        Outcome::Trashed { reason } => assert!(reason.starts_with("fatal: sandbox"), "{reason}"),
        other => panic!("expected the trash: {other:?}"),
    }

    // The first try fails with a short delay, the second succeeds.
    let once = Flaky { fail_times: 1 };
    let first = InlineJob::new(flaky::job(&once).unwrap()).run().await.unwrap();
    assert_eq!(
        first,
        Outcome::Retried {
            reason: "error: failing try 1 on purpose (fails 1 times)".into(),
            after: Some(Duration::from_millis(50)),
        }
    );
    let second = InlineJob::new(flaky::job(&once).unwrap())
        .attempt(2)
        .run()
        .await
        .unwrap();
    assert!(second.is_consumed());

    // A blocking handler runs on a blocking thread.
    let crunched = InlineJob::new(crunch::job(&Crunch { rounds: 1000 }).unwrap())
        .run()
        .await;
    assert!(crunched.unwrap().is_consumed());
}

/// The code under test: an application's request that queues a report.
async fn request_report<B: Board>(board: &B, title: &str) -> jobworker::Result<()> {
    let args = Report {
        title: title.into(),
        lines: 10,
    };
    write_report::post(board, &args).await?;
    Ok(())
}

#[tokio::test]
async fn what_the_application_posts() {
    let test = TestBoard::start().await.unwrap();
    let board = test.board();
    let (done, posted) = posted_during(board, &["demo"], request_report(board, "sales"))
        .await
        .unwrap();
    done.unwrap();
    let want = Report {
        title: "sales".into(),
        lines: 10,
    };
    let job = posted.assert_posted("demo", "write_report", &want);
    assert_eq!(job.state, JobState::Ready);
    posted.assert_none("demo", "flaky");
    assert_eq!(posted.jobs().len(), 1);
}

#[tokio::test]
async fn the_demo_queue_run_to_its_end() {
    let test = TestBoard::start().await.unwrap();
    let board = test.board();
    write_report::post(board, &report()).await.unwrap();
    crunch::post(board, &Crunch { rounds: 10 }).await.unwrap();
    flaky::post(board, &Flaky { fail_times: 2 }).await.unwrap();
    // Fails every one of its 4 tries: trashed.
    let hopeless = flaky::post(board, &Flaky { fail_times: 9 }).await.unwrap();
    let drained = run_until_empty(test.any(), &["demo"]).await.unwrap();
    assert_eq!(
        drained,
        Drained {
            consumed: 3,
            retried: 2 + 3,
            trashed: 1,
        }
    );
    assert_eq!(board.job_count("demo").await.unwrap(), 0);
    assert_eq!(board.state("demo", &hopeless).await.unwrap(), JobState::Trashed);
}
