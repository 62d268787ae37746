//! One module per command (or per small family of commands): its clap
//! arguments, where it has its own, and the function that runs it.

pub(crate) mod bench;
pub(crate) mod cancel;
pub(crate) mod claim;
pub(crate) mod config;
pub(crate) mod count;
pub(crate) mod docs;
pub(crate) mod events;
pub(crate) mod failed;
pub(crate) mod handlers;
pub(crate) mod history;
pub(crate) mod lease;
pub(crate) mod list;
pub(crate) mod post;
pub(crate) mod priority;
pub(crate) mod queues;
pub(crate) mod reap;
pub(crate) mod recur;
pub(crate) mod run;
pub(crate) mod server;
pub(crate) mod settle;
pub(crate) mod show;
pub(crate) mod stats;
pub(crate) mod tag;
pub(crate) mod track;
pub(crate) mod web;
pub(crate) mod workers;
