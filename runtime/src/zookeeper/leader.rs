//! Maintenance leader election on ZooKeeper: one EPHEMERAL znode per
//! queue, `R/Q/.jw/leader`, holding `{"who": …, "until_ms": …}` (the
//! leading worker's owner string and the end of its term on the server's
//! clock).
//!
//! - **elect**: creates the znode when there is none. When it exists, the
//!   caller leads only if the znode holds `who` *and* belongs to this
//!   board's session (its `ephemeralOwner` is the session id): then the
//!   term is renewed (`set_data` at the version read). Another worker's
//!   term whose end passed (a runner that stopped renewing while its
//!   process, and so its session, lives on) is taken over in one
//!   transaction (delete at the version read + create), so two electors
//!   never both win it.
//! - **resign**: deletes the znode at its version, only when it holds
//!   `who`.
//! - A worker that dies takes its leadership with it: its session expires
//!   (or is closed on exit) and ZooKeeper deletes the ephemeral znode, so
//!   another worker leads at its next election, before the term's end.
//!
//! The term (`ttl`) therefore matters only for a live session whose
//! runner stopped; on Redis it is the only way a leadership ends without a
//! resign.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use zookeeper_client as zk;

use crate::error::Result;
use crate::zookeeper::lease::TRIES;
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::session::{is_definite, source};
use crate::zookeeper::ZooKeeperBoard;

/// What the leader znode holds.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct Term {
    /// The leading worker.
    who: String,
    /// The end of its term (ms, server clock) unless renewed.
    until_ms: i64,
}

impl Term {
    /// The term in `data`; an unreadable one (written by hand) has ended.
    fn parse(data: &[u8]) -> Term {
        serde_json::from_slice(data).unwrap_or_default()
    }

    fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// What one election try did.
enum Tried {
    /// `who` leads.
    Leads,
    /// Someone else leads.
    Other,
    /// The znode changed meanwhile (or the queue's directories went): try
    /// again.
    Again,
}

impl ZooKeeperBoard {
    /// Takes or renews `queue`'s maintenance leadership for `who` (see the
    /// module docs); true when `who` leads now.
    pub(crate) async fn elect_leader(&self, queue: &str, who: &str, ttl: Duration) -> Result<bool> {
        let paths = self.paths(queue)?;
        self.ensure_queue(&paths).await?;
        let what = format!("cannot elect the maintenance leader of queue {queue}");
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1);
        let mut unknown = None;
        for _ in 0..TRIES {
            let client = self.client(&what).await?;
            match self.elect_once(&client, &paths, who, ttl_ms).await {
                Ok(Tried::Leads) => return Ok(true),
                Ok(Tried::Other) => return Ok(false),
                Ok(Tried::Again) => {}
                Err(zk::Error::NoNode) => self.remake(&paths).await?,
                Err(e) if is_definite(&e) => return Err(self.session().error(&what, &e)),
                // Unknown outcome (connection lost): the next read tells.
                Err(e) => unknown = Some(e),
            }
        }
        match unknown {
            Some(e) => Err(self.session().error(&what, &e)),
            None => Ok(false),
        }
    }

    /// One election try with `client`.
    async fn elect_once(
        &self,
        client: &zk::Client,
        paths: &QueuePaths,
        who: &str,
        ttl_ms: i64,
    ) -> Result<Tried, zk::Error> {
        let access = self.session().access();
        let term = Term {
            who: who.to_owned(),
            until_ms: self.now_ms().saturating_add(ttl_ms),
        };
        let (data, stat) = match client.get_data(&paths.leader).await {
            Ok(found) => found,
            Err(zk::Error::NoNode) => {
                return match client
                    .create(&paths.leader, &term.to_bytes(), &access.ephemeral())
                    .await
                {
                    Ok(_) => Ok(Tried::Leads),
                    Err(zk::Error::NodeExists) => Ok(Tried::Again),
                    Err(e) => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        let held = Term::parse(&data);
        if held.who == who && stat.ephemeral_owner == client.session_id().0 {
            return match client
                .set_data(&paths.leader, &term.to_bytes(), Some(stat.version))
                .await
            {
                Ok(_) => Ok(Tried::Leads),
                Err(zk::Error::BadVersion | zk::Error::NoNode) => Ok(Tried::Again),
                Err(e) => Err(e),
            };
        }
        if held.until_ms >= self.now_ms() {
            return Ok(Tried::Other);
        }
        // The holder's term ended without a renewal: take it over, unless
        // someone else renews or takes it first.
        let mut w = client.new_multi_writer();
        w.add_delete(&paths.leader, Some(stat.version))?;
        w.add_create(&paths.leader, &term.to_bytes(), &access.ephemeral())?;
        match w.commit().await {
            Ok(_) => Ok(Tried::Leads),
            Err(e) => match source(&e) {
                zk::Error::BadVersion | zk::Error::NoNode | zk::Error::NodeExists => Ok(Tried::Again),
                other => Err(other.clone()),
            },
        }
    }

    /// Gives up `queue`'s leadership if `who` holds it (deletes the znode
    /// at the version read).
    pub(crate) async fn resign_leader(&self, queue: &str, who: &str) -> Result<()> {
        let paths = self.paths(queue)?;
        let what = format!("cannot resign the maintenance leadership of queue {queue}");
        let path = &paths.leader;
        let resigned = self
            .read(&what, |client| async move {
                let (data, stat) = match client.get_data(path).await {
                    Ok(found) => found,
                    Err(zk::Error::NoNode) => return Ok(()),
                    Err(e) => return Err(e),
                };
                if Term::parse(&data).who != who {
                    return Ok(());
                }
                match client.delete(path, Some(stat.version)).await {
                    // Gone, or renewed or taken over meanwhile: not ours
                    // to delete any more.
                    Ok(()) | Err(zk::Error::NoNode | zk::Error::BadVersion) => Ok(()),
                    Err(e) => Err(e),
                }
            })
            .await?;
        resigned.map_err(|e| self.session().error(&what, &e))
    }

    /// Who leads `queue`'s maintenance: the znode's `who`, unless its term
    /// ended (then nobody, as on Redis once the key expired).
    pub(crate) async fn current_leader(&self, queue: &str) -> Result<Option<String>> {
        let paths = self.paths(queue)?;
        let what = format!("cannot read the maintenance leader of queue {queue}");
        let path = &paths.leader;
        let found = self
            .read(&what, |client| async move {
                match client.get_data(path).await {
                    Ok((data, _)) => Ok(Some(data)),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await?
            .map_err(|e| self.session().error(&what, &e))?;
        let now = self.now_ms();
        Ok(found
            .map(|data| Term::parse(&data))
            .filter(|t| t.until_ms >= now && !t.who.is_empty())
            .map(|t| t.who))
    }
}
