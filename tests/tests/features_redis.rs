//! The feature suite (`jobworker_tests::feature_suite`) on Redis: the
//! test binary's shared redis-server, or its shared Redis Cluster with
//! `JOBWORKER_TEST_BOARD=cluster`.

use jobworker::redis::RedisBoard;
use jobworker_tests::feature_suite::FeatureHarness;
use jobworker_tests::features;

/// Boards on the feature tests' Redis.
struct RedisHarness;

impl FeatureHarness for RedisHarness {
    type B = RedisBoard;

    async fn board(&self) -> RedisBoard {
        features::board().await
    }
}

jobworker_tests::feature_tests!(RedisHarness);
