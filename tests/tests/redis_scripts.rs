//! Every verb's script, composed from the modules its header includes,
//! compiles in a real redis-server (SCRIPT LOAD), and is the Lua the
//! board runs (its SHA is in the server's cache after a board connects).
//! (That every name a script calls is defined is the
//! runtime's unit test `redis::lua::tests`.)

use jobworker::redis::{lua, RedisBoard};
use jobworker_tests::shared_redis;

async fn connection() -> redis::aio::MultiplexedConnection {
    shared_redis()
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test]
async fn every_composed_script_compiles_and_is_what_the_board_loads() {
    let mut con = connection().await;
    let mut shas = Vec::new();
    for (verb, script) in lua::composed_verbs() {
        let sha: redis::RedisResult<String> = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(&script)
            .query_async(&mut con)
            .await;
        let sha = sha.unwrap_or_else(|e| panic!("lua/{verb}.lua does not compile: {e}"));
        assert_eq!(sha, redis::Script::new(&script).get_hash(), "{verb}");
        shas.push(sha);
    }
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut con)
        .await
        .unwrap();
    let _board = RedisBoard::connect(shared_redis().url()).await.unwrap();
    let cached: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(&shas)
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(
        cached.iter().all(|c| *c),
        "the board loads other scripts than the composed ones: {cached:?}"
    );
}

#[test]
fn scripts_carry_fewer_modules_than_the_whole_prelude() {
    for (verb, _) in lua::VERBS {
        let included = lua::compose(lua::verb(verb).unwrap());
        let whole: usize = lua::MODULES.iter().map(|(_, t)| t.len()).sum();
        assert!(included.len() < whole + lua::verb(verb).unwrap().len(), "{verb}");
    }
    let extend = lua::compose(lua::verb("extend").unwrap());
    assert!(
        !extend.contains("local function post_job"),
        "extend carries posting"
    );
}
