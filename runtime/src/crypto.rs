//! rustls' process-wide crypto provider. The Redis and ZooKeeper clients
//! build their TLS configs with rustls' default provider, which rustls
//! cannot choose on its own when two are compiled in (zookeeper-client
//! brings aws-lc-rs, redis ring): jobworker installs ring before either
//! connects with TLS.

use std::sync::Once;

/// Installs ring as the process's crypto provider, once; a provider
/// installed before (by the application, or a racing crate) stays.
pub(crate) fn install_provider() {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
