//! Test support shared by the integration tests of jobworker.
//!
//! - [`shared_redis`]: one private `redis-server` per test binary, started on
//!   first use and stopped by PID when the process exits.
//! - [`unique_queue`]: a fresh queue (namespace) name for every test.
//! - [`wait_until`], [`wait_for`] and [`wait_for_blocking`]: wait on a
//!   condition with a deadline, never a bare sleep.
//! - [`copy_of`], [`with_owner`]: a lease rebuilt from its parts, to use a
//!   claim twice on purpose.
//! - [`Sentinels`]: a master, a replica and three sentinels for one test.
//! - [`ZooKeeperEnsemble`]: a 3-member (or n-member) ZooKeeper quorum on
//!   loopback ports for one test, whose members a test may kill and restart.
//! - [`RedisCluster`]: a Redis Cluster of N masters on loopback ports for one
//!   test, and [`shared_cluster`], one 3-master cluster per test binary.
//! - [`TlsZooKeeper`]: a ZooKeeper server with a TLS client port.
//! - [`make_certs`]: a private CA with server and client certificates, for
//!   TLS tests.
//! - [`CuttingProxy`]: a TCP proxy that drops a connection after a request
//!   ran (its reply lost) or before it reached the server, and holds the
//!   client's retry until the test lets it through.
//! - [`fixtures_dir`]: the taskflow golden files in `shared/fixtures/taskflow`.
//! - [`taskflow_python`] and [`run_python`]: real taskflow (PyPI) in a
//!   virtualenv made on first use, for interop tests.
//! - [`browser`]: a headless Chromium driven through chromedriver, for
//!   browser tests.
//! - [`conformance`]: the board-contract suite every backend runs.
//! - [`features`]: the setup shared by the Redis feature tests.
//! - [`shape`]: lines per production file and function, held to limits.
//! - [`chaos`]: the fault-injection run behind `scripts/chaos`.
//! - [`lua_bench`]: the Lua micro-benchmark behind the `lua_bench` binary.
//!
//! Nothing here skips a test when a server or tool is missing: it panics
//! with a message naming the Debian package to install.

pub mod browser;
pub mod chaos;
pub mod conformance;
pub mod feature_suite;
pub mod features;
pub mod lua_bench;
pub mod shape;

mod support {
    pub mod certs;
    pub mod cluster;
    pub mod ensemble;
    pub mod exit;
    pub mod fixtures;
    pub mod heard;
    pub mod lease;
    pub mod names;
    pub mod proxy;
    pub mod python;
    pub mod redis;
    pub mod sentinel;
    pub mod wait;
    pub mod zookeeper;
    pub mod zookeeper_tls;
}

pub use chaos::procs::is_zookeeper_agent;
pub use support::certs::{make_certs, Certs};
pub use support::cluster::{shared_cluster, RedisCluster};
pub use support::ensemble::{EstablishedSession, ZooKeeperEnsemble, ZooKeeperMode, ENSEMBLE_TIMEOUT};
pub use support::fixtures::{fixtures_dir, workspace_dir};
pub use support::heard::post_until_heard;
pub use support::lease::{copy_of, settle_and_take, with_owner};
pub use support::names::unique_queue;
pub use support::proxy::CuttingProxy;
pub use support::python::{
    run_python, run_python_async, taskflow_python, PyOutput, PYTHON_TIMEOUT, TASKFLOW_VENV_ENV,
    TASKFLOW_VERSION,
};
pub use support::redis::{shared_redis, SharedRedis};
pub use support::sentinel::{Sentinels, MASTER_NAME};
pub use support::wait::{wait_for, wait_for_blocking, wait_until, POLL_INTERVAL};
pub use support::zookeeper::{shared_zookeeper, ZooKeeperOptions, ZooKeeperServer};
pub use support::zookeeper_tls::TlsZooKeeper;
