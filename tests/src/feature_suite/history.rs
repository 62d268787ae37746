//! Job history: one event per step of a job's life, oldest first, each
//! naming its queue and job; claims with their worker and fencing token.

use jobworker::board::Admin;
use jobworker::{Abandon, Board, JobId, NewJob, Priority};
use serde_json::Value;

use super::{FeatureHarness, LONG};
use crate::unique_queue;

/// The event names of `history`.
fn kinds(history: &[Value]) -> Vec<&str> {
    history
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("?"))
        .collect()
}

/// Every event names `q` and `id`; claims name their worker and come with
/// larger tokens each time.
fn assert_well_formed(history: &[Value], q: &str, id: &JobId, workers: &[&str]) {
    for e in history {
        assert_eq!(
            (e["queue"].as_str(), e["job"].as_str()),
            (Some(q), Some(id.as_str())),
            "{e}"
        );
        assert!(e["at"].as_i64().is_some_and(|at| at > 0), "{e}");
    }
    let claims: Vec<&Value> = history.iter().filter(|e| e["event"] == "claimed").collect();
    let named: Vec<&str> = claims
        .iter()
        .map(|e| e["worker"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(named, workers, "{history:#?}");
    let tokens: Vec<u64> = claims.iter().map(|e| e["token"].as_u64().unwrap()).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens grow: {tokens:?}");
}

/// A job released, failed once and then consumed has each step in its
/// history, in order; an unknown job has none.
pub async fn history_shows_a_jobs_life_in_order<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("history");
    let id = b.post(&q, NewJob::new("h").max_attempts(3)).await.unwrap();
    b.set_priority(&q, &id, Priority::HIGH).await.unwrap();
    let c1 = b.claim(&[&q], "w1", LONG, 1).await.unwrap().remove(0);
    b.abandon(c1.lease, Abandon::Release).await.unwrap();
    let c2 = b.claim(&[&q], "w2", LONG, 1).await.unwrap().remove(0);
    let retry = Abandon::Retry {
        delay: std::time::Duration::ZERO,
        error: "flaky: try again".into(),
    };
    b.abandon(c2.lease, retry).await.unwrap();
    let c3 = b.claim(&[&q], "w3", LONG, 1).await.unwrap().remove(0);
    let h3 = b.history(&q, &id).await.unwrap();
    assert_eq!(kinds(&h3).last(), Some(&"claimed"), "the claim in force: {h3:#?}");
    b.consume(c3.lease).await.unwrap();
    let h = b.history(&q, &id).await.unwrap();
    let want = [
        "posted",
        "priority",
        "claimed",
        "abandoned",
        "claimed",
        "failed",
        "retried",
        "claimed",
        "consumed",
    ];
    assert_eq!(kinds(&h), want, "{h:#?}");
    assert_eq!(h[0]["name"], "h");
    assert_eq!(h[1]["priority"], Priority::HIGH.0);
    assert_eq!(
        (&h[5]["reason"], &h[5]["attempt"]),
        (&"flaky: try again".into(), &1.into())
    );
    assert_eq!(h[6]["attempt"], 1);
    assert_eq!(h[8]["worker"], "w3");
    assert_well_formed(&h, &q, &id, &["w1", "w2", "w3"]);
    let unknown = b.history(&q, &JobId::random()).await.unwrap_err();
    assert!(unknown.is_not_found(), "{unknown}");
}

/// Trashed, retried out of the trash, then cancelled while held: the
/// history says so, with the failure group.
pub async fn history_shows_the_trash_a_retry_and_a_cancel<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("history-trash");
    let id = b.post(&q, NewJob::new("t")).await.unwrap();
    let c1 = b.claim(&[&q], "w1", LONG, 1).await.unwrap().remove(0);
    b.trash(c1.lease, "fatal: bad input").await.unwrap();
    assert!(b.retry(&q, std::slice::from_ref(&id)).await.unwrap()[0].is_ok());
    let _held = b.claim(&[&q], "w2", LONG, 1).await.unwrap().remove(0);
    b.cancel(&q, std::slice::from_ref(&id), false).await.unwrap();
    let h = b.history(&q, &id).await.unwrap();
    assert_eq!(
        kinds(&h),
        ["posted", "claimed", "trashed", "retried", "claimed", "cancelled"],
        "{h:#?}"
    );
    assert_eq!(
        (&h[2]["group"], &h[2]["reason"]),
        (&"fatal".into(), &"fatal: bad input".into())
    );
    assert_eq!(h[3]["from"], "fatal");
    assert_well_formed(&h, &q, &id, &["w1", "w2"]);
}

/// A lease that ran out and was taken back: `stalled` (by its worker),
/// the failed try and its retry, then the next claim.
pub async fn history_shows_a_stalled_lease<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("history-stalled");
    let id = b.post(&q, NewJob::new("s").max_attempts(3)).await.unwrap();
    let short = std::time::Duration::from_millis(300);
    b.claim(&[&q], "gone", short, 1).await.unwrap();
    crate::conformance::let_pass(&b, short + std::time::Duration::from_millis(200)).await;
    let got = b.claim(&[&q], "w2", LONG, 1).await.unwrap();
    assert_eq!(got.len(), 1, "the expired lease was taken back");
    let h = b.history(&q, &id).await.unwrap();
    assert_eq!(
        kinds(&h),
        ["posted", "claimed", "stalled", "failed", "retried", "claimed"],
        "{h:#?}"
    );
    assert_eq!(h[2]["worker"], "gone");
    assert_eq!(h[3]["attempt"], 1);
    assert_well_formed(&h, &q, &id, &["gone", "w2"]);
}
