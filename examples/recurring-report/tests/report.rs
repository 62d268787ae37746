//! The template spawned and its runs drained in the test's process: a
//! fast rule stands in for the morning one.

use std::time::Duration;

use jobworker::board::Maintenance;
use jobworker::schedule::Rule;
use jobworker::testing::{run_until_empty, TestBoard};
use recurring_report::{every_morning, schedule, REPORTS, TEMPLATE};

#[tokio::test]
async fn each_due_run_writes_one_report() {
    let test = TestBoard::start().await.unwrap();
    let board = test.board();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    let every = Rule::every(Duration::from_millis(200)).unwrap();
    assert_eq!(schedule(board, every.clone(), &out).await.unwrap(), TEMPLATE);
    // Scheduling again (a deploy) updates the template, it adds none.
    schedule(board, every, &out).await.unwrap();
    assert_eq!(board.recurring(REPORTS).await.unwrap().len(), 1);

    // What the queue's maintenance leader does, by hand: post the due
    // runs, until two slots have come.
    let mut spawned = 0;
    let two_runs = async {
        while spawned < 2 {
            spawned += board.spawn_recurring(REPORTS).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), two_runs)
        .await
        .expect("two runs spawned within 30 s");
    let drained = run_until_empty(test.any(), &[REPORTS]).await.unwrap();
    assert_eq!(drained.consumed, spawned);
    let reports = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(reports, spawned, "one report per run");
}

#[test]
fn the_morning_rule_is_seven_in_berlin() {
    let rule = every_morning().unwrap();
    // 2026-01-05 00:00 UTC; 07:00 in Berlin (UTC+1 in winter) is 06:00 UTC.
    let monday = 1_767_571_200_000;
    assert_eq!(rule.next_after(monday), Some(monday + 6 * 3_600_000));
}
