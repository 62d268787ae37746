//! TLS to ZooKeeper: every server of the connect string is reached over
//! TLS (ZooKeeper's `secureClientPort`), its certificate verified against
//! a CA file and the host name (or IP address) it is reached by; with a
//! client certificate and key, the session proves its own identity (what
//! ZooKeeper's default `ssl.clientAuth=need` asks for). The files are read
//! at every connect, so a renewed certificate is used by the next session.

use std::path::PathBuf;

use zookeeper_client as zk;

use crate::error::{Error, Result};

/// How a board reaches ZooKeeper over TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZooKeeperTls {
    /// The CA certificates (PEM) the servers' certificates are checked
    /// against.
    pub ca: PathBuf,
    /// The client's certificate and private key (PEM), for servers that
    /// require one.
    pub identity: Option<(PathBuf, PathBuf)>,
}

impl ZooKeeperTls {
    /// TLS verified against the CA certificates in `ca`.
    pub fn new(ca: impl Into<PathBuf>) -> Self {
        ZooKeeperTls {
            ca: ca.into(),
            identity: None,
        }
    }

    /// The client certificate and key given to the servers.
    pub fn with_identity(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.identity = Some((cert.into(), key.into()));
        self
    }

    /// The client crate's options, from the files as they are now.
    pub(crate) fn options(&self) -> Result<zk::TlsOptions> {
        crate::crypto::install_provider();
        let ca = read(&self.ca, "CA certificates")?;
        let mut opts = zk::TlsOptions::new()
            .with_pem_ca(&ca)
            .map_err(|e| bad(&self.ca, "CA certificates", &e))?;
        if let Some((cert_path, key_path)) = &self.identity {
            let cert = read(cert_path, "client certificate")?;
            let key = read(key_path, "client key")?;
            opts = opts
                .with_pem_identity(&cert, &key)
                .map_err(|e| bad(cert_path, "client certificate and key", &e))?;
        }
        Ok(opts)
    }
}

fn read(path: &std::path::Path, what: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        Error::io(
            &format!("cannot read the zookeeper {what} at {}", path.display()),
            e,
        )
    })
}

fn bad(path: &std::path::Path, what: &str, e: &zk::Error) -> Error {
    Error::invalid(format!(
        "the zookeeper {what} at {} are not usable PEM: {e}",
        path.display()
    ))
}
