//! Unique names, so tests sharing one server never see each other's data.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// `prefix` + `-` + a short unique suffix (8 random hex digits and a
/// per-process counter), e.g. `claim-3fa9c01e0`. Every test uses its own
/// queue, so tests can run in parallel against [`shared_redis`](crate::shared_redis).
pub fn unique_queue(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u128(nanos);
    hasher.write_u64(n);
    // Truncation intended: 32 random bits plus the counter are plenty.
    let random = hasher.finish() as u32;
    format!("{prefix}-{random:08x}{n:x}")
}
