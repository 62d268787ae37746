//! The board-contract conformance suite on the Redis backend.

use jobworker::redis::RedisBoard;
use jobworker_tests::conformance::Harness;
use jobworker_tests::shared_redis;

/// Boards on the test binary's shared redis-server.
struct RedisHarness;

impl Harness for RedisHarness {
    type B = RedisBoard;

    async fn board(&self) -> RedisBoard {
        RedisBoard::connect(shared_redis().url())
            .await
            .expect("connect to the test redis-server")
    }
}

jobworker_tests::conformance_tests!(RedisHarness);
