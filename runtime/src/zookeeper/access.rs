//! Who may touch the board's znodes: digest credentials and the ACLs of the
//! znodes jobworker creates.
//!
//! Without credentials every znode is created `world:anyone` with all
//! rights (kazoo's default, so taskflow and jobworker may delete each
//! other's znodes). With digest credentials (`user:password@host:port/root`)
//! the session authenticates with them and every znode it creates is
//! creator-only (`auth` with all rights: the server stores the digest of
//! `user:password`), plus read for one configurable identity (the
//! reader, `SCHEME:ID` as in ZooKeeper's `setAcl`). A taskflow board that
//! authenticates with the same digest (kazoo's `auth_data`) and creates its
//! znodes with `make_digest_acl(user, password, all=True)` shares them
//! both ways; a client without the digest can neither read nor change them.

use zookeeper_client as zk;

use crate::error::{Error, Result};

/// Digest credentials (ZooKeeper's `digest` scheme): `user:password`.
#[derive(Clone, PartialEq, Eq)]
pub struct Digest {
    /// The user name (no `:`).
    pub user: String,
    /// The password (never printed).
    pub password: String,
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Digest")
            .field("user", &self.user)
            .field("password", &"<hidden>")
            .finish()
    }
}

impl Digest {
    /// Splits `user:password@rest` into the credentials and `rest`; a
    /// connect string without `@` before its root path has none (a root
    /// path may hold `@`). The split is at the last `@` before the path (a
    /// server list has none) and the first `:` (so a password may hold
    /// both, but no `/`).
    pub(crate) fn split_off(connect: &str) -> (Option<Digest>, &str) {
        let servers = connect.split('/').next().unwrap_or(connect);
        let Some((userinfo, _)) = servers.rsplit_once('@') else {
            return (None, connect);
        };
        let rest = &connect[userinfo.len() + 1..];
        let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        let digest = Digest {
            user: user.to_owned(),
            password: password.to_owned(),
        };
        (Some(digest), rest)
    }

    /// Checks that both parts are there.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.user.is_empty() || self.password.is_empty() {
            return Err(Error::invalid(
                "zookeeper credentials need both parts: user:password@host:port/root",
            ));
        }
        Ok(())
    }

    /// The `digest` scheme's auth packet.
    fn packet(&self) -> Vec<u8> {
        format!("{}:{}", self.user, self.password).into_bytes()
    }
}

/// Parses a reader identity, `SCHEME:ID` (`digest:user:BASE64`,
/// `ip:10.0.0.0/8`, `world:anyone`, `sasl:name`, `x509:…`).
pub(crate) fn parse_identity(text: &str) -> Result<zk::AuthId> {
    match text.split_once(':') {
        Some((scheme, id)) if !scheme.is_empty() && !id.is_empty() && !scheme.contains(char::is_whitespace) => {
            Ok(zk::AuthId::new(scheme, id))
        }
        _ => Err(Error::invalid(format!(
            "zookeeper reader {text:?} is not SCHEME:ID (e.g. digest:monitor:BASE64HASH, ip:10.0.0.0/8, world:anyone)"
        ))),
    }
}

/// How a session authenticates and which ACLs its znodes get.
#[derive(Debug, Clone)]
pub(crate) struct Access {
    /// The `digest` auth packet, when there are credentials.
    auth: Option<Vec<u8>>,
    /// The ACLs of every znode the board creates.
    acls: Vec<zk::Acl>,
}

impl Access {
    /// Open access: no credentials, `world:anyone` all.
    pub(crate) fn open() -> Access {
        Access {
            auth: None,
            acls: zk::Acls::anyone_all().to_vec(),
        }
    }

    /// The access of `digest` (creator-only znodes, read for `reader`), or
    /// open access without credentials. A reader needs credentials.
    pub(crate) fn new(digest: Option<&Digest>, reader: Option<&str>) -> Result<Access> {
        let Some(digest) = digest else {
            if reader.is_some() {
                return Err(Error::invalid(
                    "a zookeeper reader needs credentials (user:password@host:port/root): \
                     without them every znode is readable and writable by anyone",
                ));
            }
            return Ok(Access::open());
        };
        digest.validate()?;
        let mut acls = vec![zk::Acl::new(zk::Permission::ALL, zk::AuthId::authed())];
        if let Some(reader) = reader {
            acls.push(zk::Acl::new(zk::Permission::READ, parse_identity(reader)?));
        }
        Ok(Access {
            auth: Some(digest.packet()),
            acls,
        })
    }

