//! `jobworker web` in a real headless Chromium (Debian's `chromium`,
//! driven through `chromedriver` by `jobworker_tests::browser`), against a
//! real board holding jobs in every state and a real `jobworker` running
//! them. One browser session walks every scenario in turn (a 2-core CI
//! machine runs one browser at a time); each step waits for its outcome on
//! the board, never for a fixed time. Screenshots go to
//! `target/screenshots/`.

mod common;

use std::time::Duration;

use common::cli::private_redis;
use common::web::WebApp;
use common::*;
use jobworker::board::Presence;
use jobworker::redis::RedisBoard;
use jobworker::{Board, JobId, JobState, NewJob};
use jobworker_examples::scripted::Action;
use jobworker_tests::browser::Browser;
use jobworker_tests::wait_until;
use redis::AsyncCommands;

/// How long a board change made from the browser may take to show.
const DEADLINE: Duration = Duration::from_secs(60);
/// Trashed jobs in the bulk queue: more than one page (50).
const BULK: usize = 60;

/// The jobs of the "shop" queue, one per state.
struct Shop {
    ready: JobId,
    trashed: JobId,
    xss: JobId,
}

async fn claim(board: &RedisBoard, q: &str, id: &JobId) -> jobworker::Lease {
    board
        .claim_job(q, id, "test-owner", Some(Duration::from_secs(3600)))
        .await
        .unwrap()
        .lease
}

