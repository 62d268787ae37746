//! One call of a verb's Lua: its keys and arguments, sent as FCALL of the
//! board's Functions library (Redis ≥ 7) or EVALSHA of the verb's script,
//! whichever the connection uses (see [`Connection::functions`]).

use redis::{ConnectionLike, ToRedisArgs};

use crate::redis::connect::Connection;
use crate::redis::keys::QueueKeys;
use crate::redis::scripts::{load_script, reload_library, LuaScript, LIBRARY};

/// A call of one verb: the queue keys it takes, then the common arguments
/// and its own.
pub(crate) struct Invocation<'k> {
    script: &'static LuaScript,
    keys: &'k QueueKeys,
    args: Vec<Vec<u8>>,
}

impl<'k> Invocation<'k> {
    /// A call of `script` on `keys`' queue with the common arguments.
    pub(crate) fn new(script: &'static LuaScript, keys: &'k QueueKeys) -> Invocation<'k> {
        let mut inv = Invocation {
            script,
            keys,
            args: Vec::with_capacity(8),
        };
        inv.arg(keys.prefix()).arg(&keys.queue).arg(&keys.events);
        inv
    }

    /// The arguments after the keys (the unit tests read them).
    #[cfg(test)]
    pub(crate) fn args(&self) -> &[Vec<u8>] {
        &self.args
    }

    /// Whether the call goes to a cluster.
    pub(crate) fn sharded(&self) -> bool {
        self.keys.sharded
    }

    /// Appends an argument.
    pub(crate) fn arg<A: ToRedisArgs>(&mut self, arg: A) -> &mut Invocation<'k> {
        self.args.extend(arg.to_redis_args());
        self
    }

    /// The command: FCALL of the verb's function, which builds the queue
    /// keys from NS (`lua/library.rs`), or EVALSHA of its script with the
    /// keys its header names (on a cluster, then the queue's fence key).
    fn cmd(&self, functions: bool) -> redis::Cmd {
        let sharded = self.keys.sharded;
        let mut cmd;
        if functions {
            cmd = redis::cmd("FCALL");
            cmd.arg(LIBRARY.function(self.script.verb)).arg(0);
        } else {
            cmd = redis::cmd("EVALSHA");
            cmd.arg(self.script.script(sharded).get_hash());
            cmd.arg(self.script.keys.len() + usize::from(sharded));
            for k in &self.script.keys {
                cmd.arg(&self.keys.keys[*k]);
            }
            if sharded {
                cmd.arg(self.keys.fence());
            }
        }
        for arg in &self.args {
            cmd.arg(arg);
        }
        cmd
    }

    /// Adds the call to `pipe`; a reply that says the server lost the Lua
    /// ([`is_noscript`]) means it did not run.
    pub(crate) fn add_to(&self, pipe: &mut redis::Pipeline, conn: &Connection) {
        pipe.add_command(self.cmd(conn.functions));
    }

    /// Sends the call once, as it is (see [`invoke`](Self::invoke)).
    pub(crate) async fn send(&self, conn: &Connection) -> redis::RedisResult<redis::Value> {
        self.cmd(conn.functions).query_async(&mut conn.link.clone()).await
    }

    /// Runs the call; when the server lost the Lua (restart, SCRIPT FLUSH,
    /// FUNCTION FLUSH), loads it and runs the call again. Not retried
    /// after a dropped connection (see `scripts::run` for verbs that are).
    pub(crate) async fn invoke(&self, conn: &Connection) -> redis::RedisResult<redis::Value> {
        match self.send(conn).await {
            Err(e) if is_noscript(&e) => {
                if conn.functions {
                    reload_library(conn).await?;
                } else {
                    load_script(conn, self.script.script(self.keys.sharded)).await?;
                }
                self.send(conn).await
            }
            other => other,
        }
    }

    /// [`invoke`](Self::invoke) on a blocking connection, always as EVALSHA
    /// (the supervisor's crash recovery: one call per dead worker).
    pub(crate) fn invoke_blocking(&self, con: &mut dyn ConnectionLike) -> redis::RedisResult<redis::Value> {
        match self.cmd(false).query(con) {
            Err(e) if is_noscript(&e) => {
                self.script.script(self.keys.sharded).load(con)?;
                self.cmd(false).query(con)
            }
            other => other,
        }
    }
}

/// The server does not have the Lua a call needs: EVALSHA's NOSCRIPT
/// (restart, SCRIPT FLUSH) or FCALL's "Function not found" (a restart
/// without persistence, FUNCTION FLUSH or DELETE). The call did not run.
pub(crate) fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
        || e.detail().is_some_and(|d| d.starts_with("Function not found"))
}
