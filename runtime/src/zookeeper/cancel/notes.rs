//! How a worker hears of the cancel of a job it holds: its cancel notes
//! (see `cancel.rs`).

use futures_util::StreamExt;
use zookeeper_client as zk;

use crate::board::CancelStream;
use crate::error::Result;
use crate::zookeeper::paths;
use crate::zookeeper::wait::reconnected;
use crate::zookeeper::ZooKeeperBoard;

/// The pause before a worker lists its cancel notes again after a failure.
const RETRY: std::time::Duration = std::time::Duration::from_millis(500);

impl ZooKeeperBoard {
    /// The ids of jobs cancelled while `owner` held them, from now on (and
    /// those whose notes are there already); each note is deleted once
    /// read. See the module docs.
    pub(crate) async fn cancel_notes_of(&self, owner: &str) -> Result<CancelStream> {
        paths::validate_owner(owner)?;
        let dir = paths::cancel_notes(self.root(), owner);
        let what = format!("cannot watch the cancels of worker {owner}");
        let client = self.client(&what).await?;
        client
            .mkdir(&dir, &self.session().access().persistent())
            .await
            .map_err(|e| self.session().error(&what, &e))?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let board = self.clone();
        self.session().runtime().spawn(async move {
            tokio::select! {
                _ = board.watch_notes(&dir, &tx) => {}
                _ = tx.closed() => {}
            }
        });
        let stream =
            futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|id| (id, rx)) });
        Ok(stream.boxed())
    }

    /// Lists `dir` with a watch, sends and deletes each note, waits for the
    /// watch (or a reconnect), again; until the receiver is gone.
    async fn watch_notes(&self, dir: &str, tx: &tokio::sync::mpsc::UnboundedSender<String>) {
        loop {
            let Ok(client) = self.session().client().await else {
                tokio::time::sleep(RETRY).await;
                continue;
            };
            let mut states = client.state_watcher();
            let watcher = match client.list_and_watch_children(dir).await {
                Ok((notes, watcher)) => {
                    for note in notes {
                        if tx.send(note.clone()).is_err() {
                            return;
                        }
                        let _ = client.delete(&format!("{dir}/{note}"), None).await;
                    }
                    Some(watcher)
                }
                // Removed (its worker stopped, or was recovered): wait for
                // a canceller to make it again.
                Err(zk::Error::NoNode) => match client.check_and_watch_stat(dir).await {
                    Ok((_, watcher)) => Some(watcher),
                    Err(_) => None,
                },
                Err(e) => {
                    tracing::debug!(error = %e, dir, "cannot list the cancel notes; trying again");
                    None
                }
            };
            match watcher {
                Some(watcher) => tokio::select! {
                    _ = watcher.changed() => {}
                    _ = reconnected(&mut states) => {}
                },
                None => tokio::time::sleep(RETRY).await,
            }
        }
    }

    /// Removes the cancel notes of `owner` (it stopped, or its leases were
    /// recovered); best effort.
    pub(crate) async fn drop_cancel_notes(&self, owner: &str) {
        if paths::validate_owner(owner).is_err() {
            return;
        }
        let dir = paths::cancel_notes(self.root(), owner);
        let Ok(client) = self.session().client().await else {
            return;
        };
        if let Ok(notes) = client.list_children(&dir).await {
            for note in notes {
                let _ = client.delete(&format!("{dir}/{note}"), None).await;
            }
            let _ = client.delete(&dir, None).await;
        }
    }
}
