//! The Redis board: taskflow's `RedisJobBoard` layout plus jobworker's
//! index, driven by one Lua script per verb (see `lua/README.md`).

mod board;
mod connect;
mod keys;
mod read;
mod reply;
mod scripts;
mod sync;
mod wait;

pub use board::{RedisBoard, RedisOptions, MAX_CLAIM_COUNT};
pub use connect::MIN_REDIS_VERSION;
pub use keys::{QueueKeys, DEFAULT_PREFIX};
pub use sync::{QueueCounts, SyncBoard, POISON_CRASHES};
