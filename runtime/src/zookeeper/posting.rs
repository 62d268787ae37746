//! Taskflow's JSON posting on ZooKeeper (taskflow-wire §2.2): what a job
//! znode holds, written byte for byte as taskflow writes it and read as
//! leniently as taskflow reads it.

use rmpv::Value;

use crate::codec::Book;
use crate::job::Priority;
use crate::zookeeper::{json, paths};

/// A decoded JSON posting.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JsonPosting {
    /// The job uuid (jobworker's job id).
    pub uuid: String,
    /// The job name.
    pub name: String,
    /// The priority taskflow shows (one of its five names).
    pub priority: Priority,
    /// `details` (`{}` when absent).
    pub details: Value,
    /// `book`, when present as taskflow writes it (`{"name", "uuid"}`).
    pub book: Option<Book>,
}

/// Why a posting cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Undecodable {
    /// What is wrong, lowercase.
    pub reason: String,
    /// Taskflow cannot read it either (so it may be moved aside); when false,
    /// taskflow reads it but jobworker cannot (it is left alone).
    pub taskflow_rejects: bool,
}

impl Undecodable {
    fn rejected(reason: impl Into<String>) -> Self {
        Undecodable {
            reason: reason.into(),
            taskflow_rejects: true,
        }
    }
}

/// The posting bytes of a jobworker job: `{"uuid": …, "name": …,
/// "priority": …, "details": …}` in Python's format, `book` last when
/// given. Fails when `details` has no JSON form (binary or ext values).
pub(crate) fn encode(
    uuid: &str,
    name: &str,
    priority: Priority,
    details: &Value,
    book: Option<&Book>,
) -> Result<Vec<u8>, String> {
    let mut entries = vec![
        (Value::from("uuid"), Value::from(uuid)),
        (Value::from("name"), Value::from(name)),
        (Value::from("priority"), Value::from(priority.taskflow_name())),
        (Value::from("details"), details.clone()),
    ];
    if let Some(book) = book {
        let book = Value::Map(vec![
            (Value::from("name"), Value::from(book.name.as_str())),
            (Value::from("uuid"), Value::from(book.uuid.as_str())),
        ]);
        entries.push((Value::from("book"), book));
    }
    json::dumps(&Value::Map(entries)).map(String::into_bytes)
}

/// True when `uuid` can be a jobworker job id, and so a znode name in its
/// paths (`.jw/ids/<uuid>`): the rules a post checks (1 to 255 characters,
/// no whitespace or control characters, and [`paths::validate_job_id`]:
/// no `/` or `@`, not `.` or `..`).
pub(crate) fn usable_id(uuid: &str) -> bool {
    (1..=255).contains(&uuid.len())
        && !uuid.chars().any(|c| c.is_whitespace() || c.is_control())
        && paths::validate_job_id(uuid).is_ok()
}

/// Reads a posting as taskflow's `_process_child` does: UTF-8 JSON whose
/// root is an object with `uuid` and `name`; `priority` defaults to NORMAL
/// and must be one of taskflow's names (any case); `details` defaults to
/// `{}`. A `uuid` or `name` that is not a string is read by taskflow but
/// not by jobworker.
pub(crate) fn decode(bytes: &[u8]) -> Result<JsonPosting, Undecodable> {
    let root = json::loads(bytes).map_err(|e| Undecodable::rejected(format!("not json: {e}")))?;
    if !matches!(root, Value::Map(_)) {
        return Err(Undecodable::rejected("the posting is not a json object"));
    }
    let field = |key: &str| json::get(&root, key);
    let (Some(uuid), Some(name)) = (field("uuid"), field("name")) else {
        return Err(Undecodable::rejected("the posting lacks uuid or name"));
    };
    let priority = match field("priority") {
        None => Priority::NORMAL,
        Some(p) => p
            .as_str()
            // Python's `str.upper()`, as taskflow's `JobPriority.convert`
            // calls it: "hıgh" (dotless i) is HIGH.
            .and_then(|name| Priority::from_taskflow_name(&name.to_uppercase()))
            .ok_or_else(|| Undecodable::rejected(format!("priority {p} is not a taskflow priority")))?,
    };
    let text = |v: &Value, what: &str| {
        v.as_str().map(str::to_owned).ok_or_else(|| Undecodable {
            reason: format!("the posting's {what} is not a string"),
            taskflow_rejects: false,
        })
    };
    let uuid = text(uuid, "uuid")?;
    if !usable_id(&uuid) {
        // Jobworker's znode paths are built from the uuid.
        return Err(Undecodable {
            reason: format!("the posting's uuid {uuid:?} cannot be a job id"),
            taskflow_rejects: false,
        });
    }
    Ok(JsonPosting {
        uuid,
        name: text(name, "name")?,
        priority,
        details: field("details").cloned().unwrap_or(Value::Map(Vec::new())),
        book: field("book").and_then(book_of),
    })
}

