//! Giving back at once the leases of a worker that died, instead of
//! waiting for them to expire: the supervisor's crash recovery.

use std::future::Future;

use crate::error::Result;

/// What a recovery did: jobs back to ready, and jobs trashed (attempts or
/// crashes used up: a poison pill).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recovered {
    /// Jobs back to ready.
    pub back: usize,
    /// Jobs trashed.
    pub trashed: usize,
}

/// Crash recovery on a board.
pub trait Recovery: Sync {
    /// Gives back every lease `owner` holds in `queue`, counting an attempt
    /// and the crash (`reason`) on each; a job whose attempts are used up,
    /// or that killed its worker too often, is trashed.
    fn recover_owner(
        &self,
        queue: &str,
        owner: &str,
        reason: &str,
    ) -> impl Future<Output = Result<Recovered>> + Send;
}
