//! Entry points for the fuzz targets (`fuzz/`) and property tests: every
//! decoder that a peer's bytes reach, behind one small surface. Not a
//! public API: the decoders themselves stay private to their modules.

/// Decodes a taskflow msgpack posting (Redis `listings` value) and, when it
/// decodes, encodes it again and decodes that: the second decode must give
/// the same posting (panics otherwise, so a fuzzer reports it).
pub fn redis_posting(bytes: &[u8]) {
    let Ok(posting) = crate::codec::decode_posting(bytes) else {
        return;
    };
    let again = crate::codec::decode_posting(&crate::codec::encode_posting(&posting))
        .unwrap_or_else(|e| panic!("a re-encoded posting does not decode: {e}"));
    assert_eq!(
        crate::codec::value_to_json(&again.details),
        crate::codec::value_to_json(&posting.details),
        "details changed through a re-encode"
    );
    assert_eq!((&again.uuid, &again.name), (&posting.uuid, &posting.name));
}

/// Decodes an oslo datetime ext (code 1, whole ext bytes) and, when it
/// decodes, checks that its encoding decodes to the same instant.
pub fn oslo_datetime(bytes: &[u8]) {
    let Ok(dt) = crate::codec::OsloDateTime::decode_ext(bytes) else {
        return;
    };
    let _ = dt.iso();
    let again = crate::codec::OsloDateTime::decode_ext(&dt.encode_ext())
        .unwrap_or_else(|e| panic!("a re-encoded datetime does not decode: {e}"));
    assert_eq!(again.to_unix_micros(), dt.to_unix_micros());
}

/// Decodes a taskflow JSON posting (ZooKeeper job znode) and, when it
/// decodes, encodes it again and decodes that to the same posting.
pub fn zookeeper_posting(bytes: &[u8]) {
    crate::zookeeper::fuzz_posting(bytes);
}

/// Parses a ZooKeeper lock body (taskflow's `{"owner": …}` plus
/// jobworker's lease), and a job record; neither may panic, and a parsed
/// lock body must survive its own encoding.
pub fn zookeeper_lock_and_record(bytes: &[u8]) {
    crate::zookeeper::fuzz_lock_and_record(bytes);
}
