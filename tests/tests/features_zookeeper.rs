//! The feature suite (`jobworker_tests::feature_suite`) on ZooKeeper: the
//! boards of each test under a root of their own on the test binary's
//! shared ZooKeeper (so one test's event stream or configuration does not
//! reach another's boards).

use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker_tests::feature_suite::FeatureHarness;
use jobworker_tests::{shared_zookeeper, unique_queue};

/// Boards on the test binary's shared ZooKeeper, under one test's root.
struct ZooKeeperHarness {
    root: String,
}

impl ZooKeeperHarness {
    fn new() -> ZooKeeperHarness {
        ZooKeeperHarness {
            root: unique_queue("features"),
        }
    }
}

impl FeatureHarness for ZooKeeperHarness {
    type B = ZooKeeperBoard;

    async fn board(&self) -> ZooKeeperBoard {
        let connect = format!("{}/{}", shared_zookeeper().connect_string(), self.root);
        ZooKeeperBoard::connect(ZooKeeperOptions::new(connect))
            .await
            .expect("connect to the test ZooKeeper")
    }
}

jobworker_tests::feature_tests!(ZooKeeperHarness::new());
