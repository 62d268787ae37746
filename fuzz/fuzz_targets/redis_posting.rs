//! A taskflow msgpack posting, as a Redis `<ns>:listings` value holds it:
//! decoding never panics, and a decoded posting survives a re-encode.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| jobworker::fuzzing::redis_posting(data));
