//! An oslo msgpackutils datetime (ext 1), as a Redis
//! `<ns>:<job>.last_modified` value holds it: decoding never panics, and a
//! decoded datetime survives a re-encode.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| jobworker::fuzzing::oslo_datetime(data));
