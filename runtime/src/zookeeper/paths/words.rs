//! Any word (a tag, a unique key, a queue and job id pair) as a znode
//! name, and back.

/// A tag as a znode name: bytes other than ASCII letters, digits and
/// `_-:` percent-encoded (`/`, `.`, `%` and whatever ZooKeeper refuses
/// included), so any tag names one znode and comes back from it.
pub(crate) fn encode_word(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    for b in word.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The tag a znode name encodes (see [`encode_word`]); `None` for a name
/// it did not make.
pub(crate) fn decode_word(name: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(name.len());
    let mut rest = name.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// The name of a dependent entry: queue and job id, each percent-encoded
/// (see [`encode_word`], which always encodes `.`), joined by a `.`.
pub(crate) fn dependent_name(queue: &str, id: &str) -> String {
    format!("{}.{}", encode_word(queue), encode_word(id))
}

/// The queue and job id a dependent entry names.
pub(crate) fn parse_dependent(name: &str) -> Option<(String, String)> {
    let (queue, id) = name.split_once('.')?;
    Some((decode_word(queue)?, decode_word(id)?))
}
