//! Workers as taskflow entities: an ephemeral znode per worker, with
//! taskflow's conductor body `{"kind": "conductor", "name": …, "metadata":
//! …}`.
//!
//! Every worker is registered at the root level,
//! `<root>/.entities/conductor/<owner>` (the entity path of a taskflow
//! board whose `path` is `<root>/jobs`), which [`list_workers`] reads; with
//! [`register_worker_for`] it is also registered under each queue it serves,
//! `<root>/<Q>/.entities/conductor/<owner>`, where a taskflow board sharing
//! that queue keeps its conductors. The znodes are ephemeral: they go with
//! the worker's session, and the board registers them again in a new
//! session after its old one expired.
//!
//! [`list_workers`]: ZooKeeperBoard::list_workers
//! [`register_worker_for`]: ZooKeeperBoard::register_worker_for

use rmpv::Value;
use zookeeper_client as zk;

use crate::codec::value_to_json;
use crate::error::{Error, Result};
use crate::zookeeper::json;
use crate::zookeeper::paths::{self, root_entities};
use crate::zookeeper::ZooKeeperBoard;

/// taskflow's entity kind of a worker.
const CONDUCTOR: &str = "conductor";

/// The entity body, in Python's JSON format (as taskflow's `to_dict`).
fn entity_body(owner: &str, metadata: &serde_json::Value) -> Result<Vec<u8>> {
    let body = Value::Map(vec![
        (Value::from("kind"), Value::from(CONDUCTOR)),
        (Value::from("name"), Value::from(owner)),
        (Value::from("metadata"), json::from_serde(metadata)),
    ]);
    json::dumps(&body)
        .map(String::into_bytes)
        .map_err(|e| Error::invalid(format!("cannot register worker {owner}: {e}")))
}

impl ZooKeeperBoard {
    /// Registers worker `owner` at the root level (see the module docs).
    pub async fn register_worker(&self, owner: &str, metadata: serde_json::Value) -> Result<()> {
        self.register_worker_for(&[], owner, metadata).await
    }

    /// Registers worker `owner` at the root level and under each of
    /// `queues`. Registering again replaces the metadata.
    pub async fn register_worker_for(
        &self,
        queues: &[&str],
        owner: &str,
        metadata: serde_json::Value,
    ) -> Result<()> {
        paths::validate_owner(owner)?;
        let body = entity_body(owner, &metadata)?;
        let mut places = vec![format!("{}/{owner}", root_entities(&self.inner.root))];
        for q in queues {
            places.push(self.paths(q)?.entity(owner));
        }
        let what = format!("cannot register worker {owner}");
        let access = self.session().access();
        let (persistent, ephemeral) = (&access.persistent(), &access.ephemeral());
        for path in places {
            let parent = paths::parent(&path).to_owned();
            let written = self
                .read(&what, |client| {
                    let (path, parent, body) = (path.clone(), parent.clone(), body.clone());
                    async move {
                        client.mkdir(&parent, persistent).await?;
                        match client.create(&path, &body, ephemeral).await {
                            Ok(_) => Ok(()),
                            Err(zk::Error::NodeExists) => client.set_data(&path, &body, None).await.map(drop),
                            Err(e) => Err(e),
                        }
                    }
                })
                .await?;
            written.map_err(|e| self.session().error(&what, &e))?;
            self.session().keep_ephemeral(&path, &body);
        }
        Ok(())
    }

    /// Removes worker `owner`'s entities (root level and every queue it
    /// was registered for through this board).
    pub async fn unregister_worker(&self, owner: &str) -> Result<()> {
        paths::validate_owner(owner)?;
        let root_path = format!("{}/{owner}", root_entities(&self.inner.root));
        let mut places = vec![root_path];
        places.extend(self.session().kept_ephemerals(&format!("/{CONDUCTOR}/{owner}")));
        let what = format!("cannot unregister worker {owner}");
        let client = self.client(&what).await?;
        for path in places {
            self.session().forget_ephemeral(&path);
            match client.delete(&path, None).await {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(e) => return Err(self.session().error(&what, &e)),
            }
        }
        Ok(())
    }

    /// The registered workers (root level): each entity's JSON body,
    /// `{"kind": "conductor", "name": …, "metadata": …}`.
    pub async fn list_workers(&self) -> Result<Vec<serde_json::Value>> {
        let dir = root_entities(&self.inner.root);
        let what = "cannot list the workers".to_owned();
        let listed = self
            .read(&what, |client| {
                let dir = dir.clone();
                async move { client.list_children(&dir).await }
            })
            .await?;
        let mut names = match listed {
            Ok(names) => names,
            Err(zk::Error::NoNode) => return Ok(Vec::new()),
            Err(e) => return Err(self.session().error(&what, &e)),
        };
        names.sort();
        let bodies = self
            .read_many(&what, names.iter().map(|n| format!("{dir}/{n}")).collect())
            .await?;
        Ok(bodies
            .into_iter()
            .flatten()
            .filter_map(|(data, _)| json::loads(&data).ok())
            .map(|v| value_to_json(&v))
            .collect())
    }
}