/// A queue with a job in every state.
async fn fill_shop(board: &RedisBoard, q: &str, key: &str) -> Shop {
    let ok = script(Action::Ok, 0, key);
    let ready = post(board, q, &ok, 3).await;
    let job = |args: &serde_json::Value| NewJob::new("scripted").args(args).unwrap();
    let okv = serde_json::to_value(&ok).unwrap();
    board
        .post(q, job(&okv).delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    board.post(q, job(&okv).depends_on(ready.clone())).await.unwrap();
    let claimed = post(board, q, &ok, 3).await;
    let _held = claim(board, q, &claimed).await;
    let done = post(board, q, &ok, 3).await;
    board.consume(claim(board, q, &done).await).await.unwrap();
    let trashed = post(board, q, &ok, 3).await;
    board
        .trash(
            claim(board, q, &trashed).await,
            "ValueError: <b>bad</b> input\n  at step 2",
        )
        .await
        .unwrap();
    let cancelled = post(board, q, &ok, 3).await;
    board
        .cancel(q, std::slice::from_ref(&cancelled), false)
        .await
        .unwrap();
    let keys = board.keys(q).unwrap();
    let _: () = board
        .connection()
        .hset(keys.listings(), "garbage", b"\xc1\xc1".as_slice())
        .await
        .unwrap();
    board.reap(q).await.unwrap();
    let xss = serde_json::json!({"action": "ok", "note": "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"});
    let xss = board.post(q, job(&xss).tag("<b>tag</b>")).await.unwrap();
    let counts = board.overview(&[q.to_owned()]).await.unwrap().remove(0).counts;
    for (state, n) in [
        (JobState::Ready, counts.ready),
        (JobState::Scheduled, counts.scheduled),
        (JobState::Waiting, counts.waiting),
        (JobState::Claimed, counts.claimed),
        (JobState::Completed, counts.completed),
        (JobState::Trashed, counts.trashed),
        (JobState::Cancelled, counts.cancelled),
        (JobState::Quarantined, counts.quarantined),
    ] {
        assert!(n.unwrap_or(0) >= 1, "no {state} job in the shop: {counts:?}");
    }
    Shop { ready, trashed, xss }
}

/// A queue with [`BULK`] trashed jobs in one failure group; returns it.
async fn fill_bulk(board: &RedisBoard, q: &str, key: &str) -> String {
    for _ in 0..BULK {
        let id = post(board, q, &script(Action::Ok, 0, key), 3).await;
        board.trash(claim(board, q, &id).await, "boom").await.unwrap();
    }
    let groups = board.failed(q).await.unwrap();
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(groups[0].count as usize, BULK);
    groups[0].group.clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_works_the_board_from_a_real_browser() {
    let _serial = serial().await;
    let redis = private_redis();
    let url = redis.url();
    let board = RedisBoard::connect(&url).await.unwrap();
    let (shop, bulk, run) = ("shop", "bulk", "run");
    let key = "runs";
    let jobs = fill_shop(&board, shop, key).await;
    let group = fill_bulk(&board, bulk, key).await;
    let mut sup = Supervisor::start_on(
        &["--redis", &url],
        run,
        &["--workers", "1", "--expiry", "30"],
        None,
    );
    wait_until("the worker to register", DEADLINE, || async {
        board.live_workers().await.map(|w| !w.is_empty()).unwrap_or(false)
    })
    .await;
    let owner = board.live_workers().await.unwrap()[0].owner.clone();
    let app = WebApp::start(&url, &["--auth", "ops:correct-horse"], &[]);
    let base = app.base();
    let browser = Browser::start().await;

    // Every view loads and shows the board.
    browser.goto(&format!("{base}/")).await;
    browser.wait_for_text("h1", "Dashboard").await;
    for q in [shop, bulk, run] {
        browser.wait_for_text("table.counts", q).await;
    }
    browser.screenshot("dashboard").await;
    browser.goto(&format!("{base}/queues/{shop}")).await;
    browser.wait_for_text("nav.tabs", "quarantined (1)").await;
    browser.wait_for_text("table.jobs", jobs.ready.as_str()).await;
    browser.screenshot("queue").await;
    browser
        .goto(&format!("{base}/queues/{shop}/jobs/{}", jobs.trashed))
        .await;
    browser.wait_for_text("#job-state", "trashed").await;
    browser
        .wait_for_text(".facts", "ValueError: <b>bad</b> input")
        .await;
    browser.screenshot("job").await;
    browser.goto(&format!("{base}/failed")).await;
    browser.wait_for_text("#failure-groups", bulk).await;
    browser
        .goto(&format!("{base}/failed?queue={bulk}&group={group}"))
        .await;
    browser.wait_for("#next-page").await;
    browser.screenshot("failed").await;
    browser.goto(&format!("{base}/workers")).await;
    browser.wait_for_text("#workers", &owner).await;
    browser.screenshot("workers").await;
    browser.goto(&format!("{base}/quarantine")).await;
    browser.wait_for_text("#quarantine", "garbage").await;

    // A job whose arguments and tag hold markup renders them as text.
    browser
        .goto(&format!("{base}/queues/{shop}/jobs/{}", jobs.xss))
        .await;
    browser
        .wait_for_text("#job-args", "<script>document.title='pwned'</script>")
        .await;
    browser.wait_for_text("#job-tags", "<b>tag</b>").await;
    let title = browser.client().title().await.unwrap();
    assert!(
        !title.contains("pwned") && title.contains("Job"),
        "the payload ran: title {title:?}"
    );
    assert!(browser
        .page_source()
        .await
        .contains("&lt;script&gt;document.title"));

    // With auth on, an action without credentials is refused.
    browser
        .goto(&format!("{base}/queues/{shop}/jobs/{}", jobs.trashed))
        .await;
    browser.click("#job-actions button.primary").await;
    browser
        .wait_for_text("body", "refused: actions need credentials")
        .await;
    assert_eq!(board.state(shop, &jobs.trashed).await.unwrap(), JobState::Trashed);

    // Signed in, retry of a trashed job from its page makes it ready.
    browser.goto(&format!("{base}/login")).await;
    browser.fill("#login input[name=user]", "ops").await;
    browser.fill("#login input[name=password]", "correct-horse").await;
    browser.submit("#login").await;
    browser.wait_for_text(".message", "signed in").await;
    browser
        .goto(&format!("{base}/queues/{shop}/jobs/{}", jobs.trashed))
        .await;
    browser.click("#job-actions button.primary").await;
    browser.wait_for_text(".message", "retried").await;
    wait_state(&board, shop, &jobs.trashed, JobState::Ready, 30).await;

    // Bulk retry of a failed group by filter retries all of it, beyond
    // the first page.
    browser.goto(&format!("{base}/failed")).await;
    browser
        .select_by_value("#failed-filter select[name=queue]", bulk)
        .await;
    browser.fill("#failed-filter input[name=group]", &group).await;
    browser.click("#failed-filter button[value=retry]").await;
    browser
        .wait_for_text(".message", &format!("retried {BULK} job(s)"))
        .await;
    let counts = board.overview(&[bulk.to_owned()]).await.unwrap().remove(0).counts;
    assert_eq!(
        (counts.ready, counts.trashed),
        (Some(BULK as u64), Some(0)),
        "{counts:?}"
    );

    // Pause from the queue page stops the running jobworker from taking
    // jobs; resume lets it take them again.
    browser.goto(&format!("{base}/queues/{run}")).await;
    browser.click("form[action='/act/queue'] button.danger").await;
    browser.wait_for_text("#queue-state", "paused").await;
    assert!(board.settings(run).await.unwrap().paused);
    let held_back = post(&board, run, &script(Action::Ok, 0, key), 3).await;
    // Kept: what is tested is that time passes without a claim.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        board.state(run, &held_back).await.unwrap(),
        JobState::Ready,
        "a paused queue's job was taken"
    );
    browser.click("form[action='/act/queue'] button.primary").await;
    browser.wait_for_text("#queue-state", "running").await;
    wait_state(&board, run, &held_back, JobState::Completed, 60).await;

    // Cancel of a running job from its page stops its handler: the one
    // slot runs the next job, and the cancelled one ran once.
    let long = post(&board, run, &script(Action::Sleep, 120_000, key), 3).await;
    wait_state(&board, run, &long, JobState::Claimed, 60).await;
    browser.goto(&format!("{base}/queues/{run}/jobs/{long}")).await;
    browser.wait_for_text("#job-state", "claimed").await;
    browser.click("#job-actions button.danger").await;
    browser.wait_for_text(".message", "cancelled 1 job").await;
    assert_eq!(board.state(run, &long).await.unwrap(), JobState::Cancelled);
    let next = post(&board, run, &script(Action::Ok, 0, key), 3).await;
    wait_state(&board, run, &next, JobState::Completed, 90).await;
    let ran = runs(&board, key).await.get(long.as_str()).copied().unwrap_or(0);
    // Its handler may not have started when the cancel came (claimed, not
    // yet counted): at most once, never again.
    assert!(ran <= 1, "the cancelled job ran {ran} times");

    // Live updates: the queue page follows the board without a reload.
    browser
        .goto(&format!("{base}/queues/{shop}?state=scheduled"))
        .await;
    browser.wait_for_text("#live-status", "live").await;
    board
        .post(shop, NewJob::new("scripted").delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    browser.wait_for_text("nav.tabs", "scheduled (2)").await;

    browser.close().await;
    app.stop();
    sup.stop_cleanly(Duration::from_secs(60));
}
