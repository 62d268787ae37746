//! A ZooKeeper server that also serves TLS (`secureClientPort`, Netty),
//! with a private CA's server certificate: for the TLS tests of the
//! ZooKeeper board. Its plain port stays for the readiness probes.

use std::fs;
use std::io;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::certs::{make_certs, Certs};
use super::zookeeper::{free_port, ZooKeeperOptions, ZooKeeperServer};

/// Netty's codecs (Debian's `libnetty-java`, a dependency of `zookeeper`),
/// which the Netty server needs and `zookeeper.jar`'s manifest leaves out.
const NETTY_CODEC_JAR: &str = "/usr/share/java/netty-codec.jar";

/// A running ZooKeeper with a TLS client port; stopped by PID when dropped.
pub struct TlsZooKeeper {
    /// The server (its plain port answers the readiness probes).
    pub server: ZooKeeperServer,
    /// The TLS client port on 127.0.0.1.
    pub secure_port: u16,
    /// The CA, the server's certificate and a client certificate.
    pub certs: Certs,
    _dir: TempDir,
}

impl TlsZooKeeper {
    /// Starts a server whose TLS port asks clients for a certificate when
    /// `client_auth` is `need` (ZooKeeper's default) and not when `none`.
    pub fn start(client_auth: &str) -> io::Result<TlsZooKeeper> {
        let dir = tempfile::Builder::new().prefix("jobworker-zk-tls-").tempdir()?;
        let certs = make_certs(dir.path());
        // ZooKeeper's PEM key store: the private key, then the certificate.
        let keystore = dir.path().join("keystore.pem");
        fs::write(
            &keystore,
            [fs::read(&certs.key)?, fs::read(&certs.cert)?].concat(),
        )?;
        let secure_port = free_port()?;
        let path = |p: &std::path::Path| p.display().to_string();
        let extra = [
            ("secureClientPort", secure_port.to_string()),
            (
                "serverCnxnFactory",
                "org.apache.zookeeper.server.NettyServerCnxnFactory".into(),
            ),
            ("ssl.keyStore.location", path(&keystore)),
            ("ssl.keyStore.type", "PEM".into()),
            ("ssl.trustStore.location", path(&certs.ca)),
            ("ssl.trustStore.type", "PEM".into()),
            ("ssl.clientAuth", client_auth.into()),
        ];
        let server = ZooKeeperServer::start(ZooKeeperOptions {
            extra_config: extra.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            extra_classpath: vec![NETTY_CODEC_JAR.into()],
            ..ZooKeeperOptions::default()
        })?;
        wait_for_port(secure_port, &server)?;
        Ok(TlsZooKeeper {
            server,
            secure_port,
            certs,
            _dir: dir,
        })
    }

    /// `127.0.0.1:SECURE_PORT`: the TLS servers of a connect string.
    pub fn secure_connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.secure_port)
    }
}

/// How long the TLS port may take to open after the plain port answers.
const SECURE_PORT_WAIT: Duration = Duration::from_secs(30);

/// Waits until the TLS port accepts connections: the server binds it after
/// the plain port, which is what its readiness probes ask.
fn wait_for_port(port: u16, server: &ZooKeeperServer) -> io::Result<()> {
    let deadline = Instant::now() + SECURE_PORT_WAIT;
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let log = fs::read_to_string(server.log_path()).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            return Err(io::Error::other(format!(
                "the ZooKeeper TLS port {port} did not open within {SECURE_PORT_WAIT:?}; end of its log:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
