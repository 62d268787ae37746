//! The board-contract conformance suite on a Redis Cluster: three masters
//! on loopback ports (the test binary's shared cluster), the queues of the
//! suite spread over them by their hash tags.

use jobworker::redis::RedisBoard;
use jobworker_tests::conformance::Harness;
use jobworker_tests::shared_cluster;

/// Boards on the test binary's shared cluster.
struct ClusterHarness;

impl Harness for ClusterHarness {
    type B = RedisBoard;

    async fn board(&self) -> RedisBoard {
        RedisBoard::connect(&shared_cluster().url())
            .await
            .expect("connect to the test redis cluster")
    }
}

jobworker_tests::conformance_tests!(ClusterHarness);
