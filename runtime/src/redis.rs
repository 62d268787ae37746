//! The Redis board: taskflow's `RedisJobBoard` layout plus jobworker's
//! index, driven by one Lua script per verb (see `lua/README.md`).

mod admin;
mod board;
mod capabilities;
mod connect;
mod deps;
mod keys;
mod locate;
mod presence;
mod read;
mod recover;
mod recurring;
mod reply;
mod scripts;
mod stats;
mod sync;
mod wait;

pub use admin::CONFIG_KEYS;
pub use board::{
    RedisBoard, RedisOptions, DEFAULT_HISTORY_AGE, DEFAULT_HISTORY_COUNT, DEFAULT_TRASH_AGE,
    DEFAULT_TRASH_COUNT,
};
pub use connect::MIN_REDIS_VERSION;
pub use keys::{QueueKeys, DEFAULT_PREFIX};
pub use recover::POISON_CRASHES;
pub use sync::SyncBoard;