/// taskflow's `book` (`{"name": …, "uuid": …}`); anything else is no book
/// jobworker can show (taskflow stores only those two fields).
fn book_of(v: &Value) -> Option<Book> {
    let text = |k: &str| json::get(v, k).and_then(Value::as_str).map(str::to_owned);
    Some(Book {
        name: text("name")?,
        uuid: text("uuid")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/taskflow/zookeeper_golden.json"
    );

    fn golden() -> serde_json::Value {
        let text = std::fs::read_to_string(GOLDEN)
            .unwrap_or_else(|e| panic!("taskflow fixture {GOLDEN} is missing or unreadable: {e}"));
        serde_json::from_str(&text).expect("the fixture is json")
    }

    fn unhex(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect()
    }

    #[test]
    fn golden_postings_decode_and_encode_byte_for_byte() {
        let g = golden();
        for job in ["a", "b", "c", "d"] {
            let sample = &g["samples"][format!("job_job_{job}")];
            let bytes = unhex(sample["data_hex"].as_str().unwrap());
            let p = decode(&bytes).unwrap_or_else(|e| panic!("job-{job}: {e:?}"));
            assert_eq!(p.name, format!("job-{job}"));
            assert_eq!(p.uuid, g["job_uuids"][format!("job-{job}")].as_str().unwrap());
            let again = encode(&p.uuid, &p.name, p.priority, &p.details, p.book.as_ref()).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&again),
                String::from_utf8_lossy(&bytes),
                "job-{job} re-encoded"
            );
        }
        let a = decode(&unhex(g["samples"]["job_job_a"]["data_hex"].as_str().unwrap())).unwrap();
        assert_eq!(a.priority, Priority::HIGH);
        assert_eq!(json::get(&a.details, "uni").and_then(Value::as_str), Some("é漢"));
        let d = decode(&unhex(g["samples"]["job_job_d"]["data_hex"].as_str().unwrap())).unwrap();
        assert_eq!(d.priority, Priority::VERY_HIGH);
    }

    #[test]
    fn jobworker_postings_look_like_taskflow_ones() {
        let details = Value::Map(vec![(
            Value::from("args"),
            Value::Array(vec![Value::from("a.png"), Value::from(640)]),
        )]);
        let bytes = encode("u-1", "resize", Priority(7), &details, None).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#"{"uuid": "u-1", "name": "resize", "priority": "VERY_HIGH", "details": {"args": ["a.png", 640]}}"#
        );
        let bin = Value::Map(vec![(Value::from("args"), Value::Binary(vec![0]))]);
        assert!(encode("u-2", "x", Priority::NORMAL, &bin, None).is_err());
    }

    #[test]
    fn what_taskflow_rejects_is_told_apart_from_what_only_jobworker_cannot_read() {
        let rejected: &[&[u8]] = &[
            b"not json",
            b"[1, 2]",
            b"{\"uuid\": \"u\"}",
            b"{\"name\": \"n\"}",
            b"{\"uuid\": \"u\", \"name\": \"n\", \"priority\": \"URGENT\"}",
            b"{\"uuid\": \"u\", \"name\": \"n\", \"priority\": 3}",
            b"\xff\xfe",
        ];
        for bytes in rejected {
            let e = decode(bytes).unwrap_err();
            assert!(e.taskflow_rejects, "{e:?}");
        }
        for bytes in [
            &b"{\"uuid\": 5, \"name\": \"n\"}"[..],
            b"{\"uuid\": \"\", \"name\": \"n\"}",
            b"{\"uuid\": \"a/b\", \"name\": \"n\"}",
            b"{\"uuid\": \"..\", \"name\": \"n\"}",
            b"{\"uuid\": \"a b\", \"name\": \"n\"}",
        ] {
            let e = decode(bytes).unwrap_err();
            assert!(!e.taskflow_rejects, "{e:?}");
        }
        let dotless = decode("{\"uuid\": \"u\", \"name\": \"n\", \"priority\": \"h\u{131}gh\"}".as_bytes());
        assert_eq!(
            dotless.map(|p| p.priority),
            Ok(Priority::HIGH),
            "python upper-cases the dotless i to I"
        );
        let p = decode(b"{\"name\": \"n\", \"uuid\": \"u\", \"priority\": \"very_low\"}").unwrap();
        assert_eq!((p.priority, p.details), (Priority::VERY_LOW, Value::Map(vec![])));
    }
}
