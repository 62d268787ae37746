//! ZooKeeper roots and boards for the binary's tests on the shared
//! ZooKeeper.

use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker_tests::{shared_zookeeper, unique_queue};

/// `host:port/root` of a fresh root on the shared ZooKeeper.
pub fn fresh_root(name: &str) -> String {
    format!("{}/{}", shared_zookeeper().connect_string(), unique_queue(name))
}

/// A board on `connect`.
pub async fn board(connect: &str) -> ZooKeeperBoard {
    ZooKeeperBoard::connect(ZooKeeperOptions::new(connect))
        .await
        .expect("connect to the test ZooKeeper")
}
