//! The Redis board: taskflow's `RedisJobBoard` layout plus jobworker's
//! index, driven by one Lua script per verb (see `lua/README.md`).

mod abandon;
mod admin;
mod board;
mod call_number;
mod capabilities;
mod claim;
mod cluster;
mod config;
mod connect;
mod consume;
mod deps;
mod durability;
mod extend;
mod failed;
mod handoff;
mod history;
mod index;
mod inspect;
mod invocation;
mod keepalive;
mod keys;
mod leader;
mod link;
mod locate;
#[doc(hidden)]
pub mod lua;
mod namespaces;
mod old_libraries;
mod post;
mod post_group;
mod post_many;
mod presence;
mod priority;
mod read;
mod reap;
mod recover;
mod recurring;
mod reply;
mod scripts;
mod sentinel;
mod settings;
mod split;
mod stats;
mod subscribe;
mod subscribed;
mod sync;
mod tag;
mod track;
mod trash;
mod wait;

pub use crate::board::CONFIG_KEYS;
pub use board::{
    RedisBoard, RedisOptions, DEFAULT_HISTORY_AGE, DEFAULT_HISTORY_COUNT, DEFAULT_TRASH_AGE,
    DEFAULT_TRASH_COUNT,
};
pub use connect::{RedisConnection, FUNCTIONS_ENV, MIN_REDIS_VERSION};
pub use durability::Durability;
pub use keys::{QueueKeys, DEFAULT_PREFIX};
pub use recover::POISON_CRASHES;
pub use sync::SyncBoard;
