//! Crash recovery (`Recovery::recover_owner`): a dead worker's leases come
//! back at once; a crash is blamed on a job only when it was alone in the
//! worker (a poison pill is trashed at its third), and the jobs of a worker
//! that held several become suspects, each handed out alone to an idle
//! claimer, so a poison pill among them is found too.

use std::time::Duration;

use jobworker::board::{ClaimRequest, Recovered, Recovery};
use jobworker::{Board, JobState, NewJob};

use super::FeatureHarness;
use crate::{copy_of, unique_queue};

const LONG: Duration = Duration::from_secs(300);

/// A claim of up to 3 jobs for `who`, who holds `holding` jobs now.
fn request<'a>(queues: &'a [&'a str], who: &'a str, holding: usize) -> ClaimRequest<'a> {
    ClaimRequest {
        queues,
        who,
        expiry: LONG,
        count: 3,
        holding,
        hand_off: None,
    }
}

const KILLED: &str = "killed by signal 6 (SIGABRT)";

/// A job that killed its worker alone three times is trashed as a poison
/// pill, with the reason of the last crash.
pub async fn a_lone_job_that_kills_its_worker_three_times_is_a_poison_pill<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("poison");
    let id = b.post(&q, NewJob::new("p").max_attempts(10)).await.unwrap();
    for round in 1..=3u32 {
        let c = b.claim(&[&q], "dead-worker", LONG, 1).await.unwrap().remove(0);
        assert_eq!(*c.lease.job(), id);
        let Recovered { back, trashed } = b.recover_owner(&q, "dead-worker", KILLED).await.unwrap();
        let want = if round < 3 { (1, 0) } else { (0, 1) };
        assert_eq!((back, trashed), want, "round {round}");
    }
    let info = b.show(&q, &id).await.unwrap();
    assert_eq!(info.state, JobState::Trashed);
    let reason = info.reason.unwrap_or_default();
    assert!(
        reason.contains("poison pill") && reason.contains("SIGABRT"),
        "{reason}"
    );
}

/// The jobs of a worker that died holding several come back at once with
/// an attempt counted; a busy claimer gets none of them, an idle one gets
/// exactly one at a time, marked as a suspect.
pub async fn jobs_of_a_worker_that_held_several_become_suspects_run_alone<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("suspects");
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(b.post(&q, NewJob::new("s")).await.unwrap());
    }
    assert_eq!(b.claim(&[&q], "dead-worker", LONG, 3).await.unwrap().len(), 3);
    let recovered = b.recover_owner(&q, "dead-worker", KILLED).await.unwrap();
    assert_eq!(recovered, Recovered { back: 3, trashed: 0 });
    for id in &ids {
        let info = b.show(&q, id).await.unwrap();
        let (state, attempts) = (info.state, info.attempts);
        assert_eq!(
            (state, attempts),
            (JobState::Ready, 1),
            "given back at once, attempt counted"
        );
    }
    let busy = b.claim_with(&request(&[&q], "busy", 2)).await.unwrap();
    assert!(busy.is_empty(), "a busy worker gets no suspect: {busy:?}");
    for id in &ids {
        let got = b.claim_with(&request(&[&q], "idle", 0)).await.unwrap();
        assert_eq!(got.len(), 1, "a suspect comes alone");
        assert!(got[0].suspect);
        assert_eq!(got[0].lease.job(), id, "skipped suspects keep their place");
        b.consume(copy_of(&got[0].lease)).await.unwrap();
    }
    assert_eq!(b.job_count(&q).await.unwrap(), 0);
    // Plain jobs are plain again.
    b.post(&q, NewJob::new("plain")).await.unwrap();
    b.post(&q, NewJob::new("plain")).await.unwrap();
    let got = b.claim_with(&request(&[&q], "idle", 0)).await.unwrap();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|c| !c.suspect));
}

/// A poison pill that first killed a worker together with other jobs is
/// still found: the shared crash blames none, the suspects then run alone,
/// the pill kills its worker alone three times and is trashed; the others
/// complete.
pub async fn a_poison_pill_among_several_is_found<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("pill-among");
    let pill = b.post(&q, NewJob::new("pill").max_attempts(10)).await.unwrap();
    let mut others = Vec::new();
    for _ in 0..2 {
        others.push(b.post(&q, NewJob::new("fine").max_attempts(10)).await.unwrap());
    }
    assert_eq!(b.claim(&[&q], "dead-worker", LONG, 3).await.unwrap().len(), 3);
    b.recover_owner(&q, "dead-worker", KILLED).await.unwrap();
    let mut deaths = 0;
    for _ in 0..10 {
        let got = b.claim_with(&request(&[&q], "worker", 0)).await.unwrap();
        let Some(c) = got.into_iter().next() else { break };
        if *c.lease.job() == pill {
            deaths += 1;
            b.recover_owner(&q, "worker", KILLED).await.unwrap();
        } else {
            b.consume(c.lease).await.unwrap();
        }
    }
    assert_eq!(deaths, 3, "the pill killed its worker alone three times");
    let info = b.show(&q, &pill).await.unwrap();
    assert_eq!(info.state, JobState::Trashed);
    assert!(info.reason.unwrap_or_default().contains("poison pill"));
    for id in &others {
        assert_eq!(b.state(&q, id).await.unwrap(), JobState::Completed);
    }
}

/// Recovering a worker that holds nothing here changes nothing: another
/// worker's lease stays held.
pub async fn recovery_ignores_other_owners<H: FeatureHarness>(h: &H) {
    let b = h.board().await;
    let q = unique_queue("others");
    b.post(&q, NewJob::new("a")).await.unwrap();
    let c = b.claim(&[&q], "alive-worker", LONG, 1).await.unwrap().remove(0);
    let recovered = b.recover_owner(&q, "dead-worker", "killed").await.unwrap();
    assert_eq!(recovered, Recovered::default());
    b.extend(&c.lease, LONG).await.unwrap();
    b.consume(c.lease).await.unwrap();
}
