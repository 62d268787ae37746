//! A claim call's number: what marks the jobs a call took, so that the
//! call sent again after its reply was lost finds them
//! (`lua/lib/claim_jobs.lua`, `took_again`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use crate::redis::invocation::Invocation;

/// How many claim call numbers one server sees (a call marks the
/// `claimed_by` of the jobs it takes with its number:
/// `lua/lib/claim_jobs.lua`). A call sent again there says so, so its
/// number need only differ from the claimer's calls just before.
const CALL_NUMBERS: u32 = 499;

/// How many a cluster sees of one process: there every claim looks for
/// the jobs its number took (its client may have sent it again as it is),
/// so the number must not come back while the claimer holds the jobs of
/// its last call. It is sent after the process's [`process_mark`], so
/// that two processes sharing an owner string do not share numbers.
const CLUSTER_CALL_NUMBERS: u32 = 999_999;

/// A new claim call's number, 1 to [`CLUSTER_CALL_NUMBERS`]: from a
/// process-wide counter (so that one claimer's calls in turn differ) from
/// a random start (so that processes sharing an owner string seldom share
/// one).
pub(crate) fn next_call() -> u32 {
    static NEXT: OnceLock<AtomicU32> = OnceLock::new();
    let n = NEXT
        .get_or_init(|| AtomicU32::new(random_u32() % CLUSTER_CALL_NUMBERS))
        .fetch_add(1, Ordering::Relaxed);
    n % CLUSTER_CALL_NUMBERS + 1
}

/// This process's random mark (24 bits, six hex digits), before its call
/// numbers on a cluster.
fn process_mark() -> &'static str {
    static MARK: OnceLock<String> = OnceLock::new();
    MARK.get_or_init(|| format!("{:06x}", random_u32() & 0xff_ffff))
}

fn random_u32() -> u32 {
    uuid::Uuid::new_v4().as_u64_pair().0 as u32
}

/// Appends a claim's call number and whether it is sent again (`claim.lua`'s
/// ARGV 14 and 15). On a cluster every call looks for what its number
/// took: the cluster client sends a call whose connection dropped again
/// by itself, as it was.
pub(crate) fn call_args_to(inv: &mut Invocation<'_>, call: u32, again: bool) {
    let sharded = inv.sharded();
    if sharded {
        inv.arg(format!("{}.{}", process_mark(), call));
    } else {
        inv.arg(call % CALL_NUMBERS + 1);
    }
    inv.arg(if again || sharded { "1" } else { "0" });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::claim::{claim_invocation, ClaimArgs};
    use crate::redis::keys::QueueKeys;
    use std::time::Duration;

    /// A claim's call number and again flag (ARGV 14 and 15) as sent to `keys`.
    fn call_and_again(keys: &QueueKeys, again: bool) -> (String, String) {
        let a = ClaimArgs {
            who: "w",
            expiry: Duration::from_secs(30),
            count: 1,
            idle: true,
            hand_off: None,
            history: (10, Duration::from_secs(60)),
            trash: (10, Duration::from_secs(60)),
            call: 1234,
            again,
        };
        let inv = claim_invocation(keys, &a);
        let text = |i: usize| String::from_utf8(inv.args()[i].clone()).unwrap();
        (text(13), text(14))
    }

    #[test]
    fn a_cluster_claim_looks_for_its_own_call_from_its_first_sending() {
        let one = QueueKeys::new("q", "jw:{q}", "jw");
        assert_eq!(call_and_again(&one, false), ("237".into(), "0".into()));
        assert_eq!(call_and_again(&one, true).1, "1");
        let cluster = QueueKeys::on_cluster("q", "jw:{q}").unwrap();
        let (call, again) = call_and_again(&cluster, false);
        assert_eq!(again, "1", "a cluster's client may send it again as it is");
        let (mark, number) = call.split_once('.').unwrap();
        assert_eq!((mark, number), (process_mark(), "1234"));
        assert_eq!(mark.len(), 6);
    }
}
