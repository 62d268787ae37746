//! Taskflow's Redis posting: the msgpack map stored in `<ns>:listings`.
//!
//! Taskflow writes the keys `uuid`, `name`, `priority`, `created_on`,
//! `details`, then `book` when the job has a logbook, then `sequence`, all
//! as msgpack str, every int in its smallest form. When listing, it accepts
//! any map with the str keys `uuid`, `name`, `created_on` and `sequence`, a
//! known `priority` (or none), and it deletes anything it cannot load.

use rmpv::Value;
use serde_json::json;

use super::datetime::OsloDateTime;
use super::{map_get, oslo_loads, truthy, write_int, write_map_len, write_str, write_value, MAX_DEPTH};
use crate::job::Priority;

/// The logbook reference a posting may carry (taskflow's `book`: only the
/// logbook's name and uuid are stored, never the logbook itself). A Python
/// conductor needs it to run a job; jobworker only carries it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Book {
    /// The logbook's name.
    pub name: String,
    /// The logbook's uuid.
    pub uuid: String,
}

impl Book {
    /// A logbook reference.
    pub fn new(name: impl Into<String>, uuid: impl Into<String>) -> Book {
        Book {
            name: name.into(),
            uuid: uuid.into(),
        }
    }
}

/// A posting's `created_on`.
#[derive(Debug, Clone, PartialEq)]
pub enum CreatedOn {
    /// An oslo datetime (ext 1), which is what taskflow writes.
    DateTime(OsloDateTime),
    /// Any other value: taskflow accepts it when listing (a string, a
    /// msgpack timestamp ext -1, ...) but fails later when it compares it
    /// with `last_modified`.
    Other(Value),
}

/// One job as stored in the Redis `listings` hash.
#[derive(Debug, Clone, PartialEq)]
pub struct Posting {
    /// The `uuid` inside the posting (the hash field, not this, names the
    /// job's other keys).
    pub uuid: String,
    /// The job name.
    pub name: String,
    /// The priority, written as its taskflow name.
    pub priority: Priority,
    /// When the job was posted.
    pub created_on: CreatedOn,
    /// The job details; taskflow always writes a map (`{}` when empty).
    pub details: Value,
    /// The logbook reference, if any.
    pub book: Option<Book>,
    /// The posting sequence number: `None` when the stored value is not an
    /// integer that fits an `i64` (taskflow accepts any value here).
    pub sequence: Option<i64>,
}

/// A posting's bytes without `created_on`'s value and `sequence`'s value,
/// so that a Redis Lua script can add the time and the sequence number on
/// the server: the posting is `head ++ created_on ++ tail ++ sequence`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostingParts {
    /// The map header (`86`, or `87` with a book), the `uuid`, `name` and
    /// `priority` pairs, and the str key `created_on`.
    pub head: Vec<u8>,
    /// The `details` pair, the `book` pair if any, and the str key
    /// `sequence`.
    pub tail: Vec<u8>,
}

/// Encodes a posting byte for byte as taskflow does. `created_on` is
/// written as its ext 1 datetime, or as the value itself for
/// [`CreatedOn::Other`]. `details` is written as it is (taskflow always
/// writes a map). A `sequence` of `None` is written as `0`: a real posting
/// needs `Some`.
pub fn encode_posting(p: &Posting) -> Vec<u8> {
    let PostingParts { head: mut out, tail } =
        posting_parts(&p.uuid, &p.name, p.priority, &p.details, p.book.as_ref());
    match &p.created_on {
        CreatedOn::DateTime(dt) => out.extend(dt.encode_ext()),
        CreatedOn::Other(value) => write_value(&mut out, value),
    }
    out.extend(tail);
    write_int(&mut out, p.sequence.unwrap_or(0));
    out
}

