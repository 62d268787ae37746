//! The Lua micro-benchmark behind `lua_bench` (see `runtime/lua/README.md`): three
//! ways of shipping the shared Lua helpers, side by side on one private
//! `redis-server`, interleaved round by round:
//!
//! - `today`: EVALSHA of every shared module followed by the verb's file,
//!   with all 17 queue keys (what every script was before modules: the
//!   whole prelude);
//! - `includes`: EVALSHA of the modules the verb includes (only the
//!   functions it reaches), then its file, with the keys its header names
//!   (what the board sends to Redis 6.2 and to a cluster);
//! - `library`: FCALL of the board's Functions library (FUNCTION LOAD,
//!   Redis ≥ 7: what the board uses on one server or behind sentinels),
//!   with no keys: the library builds them from the namespace.
//!
//! Each round runs, for each way, N single-job calls of the hot verbs
//! (post, claim 1 job, extend, consume) on its own queue, pipelined, and
//! reads the server's time per call (`INFO commandstats`), its CPU per
//! call (`used_cpu_user + used_cpu_sys`) and the calls per second the
//! client saw.

pub mod measure;

use jobworker::redis::lua;

/// How the shared helpers reach Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// Every module in front of every script (the old prelude).
    Today,
    /// Only the modules the script includes.
    Includes,
    /// One Functions library, called with FCALL.
    Library,
}

impl Way {
    /// All three, in the order of the first round.
    pub const ALL: [Way; 3] = [Way::Today, Way::Includes, Way::Library];

    /// A short name for tables and queue names.
    pub fn label(self) -> &'static str {
        match self {
            Way::Today => "today",
            Way::Includes => "includes",
            Way::Library => "library",
        }
    }

    /// The queue keys `verb` is sent this way (indexes into
    /// `QueueKeys::keys`): all of them, as before modules, those its
    /// header names, or none (the library builds them).
    pub fn keys(self, verb: &str) -> Vec<usize> {
        match self {
            Way::Today => (0..lua::KEY_NAMES.len()).collect(),
            Way::Includes => lua::keys(lua::verb(verb).unwrap_or_default()),
            Way::Library => Vec::new(),
        }
    }

    /// The script text of `verb` for the two EVALSHA ways (`None` for the
    /// library, which is loaded whole: [`lua::library::Library`]).
    pub fn script(self, verb: &str) -> Option<String> {
        let text = lua::verb(verb).unwrap_or_else(|| panic!("no lua/{verb}.lua"));
        match self {
            Way::Today => {
                let all: Vec<&str> = lua::MODULES.iter().map(|(_, t)| *t).collect();
                let keys = lua::bindings(&Way::Today.keys(verb));
                Some(format!("local CLUSTER = false\n{keys}{}\n{text}", all.join("\n")))
            }
            Way::Includes => Some(lua::compose(text)),
            Way::Library => None,
        }
    }
}

/// The verbs measured, in the order of one job's life.
pub const HOT_VERBS: [&str; 4] = ["post", "claim", "extend", "consume"];
