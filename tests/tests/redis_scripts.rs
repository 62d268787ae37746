//! Every verb's script, composed from the modules its header includes,
//! compiles in a real redis-server (SCRIPT LOAD), and is the Lua the
//! board runs (its SHA is in the server's cache after a board connects).
//! The benchmark's Functions library loads too, so `lua_bench` measures
//! code Redis accepts. (That every name a script calls is defined is the
//! runtime's unit test `redis::lua::tests`.)

use jobworker::redis::{lua, RedisBoard};
use jobworker_tests::lua_bench::{library, Way};
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
        let included = Way::Includes.script(verb).unwrap();
        let whole = Way::Today.script(verb).unwrap();
        assert!(included.len() <= whole.len(), "{verb}");
    }
    let extend = Way::Includes.script("extend").unwrap();
    assert!(
        !extend.contains("local function post_job"),
        "extend carries posting"
    );
}

#[tokio::test]
async fn the_benchmark_library_loads() {
    let mut con = connection().await;
    let text = library::text();
    let name: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(&text)
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(name, library::NAME);
    let _: () = redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg(library::NAME)
        .query_async(&mut con)
        .await
        .unwrap();
}
