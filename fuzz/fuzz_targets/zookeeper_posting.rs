//! A taskflow JSON posting, as a ZooKeeper `jobNNNNNNNNNN` znode holds it:
//! decoding never panics, and a decoded posting survives a re-encode.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| jobworker::fuzzing::zookeeper_posting(data));
