//! What one scrape reads, before anything is written (a collector's
//! `encode` is not async): the board's clock, each queue's overview,
//! today's statistics and failure groups, and the live workers. A read the
//! backend does not support is `None`.

use std::future::Future;

use futures_util::future::{try_join, try_join3, try_join_all};

use crate::board::{Admin, FailureGroup, Inspect, Presence, QueueOverview, WorkerInfo};
use crate::error::Result;
use crate::stats::QueueStats;

/// The board as one scrape read it.
#[derive(Debug)]
pub(super) struct Snapshot {
    /// The server's clock when read (ms since the epoch).
    pub(super) now_ms: i64,
    /// The queues asked for, in order.
    pub(super) queues: Vec<QueueSnapshot>,
    /// The live workers (`None`: the backend keeps no registry).
    pub(super) workers: Option<Vec<WorkerInfo>>,
}

/// One queue as one scrape read it.
#[derive(Debug)]
pub(super) struct QueueSnapshot {
    /// The queue.
    pub(super) name: String,
    /// Its jobs by state, oldest ready job and settings.
    pub(super) overview: Option<QueueOverview>,
    /// Today's statistics.
    pub(super) stats: Option<QueueStats>,
    /// Its trashed jobs by failure group.
    pub(super) failed: Option<Vec<FailureGroup>>,
}

impl Snapshot {
    /// Reads `queues` of `board`, concurrently; only an error other than
    /// `is_unsupported` fails it.
    pub(super) async fn read<B>(board: &B, queues: &[String]) -> Result<Snapshot>
    where
        B: Admin + Inspect + Presence,
    {
        let per_queue = try_join_all(
            queues
                .iter()
                .map(|q| try_join(supported(board.stats(q, None)), supported(board.failed(q)))),
        );
        let ((now_ms, overviews, workers), per_queue) = try_join(
            try_join3(
                board.server_ms(),
                supported(board.overview(queues)),
                supported(board.live_workers()),
            ),
            per_queue,
        )
        .await?;
        let mut overviews = overviews.map(Vec::into_iter);
        let queues = queues
            .iter()
            .zip(per_queue)
            .map(|(name, (stats, failed))| QueueSnapshot {
                name: name.clone(),
                overview: overviews.as_mut().and_then(Iterator::next),
                stats,
                failed,
            })
            .collect();
        Ok(Snapshot {
            now_ms,
            queues,
            workers,
        })
    }
}

/// What `read` gives, or `None` when the backend does not support it.
async fn supported<T>(read: impl Future<Output = Result<T>>) -> Result<Option<T>> {
    match read.await {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_unsupported() => Ok(None),
        Err(e) => Err(e),
    }
}