/// Splits a posting's bytes around the two values only the server knows;
/// see [`PostingParts`]. For any posting `p` with a datetime `created_on`
/// `dt` and a sequence `n`, `encode_posting(p)` equals
/// `head ++ dt.encode_ext() ++ tail ++ encode_int(n)`.
pub fn posting_parts(
    uuid: &str,
    name: &str,
    priority: Priority,
    details: &Value,
    book: Option<&Book>,
) -> PostingParts {
    let mut head = Vec::with_capacity(96);
    write_map_len(&mut head, if book.is_some() { 7 } else { 6 });
    for (key, value) in [
        ("uuid", uuid),
        ("name", name),
        ("priority", priority.taskflow_name()),
    ] {
        write_str(&mut head, key);
        write_str(&mut head, value);
    }
    write_str(&mut head, "created_on");
    let mut tail = Vec::new();
    write_str(&mut tail, "details");
    write_value(&mut tail, details);
    if let Some(book) = book {
        write_str(&mut tail, "book");
        write_map_len(&mut tail, 2);
        for (key, value) in [("name", &book.name), ("uuid", &book.uuid)] {
            write_str(&mut tail, key);
            write_str(&mut tail, value);
        }
    }
    write_str(&mut tail, "sequence");
    PostingParts { head, tail }
}

/// An int in its smallest msgpack form, as msgpack-python packs a Python
/// int: positive fixint or `cc`/`cd`/`ce`/`cf` for non-negative values,
/// negative fixint or `d0`..`d3` for negative ones.
pub fn encode_int(n: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(9);
    write_int(&mut out, n);
    out
}

/// Decodes a posting, accepting exactly what taskflow 6.5's Redis listing
/// accepts and refusing (with a lowercase reason) what it deletes: bytes
/// oslo `msgpackutils.loads` cannot load (bad msgpack, trailing bytes, a
/// datetime ext anywhere missing a field, ...), a root that is not a map, a
/// missing str key `uuid`, `name`, `created_on` or `sequence` (bin keys do
/// not count), and a `priority` that is not one of the five names in any
/// case (a missing one means NORMAL).
///
/// Stricter than taskflow: `uuid` and `name` must be str (taskflow would
/// list other types but nothing it does with them works). A malformed
/// `book` reads as `None`; a missing or empty `details` as an empty map.
pub fn decode_posting(bytes: &[u8]) -> Result<Posting, String> {
    let Value::Map(entries) = oslo_loads(bytes, MAX_DEPTH)? else {
        return Err("root is not a map".into());
    };
    let required = |key: &str| map_get(&entries, key).ok_or_else(|| format!("missing key {key:?}"));
    let text = |key: &str| -> Result<String, String> {
        Ok(required(key)?
            .as_str()
            .ok_or_else(|| format!("{key:?} is not a str"))?
            .to_owned())
    };
    // The same order of checks as taskflow's `_fetch_jobs`.
    let priority = match map_get(&entries, "priority") {
        None => Priority::NORMAL,
        Some(value) => value
            .as_str()
            .and_then(|name| Priority::from_taskflow_name(&name.to_uppercase()))
            .ok_or_else(|| format!("unknown priority {}", value_to_json(value)))?,
    };
    let created_on = match required("created_on")? {
        Value::Ext(1, payload) => CreatedOn::DateTime(OsloDateTime::decode_ext_payload(payload)?),
        other => CreatedOn::Other(other.clone()),
    };
    let uuid = text("uuid")?;
    let name = text("name")?;
    let sequence = required("sequence")?.as_i64();
    let details = match map_get(&entries, "details") {
        Some(details) if truthy(details) => details.clone(),
        _ => Value::Map(Vec::new()),
    };
    let book = match map_get(&entries, "book") {
        Some(Value::Map(book)) => match (map_get(book, "name"), map_get(book, "uuid")) {
            (Some(Value::String(name)), Some(Value::String(uuid))) => {
                name.as_str().zip(uuid.as_str()).map(|(name, uuid)| Book {
                    name: name.to_owned(),
                    uuid: uuid.to_owned(),
                })
            }
            _ => None,
        },
        _ => None,
    };
    Ok(Posting {
        uuid,
        name,
        priority,
        created_on,
        details,
        book,
        sequence,
    })
}

