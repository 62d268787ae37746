//! Every verb's script, composed from the modules its header includes,
//! compiles in a real redis-server (SCRIPT LOAD), and is the Lua a board
//! without Functions runs (its SHA is in the server's cache after such a
//! board connects); the Functions library compiles too, and is what a
//! board on Redis 7 loads. (That every name a script calls is defined is the
//! runtime's unit test `redis::lua::tests`.)

use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::lua::library::Library;
use jobworker::redis::{lua, RedisBoard, RedisOptions};
use jobworker_tests::lua_bench::Way;
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
    let _board = RedisBoard::with_options(RedisOptions::new(shared_redis().url()).functions(false))
        .await
        .unwrap();
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

/// The board's Functions library compiles in a real redis-server, has a
/// function per verb, and is what a board on Redis 7 loads.
#[tokio::test]
async fn the_library_compiles_and_is_what_the_board_loads() {
    let server = RedisServer::start(ServerOptions::default()).unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let library = Library::new();
    let name: redis::RedisResult<String> = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(&library.text)
        .query_async(&mut con)
        .await;
    assert_eq!(
        name.unwrap_or_else(|e| panic!("the library does not compile: {e}")),
        library.name
    );
    let listed = functions_of(&mut con).await;
    assert_eq!(listed.len(), lua::VERBS.len(), "{listed:?}");
    for (verb, _) in lua::VERBS {
        assert!(listed.contains(&library.function(verb)), "no function for {verb}");
    }
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query_async(&mut con)
        .await
        .unwrap();
    let _board = RedisBoard::connect(&server.url()).await.unwrap();
    assert_eq!(
        functions_of(&mut con).await,
        listed,
        "the board loads another library"
    );
}

/// The names of every function on the server, sorted.
async fn functions_of(con: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION").arg("LIST").query_async(con).await.unwrap();
    let mut names = Vec::new();
    for library in libraries {
        let fields: Vec<(String, redis::Value)> = redis::from_redis_value(library).unwrap();
        for (field, value) in fields {
            if field == "functions" {
                let functions: Vec<Vec<(String, redis::Value)>> = redis::from_redis_value(value).unwrap();
                for f in functions {
                    names.extend(
                        f.into_iter()
                            .filter(|(k, _)| k == "name")
                            .map(|(_, v)| redis::from_redis_value::<String>(v).unwrap()),
                    );
                }
            }
        }
    }
    names.sort();
    names
}
