//! Reading script replies: a status string followed by values.

use redis::Value;

use crate::error::{Error, Result};
use crate::redis::keys::QueueKeys;

/// A script reply: `[status, …]` (see `lua/README.md`).
#[derive(Debug)]
pub(crate) struct Reply(pub Vec<Value>);

impl Reply {
    /// Reads the raw value as a reply array.
    pub(super) fn from_value(value: Value) -> Result<Reply> {
        match value {
            Value::Array(items) if !items.is_empty() => Ok(Reply(items)),
            other => Err(Error::codec(format!("unexpected script reply {other:?}"))),
        }
    }

    /// The status string.
    pub(super) fn status(&self) -> String {
        self.string(0).unwrap_or_default()
    }

    /// Item `i` as bytes.
    pub(super) fn bytes(&self, i: usize) -> Result<Vec<u8>> {
        match self.0.get(i) {
            Some(Value::BulkString(b)) => Ok(b.clone()),
            Some(Value::SimpleString(s)) => Ok(s.clone().into_bytes()),
            Some(Value::Int(n)) => Ok(n.to_string().into_bytes()),
            other => Err(Error::codec(format!(
                "script reply item {i} is {other:?}, not a string"
            ))),
        }
    }

    /// Item `i` as UTF-8 text.
    pub(super) fn string(&self, i: usize) -> Result<String> {
        String::from_utf8(self.bytes(i)?)
            .map_err(|_| Error::codec(format!("script reply item {i} is not utf-8")))
    }

    /// Item `i` as an integer.
    pub(super) fn int(&self, i: usize) -> Result<i64> {
        match self.0.get(i) {
            Some(Value::Int(n)) => Ok(*n),
            Some(Value::BulkString(b)) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| Error::codec(format!("script reply item {i} is not an integer"))),
            other => Err(Error::codec(format!(
                "script reply item {i} is {other:?}, not an integer"
            ))),
        }
    }

    /// Turns the refusal statuses into typed errors naming `id` in the queue.
    pub(super) fn accept(self, keys: &QueueKeys, id: &str, who: &str) -> Result<Reply> {
        match self.status().as_str() {
            "ok" => Ok(self),
            "not_found" => Err(Error::not_found(&keys.queue, id)),
            "cancelled" => Err(Error::cancelled(&keys.queue, id)),
            "not_owner" => {
                let owner = self.string(1).unwrap_or_default();
                let owner = (!owner.is_empty()).then_some(owner.as_str());
                Err(Error::not_owner(&keys.queue, id, who, owner))
            }
            "claimed" => Err(Error::already_claimed(&keys.queue, id, &self.string(1)?)),
            other => Err(Error::codec(format!(
                "unexpected status {other:?} from a script on job {id} in queue {}",
                keys.queue
            ))),
        }
    }
}
