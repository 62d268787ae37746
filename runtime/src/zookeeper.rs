//! The ZooKeeper board: taskflow's `ZookeeperJobBoard` layout (one
//! persistent sequential znode per job with the JSON posting, an ephemeral
//! `.lock` sibling per claim), plus jobworker's per-job state beside it.

mod board;

pub use board::{ZooKeeperBoard, ZooKeeperOptions};
