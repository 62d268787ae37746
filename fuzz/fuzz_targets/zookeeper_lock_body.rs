//! A ZooKeeper `.lock` body (taskflow's `{"owner": …}` plus jobworker's
//! lease) and a jobworker job record (`.jw/ids/<uuid>`), both read from the
//! same bytes: neither parser panics, and both survive a re-encode.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| jobworker::fuzzing::zookeeper_lock_and_record(data));
