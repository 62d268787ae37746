//! Entry points for the fuzz targets (`fuzz/`) and property tests: every
//! decoder that a peer's bytes reach, behind one small surface. Not a
//! public API: the decoders themselves stay private to their modules.

/// Decodes a taskflow msgpack posting (Redis `listings` value) and, when it
/// decodes, encodes it again and decodes that: the second decode must give
/// the same posting (panics otherwise, so a fuzzer reports it).
///
/// "The same" is checked on the bytes: the re-encoded posting must encode
/// to exactly the bytes it was decoded from. Comparing the values would
/// fail on a NaN float in `details` (NaN never equals itself) although
/// nothing was lost. The only change a re-encode may make is the one
/// [`crate::codec::encode_posting`] documents: a `sequence` that is not an
/// `i64` is written as `0`.
pub fn redis_posting(bytes: &[u8]) {
    use crate::codec::{decode_posting, encode_posting};
    let Ok(posting) = decode_posting(bytes) else {
        return;
    };
    let encoded = encode_posting(&posting);
    let again =
        decode_posting(&encoded).unwrap_or_else(|e| panic!("a re-encoded posting does not decode: {e}"));
    assert_eq!(
        encode_posting(&again),
        encoded,
        "a posting changed through a re-encode"
    );
    assert_eq!(
        (&again.uuid, &again.name, again.priority, &again.book),
        (&posting.uuid, &posting.name, posting.priority, &posting.book),
        "a posting's fields changed through a re-encode"
    );
    assert_eq!(again.sequence, Some(posting.sequence.unwrap_or(0)));
    let _ = crate::codec::value_to_json(&posting.details);
}

/// Decodes an oslo datetime ext (code 1, whole ext bytes) and, when it
/// decodes, checks that its encoding decodes to the same datetime (every
/// field, the zone name included) and encodes to the same bytes.
pub fn oslo_datetime(bytes: &[u8]) {
    use crate::codec::OsloDateTime;
    let Ok(dt) = OsloDateTime::decode_ext(bytes) else {
        return;
    };
    let _ = dt.iso();
    let encoded = dt.encode_ext();
    let again = OsloDateTime::decode_ext(&encoded)
        .unwrap_or_else(|e| panic!("a re-encoded datetime does not decode: {e}"));
    assert_eq!(again, dt, "a datetime changed through a re-encode");
    assert_eq!(again.encode_ext(), encoded);
    assert_eq!(
        OsloDateTime::from_unix_micros(dt.to_unix_micros()).to_unix_micros(),
        dt.to_unix_micros()
    );
}

#[cfg(feature = "zookeeper")]
/// Decodes a taskflow JSON posting (ZooKeeper job znode) and, when it
/// decodes, encodes it again and decodes that to the same posting.
pub fn zookeeper_posting(bytes: &[u8]) {
    crate::zookeeper::fuzz_posting(bytes);
}

#[cfg(feature = "zookeeper")]
/// Parses a ZooKeeper lock body (taskflow's `{"owner": …}` plus
/// jobworker's lease), and a job record; neither may panic, and a parsed
/// lock body must survive its own encoding.
pub fn zookeeper_lock_and_record(bytes: &[u8]) {
    crate::zookeeper::fuzz_lock_and_record(bytes);
}
