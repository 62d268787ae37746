//! Retry delays: exponential with jitter.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Exponential backoff with ±50 % jitter: attempt n waits about
/// `base · 2^(n-1)`, capped at `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// Delay after the first failure (before jitter).
    pub base: Duration,
    /// Longest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(600),
        }
    }
}

/// A random number in [0, 1) from the process's random hasher keys.
fn unit_random() -> f64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

impl Backoff {
    /// The delay before retrying after failed attempt `attempt` (from 1).
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let exp = self.base.as_secs_f64() * 2f64.powi(attempt.saturating_sub(1).min(60) as i32);
        let capped = exp.min(self.max.as_secs_f64());
        Duration::from_secs_f64(capped * (0.5 + unit_random()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_is_capped_with_jitter() {
        let b = Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(2),
        };
        for _ in 0..100 {
            let d1 = b.delay(1).as_secs_f64();
            assert!((0.05..=0.15).contains(&d1), "{d1}");
            let d4 = b.delay(4).as_secs_f64();
            assert!((0.4..=1.2).contains(&d4), "{d4}");
            assert!(b.delay(40).as_secs_f64() <= 3.0);
        }
        let delays: std::collections::HashSet<u128> = (0..20).map(|_| b.delay(3).as_micros()).collect();
        assert!(delays.len() > 10, "jitter must vary the delays");
    }
}