/// A lossy JSON form of a msgpack value, for display and logs:
/// bin becomes `{"bin": "<hex>"}`, an ext 1 datetime its [`OsloDateTime::iso`]
/// text, any other ext `{"ext": <code>, "hex": "<hex>"}`, a non-finite float
/// its Rust text (`"NaN"`, `"inf"`), and a map key that is not a str its
/// bytes as lossy UTF-8 (bin) or its compact JSON text.
pub fn value_to_json(v: &Value) -> serde_json::Value {
    use serde_json::Value as Json;
    let float =
        |f: f64| serde_json::Number::from_f64(f).map_or_else(|| Json::String(f.to_string()), Json::Number);
    match v {
        Value::Nil => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Integer(i) => match (i.as_i64(), i.as_u64()) {
            (Some(n), _) => n.into(),
            (None, Some(n)) => n.into(),
            (None, None) => Json::Null,
        },
        Value::F32(f) => float(f64::from(*f)),
        Value::F64(f) => float(*f),
        Value::String(s) => Json::String(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        Value::Binary(b) => json!({ "bin": hex(b) }),
        Value::Array(items) => Json::Array(items.iter().map(value_to_json).collect()),
        Value::Map(entries) => Json::Object(
            entries
                .iter()
                .map(|(key, value)| {
                    let key = match key {
                        Value::String(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
                        Value::Binary(b) => String::from_utf8_lossy(b).into_owned(),
                        other => value_to_json(other).to_string(),
                    };
                    (key, value_to_json(value))
                })
                .collect(),
        ),
        Value::Ext(code, data) => match (code, OsloDateTime::decode_ext_payload(data)) {
            (1, Ok(dt)) => Json::String(dt.iso()),
            _ => json!({ "ext": code, "hex": hex(data) }),
        },
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::fixtures::{golden, load, unhex};

    fn text(v: &serde_json::Value) -> String {
        v.as_str()
            .unwrap_or_else(|| panic!("expected a string, got {v}"))
            .to_owned()
    }

    fn priority(name: &serde_json::Value) -> Priority {
        Priority::from_taskflow_name(&text(name)).unwrap_or_else(|| panic!("bad priority {name}"))
    }

    fn golden_posting(job: char) -> (Vec<u8>, serde_json::Value) {
        let sample = golden()["samples"][format!("posting_job_{job}")].clone();
        (unhex(&text(&sample["value_hex"])), sample)
    }

    /// The posting's `created_on` datetime from the fixture's decoded payload.
    fn fixture_created_on(decoded: &serde_json::Value) -> OsloDateTime {
        let created = &decoded["created_on"];
        assert_eq!(created["__ext__"], 1);
        let field = |name: &str| created["payload"][name].as_u64().expect("datetime field") as u32;
        let dt = OsloDateTime {
            year: field("year") as i32,
            month: field("month"),
            day: field("day"),
            hour: field("hour"),
            minute: field("minute"),
            second: field("second"),
            microsecond: field("microsecond"),
            tz: None,
        };
        let payload = unhex(&text(&created["payload_hex"]));
        assert_eq!(OsloDateTime::decode_ext_payload(&payload).as_ref(), Ok(&dt));
        dt
    }

    /// Builds a posting from the fixture's decoded fields, with `details`
    /// given by hand (JSON objects do not keep the key order).
    fn by_hand(decoded: &serde_json::Value, details: Value) -> Posting {
        assert_eq!(value_to_json(&details), decoded["details"], "hand-made details");
        Posting {
            uuid: text(&decoded["uuid"]),
            name: text(&decoded["name"]),
            priority: priority(&decoded["priority"]),
            created_on: CreatedOn::DateTime(fixture_created_on(decoded)),
            details,
            book: decoded.get("book").map(|b| Book {
                name: text(&b["name"]),
                uuid: text(&b["uuid"]),
            }),
            sequence: decoded["sequence"].as_i64(),
        }
    }

    fn map(entries: Vec<(&str, Value)>) -> Value {
        Value::Map(entries.into_iter().map(|(k, v)| (Value::from(k), v)).collect())
    }

    #[test]
    fn golden_postings_decode_and_reencode_byte_for_byte() {
        for job in ['a', 'b', 'c', 'd'] {
            let (bytes, sample) = golden_posting(job);
            let decoded = &sample["decoded"];
            let posting = decode_posting(&bytes).unwrap_or_else(|e| panic!("job-{job}: {e}"));
            assert_eq!(encode_posting(&posting), bytes, "job-{job}: re-encoding");
            assert_eq!(posting.uuid, text(&sample["hash_field"]));
            assert_eq!(posting.name, text(&decoded["name"]));
            assert_eq!(posting.priority, priority(&decoded["priority"]));
            assert_eq!(posting.sequence, decoded["sequence"].as_i64());
            assert_eq!(
                posting.created_on,
                CreatedOn::DateTime(fixture_created_on(decoded))
            );
            assert_eq!(value_to_json(&posting.details), decoded["details"]);
            let oslo = &sample["oslo_loads"];
            if let CreatedOn::DateTime(dt) = &posting.created_on {
                assert_eq!(dt.iso(), text(&oslo["created_on"]));
            }
            assert_eq!(posting.book.is_some(), decoded.get("book").is_some());

            let dt = match &posting.created_on {
                CreatedOn::DateTime(dt) => dt.clone(),
                CreatedOn::Other(v) => panic!("job-{job}: created_on {v:?}"),
            };
            let parts = posting_parts(
                &posting.uuid,
                &posting.name,
                posting.priority,
                &posting.details,
                posting.book.as_ref(),
            );
            let sequence = posting.sequence.expect("sequence");
            let composed = [parts.head, dt.encode_ext(), parts.tail, encode_int(sequence)].concat();
            assert_eq!(composed, bytes, "job-{job}: parts");
        }
    }

    #[test]
    fn golden_postings_built_by_hand() {
        let (bytes_a, sample_a) = golden_posting('a');
        let details_a = map(vec![
            (
                "store",
                map(vec![("x", Value::from(1)), ("y", Value::from("two"))]),
            ),
            ("flow_uuid", Value::from("f-1")),
            (
                "nested",
                Value::Array(vec![Value::from(1), Value::from(2), Value::from("three")]),
            ),
            ("flag", Value::Boolean(true)),
            ("none", Value::Nil),
            ("f", Value::F64(1.5)),
            ("uni", Value::from("é漢")),
        ]);
        let a = by_hand(&sample_a["decoded"], details_a);
        assert_eq!(a.priority, Priority::HIGH);
        assert_eq!(encode_posting(&a), bytes_a);
        assert_eq!(decode_posting(&bytes_a), Ok(a));

        let (bytes_b, sample_b) = golden_posting('b');
        let b = by_hand(&sample_b["decoded"], map(vec![("k", Value::from("v"))]));
        assert_eq!(b.book.as_ref().map(|b| b.name.as_str()), Some("book-b"));
        assert_eq!(encode_posting(&b), bytes_b);
        assert_eq!(decode_posting(&bytes_b), Ok(b));

        for job in ['c', 'd'] {
            let (bytes, sample) = golden_posting(job);
            assert_eq!(
                encode_posting(&by_hand(&sample["decoded"], map(vec![]))),
                bytes,
                "job-{job}"
            );
        }
    }

    #[test]
    fn owner_and_trash_values() {
        let samples = &golden()["samples"];
        let owner = unhex(&text(&samples["owner_value"]["value_hex"]));
        assert_eq!(String::from_utf8(owner).as_deref(), Ok("worker-1"));
        let trash = unhex(&text(&samples["trash_entry"]["value_hex"]));
        assert_eq!(trash, golden_posting('c').0);
        assert_eq!(decode_posting(&trash).map(|p| p.name), Ok("job-c".to_owned()));
    }

    #[test]
    fn reader_verdicts_match_taskflow() {
        let verdicts = load("redis_reader_verdicts.json");
        let cases = verdicts["cases"].as_object().expect("cases");
        assert_eq!(cases.len(), 19);
        for (case, spec) in cases {
            let bytes = unhex(&text(&spec["value_hex"]));
            let result = decode_posting(&bytes);
            match text(&spec["verdict"]).as_str() {
                "accepted" => {
                    let posting = result.unwrap_or_else(|e| panic!("{case}: refused: {e}"));
                    let parsed = &spec["parsed"];
                    assert_eq!(posting.uuid, text(&parsed["uuid"]), "{case}");
                    assert_eq!(posting.name, text(&parsed["name"]), "{case}");
                    assert_eq!(posting.priority, priority(&parsed["priority"]), "{case}");
                    assert_eq!(posting.sequence, parsed["sequence"].as_i64(), "{case}");
                    assert_eq!(value_to_json(&posting.details), parsed["details"], "{case}");
                    let created = text(&parsed["created_on"]);
                    match &posting.created_on {
                        CreatedOn::DateTime(dt) => {
                            assert!(
                                created.starts_with("datetime.datetime(2024, 1, 2, 3, 4, 5, 6"),
                                "{case}"
                            );
                            assert_eq!(dt.tz.is_some(), created.contains("tzinfo"), "{case}");
                        }
                        CreatedOn::Other(Value::String(s)) => {
                            assert_eq!(format!("'{}'", s.as_str().unwrap_or_default()), created, "{case}")
                        }
                        CreatedOn::Other(Value::Ext(-1, _)) => {
                            assert!(created.starts_with("Timestamp("), "{case}")
                        }
                        CreatedOn::Other(other) => {
                            panic!("{case}: unexpected created_on {other:?}")
                        }
                    }
                }
                "rejected" => assert!(result.is_err(), "{case}: accepted {result:?}"),
                other => panic!("{case}: unknown verdict {other}"),
            }
        }
    }

    #[test]
    fn refusal_reasons_are_clear() {
        let verdict = |case: &str| {
            let verdicts = load("redis_reader_verdicts.json");
            decode_posting(&unhex(&text(&verdicts["cases"][case]["value_hex"])))
        };
        assert_eq!(
            verdict("missing_sequence"),
            Err("missing key \"sequence\"".into())
        );
        assert_eq!(
            verdict("strings_as_bin"),
            Err("missing key \"created_on\"".into())
        );
        assert_eq!(verdict("root_not_map"), Err("root is not a map".into()));
        assert_eq!(
            verdict("unknown_priority"),
            Err("unknown priority \"URGENT\"".into())
        );
        assert!(verdict("garbage").is_err_and(|e| e.starts_with("not msgpack: ")));
        let missing = verdict("datetime_missing_microsecond");
        assert_eq!(
            missing,
            Err("bad datetime (ext 1): missing field \"microsecond\"".into())
        );
    }

    #[test]
    fn scenario_listings_all_decode() {
        let scenario = load("redis_scenario.json");
        let mut seen = 0;
        for step in scenario["steps"].as_array().expect("steps") {
            for key in step["keys"].as_array().expect("keys") {
                let name = text(&key["key"]);
                if !(name.ends_with(":listings") || name.ends_with(":trash")) {
                    continue;
                }
                for (field, value) in key["fields"].as_object().expect("fields") {
                    let bytes = unhex(&text(value));
                    let posting = decode_posting(&bytes).unwrap_or_else(|e| panic!("{name}[{field}]: {e}"));
                    assert_eq!(&posting.uuid, field);
                    assert_eq!(encode_posting(&posting), bytes, "{name}[{field}]");
                    seen += 1;
                }
            }
        }
        assert!(seen >= 4, "only {seen} listing values in the scenario");
    }

    #[test]
    fn encode_int_boundaries() {
        let cases: &[(i64, &[u8])] = &[
            (0, &[0x00]),
            (127, &[0x7f]),
            (128, &[0xcc, 0x80]),
            (255, &[0xcc, 0xff]),
            (256, &[0xcd, 0x01, 0x00]),
            (65_535, &[0xcd, 0xff, 0xff]),
            (65_536, &[0xce, 0x00, 0x01, 0x00, 0x00]),
            (4_294_967_295, &[0xce, 0xff, 0xff, 0xff, 0xff]),
            (1 << 32, &[0xcf, 0, 0, 0, 1, 0, 0, 0, 0]),
            (i64::MAX, &[0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            (-1, &[0xff]),
            (-32, &[0xe0]),
            (-33, &[0xd0, 0xdf]),
            (-128, &[0xd0, 0x80]),
            (-129, &[0xd1, 0xff, 0x7f]),
            (-32_768, &[0xd1, 0x80, 0x00]),
            (-32_769, &[0xd2, 0xff, 0xff, 0x7f, 0xff]),
            (-2_147_483_648, &[0xd2, 0x80, 0, 0, 0]),
            (
                -2_147_483_649,
                &[0xd3, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff],
            ),
            (i64::MIN, &[0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0]),
        ];
        for (n, bytes) in cases {
            assert_eq!(encode_int(*n), bytes.to_vec(), "{n}");
            assert_eq!(
                oslo_loads(bytes, MAX_DEPTH).map(|v| v.as_i64()),
                Ok(Some(*n)),
                "{n}"
            );
        }
    }

    fn sample(extra: Vec<(&str, Value)>) -> Vec<u8> {
        let mut entries = vec![
            ("uuid", Value::from("u")),
            ("name", Value::from("n")),
            (
                "created_on",
                Value::Ext(1, OsloDateTime::from_unix_micros(0).encode_ext()[3..].to_vec()),
            ),
            ("sequence", Value::from(3)),
        ];
        entries.extend(extra);
        let mut out = Vec::new();
        write_value(&mut out, &map(entries));
        out
    }

    #[test]
    fn python_rules_beyond_the_fixtures() {
        let bad_dt = Value::Ext(1, vec![0x80]);
        let refused = [
            (
                "datetime nested in details",
                sample(vec![("details", map(vec![("when", bad_dt.clone())]))]),
            ),
            (
                "datetime in a list",
                sample(vec![("details", Value::Array(vec![bad_dt]))]),
            ),
            (
                "int map key in details",
                sample(vec![("details", Value::Map(vec![(Value::from(1), Value::Nil)]))]),
            ),
            ("priority not a str", sample(vec![("priority", Value::from(1))])),
            (
                "priority as bin",
                sample(vec![("priority", Value::Binary(b"HIGH".to_vec()))]),
            ),
            (
                "uuid as bin",
                sample(vec![("uuid", Value::Binary(b"u".to_vec()))]),
            ),
            (
                "negative ext in details",
                sample(vec![("details", Value::Ext(-7, vec![1]))]),
            ),
        ];
        for (what, bytes) in refused {
            assert!(decode_posting(&bytes).is_err(), "{what} should be refused");
        }
        let mut c1_in_details = sample(vec![("details", Value::Array(vec![Value::Nil]))]);
        let nil_at = c1_in_details.len() - 1;
        assert_eq!(c1_in_details[nil_at], 0xc0);
        c1_in_details[nil_at] = 0xc1;
        assert!(decode_posting(&c1_in_details).is_err(), "reserved byte c1");

        // Python's str.upper() maps the dotless i to I.
        let dotless = decode_posting(&sample(vec![("priority", Value::from("hıgh"))]));
        assert_eq!(dotless.map(|p| p.priority), Ok(Priority::HIGH));
        let odd = decode_posting(&sample(vec![
            ("details", Value::from(0)),
            ("book", map(vec![("name", Value::from("only a name"))])),
            ("sequence", Value::from("seven")),
            ("uuid", Value::from("last one wins")),
        ]))
        .expect("accepted");
        assert_eq!(odd.details, Value::Map(vec![]));
        assert_eq!(odd.book, None);
        assert_eq!(odd.sequence, None);
        assert_eq!(odd.uuid, "last one wins");
        let big = decode_posting(&sample(vec![("sequence", Value::from(u64::MAX))])).expect("accepted");
        assert_eq!(big.sequence, None);
    }

    #[test]
    fn encoding_details_like_python() {
        let posting = Posting {
            uuid: "u".into(),
            name: "n".into(),
            priority: Priority(7),
            created_on: CreatedOn::Other(Value::from("2024-01-02T03:04:05")),
            details: map(vec![("f", Value::F32(0.5)), ("big", Value::from(u64::MAX))]),
            book: None,
            sequence: None,
        };
        let bytes = encode_posting(&posting);
        assert!(bytes.windows(2).any(|w| w == [0xa1, b'f']));
        assert!(
            bytes
                .windows(9)
                .any(|w| w == [0xcb, 0x3f, 0xe0, 0, 0, 0, 0, 0, 0]),
            "float32 is written as float64"
        );
        assert_eq!(&bytes[bytes.len() - 10..], b"\xa8sequence\x00");
        let back = decode_posting(&bytes).expect("decodes");
        assert_eq!(back.priority, Priority::VERY_HIGH);
        assert_eq!(back.created_on, posting.created_on);
        assert_eq!(
            back.details,
            map(vec![("f", Value::F64(0.5)), ("big", Value::from(u64::MAX))])
        );
    }

    #[test]
    fn json_display_form() {
        let dt = OsloDateTime::from_unix_micros(1_714_979_290_123_456);
        let value = Value::Map(vec![
            (Value::from("bin"), Value::Binary(vec![0x00, 0xff])),
            (Value::from("when"), Value::Ext(1, dt.encode_ext()[3..].to_vec())),
            (Value::from("uuid"), Value::Ext(0, b"ab".to_vec())),
            (Value::from("nan"), Value::F64(f64::NAN)),
            (Value::Binary(b"old".to_vec()), Value::from(-3)),
            (Value::from("big"), Value::from(u64::MAX)),
        ]);
        assert_eq!(
            value_to_json(&value),
            json!({
                "bin": {"bin": "00ff"},
                "when": "2024-05-06T07:08:10.123456",
                "uuid": {"ext": 0, "hex": "6162"},
                "nan": "NaN",
                "old": -3,
                "big": u64::MAX,
            })
        );
    }
}
