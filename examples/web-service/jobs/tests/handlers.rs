//! The handlers tested as handlers: inline (no board needed but for the
//! follow-up post), and the queue drained in this process.

use jobworker::testing::{run_until_empty, Drained, InlineJob, Outcome, TestBoard};
use jobworker::{Board, JobState, ListFilter, Page};
use web_service_jobs::{welcome, Welcome, EMAILS};

fn ada() -> Welcome {
    Welcome {
        email: "ada@example.com".into(),
    }
}

#[tokio::test]
async fn a_bad_address_goes_to_the_trash_at_once() {
    let bad = Welcome {
        email: "nobody".into(),
    };
    let outcome = InlineJob::new(welcome::job(&bad).unwrap()).run().await.unwrap();
    assert_eq!(
        outcome,
        Outcome::Trashed {
            reason: "fatal: not an email address: nobody".into()
        }
    );
}

#[tokio::test]
async fn welcome_writes_the_mail_and_asks_for_a_digest() {
    let test = TestBoard::start().await.unwrap();
    let sandbox = tempfile_dir();
    let job = InlineJob::new(welcome::job(&ada()).unwrap())
        .board(test.any())
        .sandbox(sandbox.path());
    assert!(job.run().await.unwrap().is_consumed());
    let mail = std::fs::read_to_string(sandbox.path().join("welcome.eml")).unwrap();
    assert!(mail.starts_with("To: ada@example.com"), "{mail}");
    let scheduled = ListFilter::State(JobState::Scheduled);
    let later = test
        .board()
        .list(EMAILS, scheduled, Page::default())
        .await
        .unwrap();
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].name, "digest");
}

#[tokio::test]
async fn the_queue_drains_and_leaves_the_digest_for_tomorrow() {
    let test = TestBoard::start().await.unwrap();
    welcome::post(test.board(), &ada()).await.unwrap();
    welcome::post(
        test.board(),
        &Welcome {
            email: "nobody".into(),
        },
    )
    .await
    .unwrap();
    let drained = run_until_empty(test.any(), &[EMAILS]).await.unwrap();
    assert_eq!(
        drained,
        Drained {
            consumed: 1,
            retried: 0,
            trashed: 1
        }
    );
    // The digest runs a day later: still on the board, scheduled.
    assert_eq!(test.board().job_count(EMAILS).await.unwrap(), 1);
}

/// A sandbox directory kept for the test to read.
fn tempfile_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}
