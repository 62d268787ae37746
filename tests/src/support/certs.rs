//! Certificates for TLS tests: a private CA, a server certificate for
//! `localhost` / `127.0.0.1` and a client certificate, made with the
//! `openssl` command line (which panics with the install hint when it is
//! missing).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// OpenSSL config: an empty DN section for `req`, the CA and the server
/// extensions.
const OPENSSL_CNF: &str = "\
[req]
distinguished_name = dn
prompt = no

[dn]
CN = unused

[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash

[v3_server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost,IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid

[v3_client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
";

/// Paths of the generated PEM files.
pub struct Certs {
    /// The private CA's certificate.
    pub ca: PathBuf,
    /// The server's certificate (`localhost`, `127.0.0.1`), signed by the CA.
    pub cert: PathBuf,
    /// The server's private key (PKCS#8).
    pub key: PathBuf,
    /// A client certificate (`CN=jobworker test client`), signed by the CA.
    pub client_cert: PathBuf,
    /// The client's private key.
    pub client_key: PathBuf,
}

/// Runs `openssl args…` in `dir`; panics with its stderr on failure and with
/// the install hint when `openssl` is missing.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            if e.kind() == ErrorKind::NotFound {
                panic!("install openssl: apt-get install -y openssl");
            }
            panic!("cannot run openssl {args:?}: {e}");
        });
    assert!(
        out.status.success(),
        "openssl {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An EC key's `req` options (P-256, no passphrase).
const EC_KEY: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

/// A private CA, a server certificate for `localhost` and a client
/// certificate signed by it, in `dir`.
pub fn make_certs(dir: &Path) -> Certs {
    std::fs::write(dir.join("openssl.cnf"), OPENSSL_CNF).unwrap();
    let mut ca_args = vec!["req", "-x509", "-config", "openssl.cnf", "-extensions", "v3_ca"];
    ca_args.extend(EC_KEY);
    ca_args.extend(["-keyout", "ca.key", "-out", "ca.pem", "-days", "2"]);
    ca_args.extend(["-subj", "/CN=jobworker test CA"]);
    openssl(dir, &ca_args);
    signed(dir, ("server", "2"), "/CN=localhost", "v3_server");
    signed(dir, ("client", "3"), "/CN=jobworker test client", "v3_client");
    Certs {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client.key"),
    }
}

/// A key `NAME.key` and a certificate `NAME.pem` (serial `serial`) for
/// `subject`, with the extensions of section `extensions`, signed by the
/// CA in `dir`.
fn signed(dir: &Path, (name, serial): (&str, &str), subject: &str, extensions: &str) {
    let (key, csr, pem) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
    );
    let mut args = vec!["req", "-new", "-config", "openssl.cnf"];
    args.extend(EC_KEY);
    args.extend(["-keyout", &key, "-out", &csr, "-subj", subject]);
    openssl(dir, &args);
    let mut args = vec!["x509", "-req", "-in", &csr, "-CA", "ca.pem", "-CAkey", "ca.key"];
    args.extend(["-set_serial", serial, "-days", "2", "-extfile", "openssl.cnf"]);
    args.extend(["-extensions", extensions, "-out", &pem]);
    openssl(dir, &args);
}
