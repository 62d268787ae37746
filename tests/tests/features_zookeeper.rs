//! The feature suite (`jobworker_tests::feature_suite`) on ZooKeeper: every
//! board under one root of the test binary's shared ZooKeeper; every test
//! uses its own queues.

use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker_tests::feature_suite::FeatureHarness;
use jobworker_tests::shared_zookeeper;

/// Boards on the test binary's shared ZooKeeper.
struct ZooKeeperHarness;

impl FeatureHarness for ZooKeeperHarness {
    type B = ZooKeeperBoard;

    async fn board(&self) -> ZooKeeperBoard {
        let connect = format!("{}/features", shared_zookeeper().connect_string());
        ZooKeeperBoard::connect(ZooKeeperOptions::new(connect))
            .await
            .expect("connect to the test ZooKeeper")
    }
}

jobworker_tests::feature_tests!(ZooKeeperHarness);
