//! Real taskflow (PyPI, in the test support's virtualenv) posts `resize`
//! jobs to its default namespace; the Rust handler runs them in this
//! process, on the queue mapped to that namespace.

use jobworker::redis::{RedisBoard, RedisOptions};
use jobworker::testing::{run_until_empty, Drained, TestBoard};
use jobworker::{Board, JobId, JobState};
use jobworker_tests::run_python_async;
use taskflow_interop as _; // links the handler: nothing else of the crate is named here

const POST_JOBS: &str = include_str!("../post_jobs.py");

#[tokio::test]
async fn jobs_taskflow_posted_run_here() {
    let test = TestBoard::start().await.unwrap();
    let url = test.url();
    let port = url.trim_start_matches("redis://127.0.0.1:").trim_end_matches('/');
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("cat.png");
    std::fs::write(&image, b"not really a png").unwrap();
    let image = image.display().to_string();
    let missing = dir.path().join("missing.png").display().to_string();
    let args = [
        "127.0.0.1",
        port,
        "taskflow",
        &image,
        "64",
        &image,
        "0",
        &missing,
        "32",
    ];
    let out = run_python_async(POST_JOBS, &args).await;
    let uuids: Vec<String> = serde_json::from_value(out.json()).unwrap();
    assert_eq!(uuids.len(), 3);

    let opts = RedisOptions::new(url).namespace("images", "taskflow");
    let board = RedisBoard::with_options(opts).await.unwrap();
    let drained = run_until_empty(board.clone(), &["images"]).await.unwrap();
    // The first resized; width 0 trashed at once; the missing image failed
    // its 5 tries (taskflow's postings carry no attempts: the board's
    // default holds) and was trashed.
    assert_eq!(
        drained,
        Drained {
            consumed: 1,
            retried: 4,
            trashed: 2
        }
    );
    let resized = std::fs::read_to_string(format!("{image}.64px")).unwrap();
    assert_eq!(resized, "16 bytes at 64px");
    let state = |i: usize| {
        let board = board.clone();
        let id = JobId::from(uuids[i].as_str());
        async move { board.state("images", &id).await.unwrap() }
    };
    assert_eq!(state(0).await, JobState::Completed);
    assert_eq!(state(1).await, JobState::Trashed);
    assert_eq!(state(2).await, JobState::Trashed);
}
