//! Leases rebuilt from their parts, for tests that use one claim twice on
//! purpose (a second consume, a stale lease): a [`Lease`] is not `Clone`.

use jobworker::Lease;

/// The same claim as `lease`, rebuilt from its parts as another process
/// holding them would.
pub fn copy_of(lease: &Lease) -> Lease {
    Lease::new(lease.queue(), lease.job().clone(), lease.owner(), lease.token())
}

/// `lease` under another owner string (the same token): a lease nobody
/// holds.
pub fn with_owner(lease: &Lease, owner: &str) -> Lease {
    Lease::new(lease.queue(), lease.job().clone(), owner, lease.token())
}