    /// Whether the session authenticates.
    pub(crate) fn has_credentials(&self) -> bool {
        self.auth.is_some()
    }

    /// Adds the credentials to a connector: they go with the connect
    /// request, ahead of any other, as a server that enforces
    /// authentication (`enforce.auth.enabled`) requires.
    pub(crate) fn authenticate(&self, connector: zk::Connector) -> zk::Connector {
        match &self.auth {
            Some(packet) => connector.with_auth("digest", packet),
            None => connector,
        }
    }

    /// Sends the credentials on a session just established (see
    /// `connect::connect_on` for when).
    pub(crate) async fn authenticate_session(
        &self,
        client: &zk::Client,
    ) -> std::result::Result<(), zk::Error> {
        match &self.auth {
            Some(packet) => client.auth("digest", packet).await,
            None => Ok(()),
        }
    }

    /// Options for a persistent znode.
    pub(crate) fn persistent(&self) -> zk::CreateOptions<'_> {
        zk::CreateMode::Persistent.with_acls(zk::Acls::new(&self.acls))
    }

    /// Options for a persistent sequential znode (a job posting, a tally
    /// entry).
    pub(crate) fn sequential(&self) -> zk::CreateOptions<'_> {
        zk::CreateMode::PersistentSequential.with_acls(zk::Acls::new(&self.acls))
    }

    /// Options for an ephemeral sequential znode (an event listener).
    pub(crate) fn ephemeral_sequential(&self) -> zk::CreateOptions<'_> {
        zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::new(&self.acls))
    }

    /// Options for an ephemeral znode (a lock, a worker entity).
    pub(crate) fn ephemeral(&self) -> zk::CreateOptions<'_> {
        zk::CreateMode::Ephemeral.with_acls(zk::Acls::new(&self.acls))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_split_at_the_last_at_and_the_first_colon() {
        let (d, rest) = Digest::split_off("app:s3:cr@t@h1:2181,h2:2181/jw");
        let d = d.unwrap();
        assert_eq!(
            (d.user.as_str(), d.password.as_str(), rest),
            ("app", "s3:cr@t", "h1:2181,h2:2181/jw")
        );
        assert!(!format!("{d:?}").contains("s3:cr"));
        assert_eq!(Digest::split_off("h:1/jw"), (None, "h:1/jw"));
        assert_eq!(Digest::split_off("h:1/jobs@prod"), (None, "h:1/jobs@prod"));
        let (d, rest) = Digest::split_off("app:pw@h:1/jobs@prod");
        assert_eq!((d.unwrap().user.as_str(), rest), ("app", "h:1/jobs@prod"));
        let (no_password, _) = Digest::split_off("app@h:1");
        assert!(no_password.unwrap().validate().unwrap_err().is_invalid());
    }

    #[test]
    fn acls_are_open_without_credentials_and_creator_only_with_them() {
        let open = Access::new(None, None).unwrap();
        assert_eq!(open.acls, zk::Acls::anyone_all().to_vec());
        let digest = Digest {
            user: "app".into(),
            password: "pw".into(),
        };
        let closed = Access::new(Some(&digest), Some("ip:127.0.0.1")).unwrap();
        assert_eq!(
            closed.acls[0],
            zk::Acl::new(zk::Permission::ALL, zk::AuthId::authed())
        );
        assert_eq!(
            closed.acls[1],
            zk::Acl::new(zk::Permission::READ, zk::AuthId::new("ip", "127.0.0.1"))
        );
        assert!(Access::new(None, Some("world:anyone")).unwrap_err().is_invalid());
        assert!(Access::new(Some(&digest), Some("nocolon"))
            .unwrap_err()
            .is_invalid());
    }
}
