//! A job's arguments and details as HTML: pretty JSON whose long strings
//! and big objects fold (`<details>`, no JavaScript needed). Every value is
//! escaped by maud.

use maud::{html, Markup};
use serde_json::Value;

/// Strings longer than this fold.
const LONG: usize = 120;
/// Objects and arrays with more entries than this fold.
const MANY: usize = 12;

/// `value` as foldable, escaped, pretty JSON.
pub(crate) fn render(value: &Value) -> Markup {
    html! { pre.json { (node(value, 0)) } }
}

fn node(value: &Value, depth: usize) -> Markup {
    let pad = "  ".repeat(depth + 1);
    let end = "  ".repeat(depth);
    match value {
        Value::String(s) if s.chars().count() > LONG => {
            let head: String = s.chars().take(LONG).collect();
            html! {
                details.fold {
                    summary { span.s { "\"" (head) "…\"" } " (" (s.chars().count()) " chars)" }
                    span.s { (quoted(s)) }
                }
            }
        }
        Value::String(s) => html! { span.s { (quoted(s)) } },
        Value::Array(items) if items.is_empty() => html! { "[]" },
        Value::Object(map) if map.is_empty() => html! { "{}" },
        Value::Array(items) => {
            let body = html! {
                "[\n"
                @for (i, v) in items.iter().enumerate() {
                    (pad) (node(v, depth + 1)) @if i + 1 < items.len() { "," } "\n"
                }
                (end) "]"
            };
            fold(body, items.len(), "items")
        }
        Value::Object(map) => {
            let body = html! {
                "{\n"
                @for (i, (k, v)) in map.iter().enumerate() {
                    (pad) span.k { (quoted(k)) } ": " (node(v, depth + 1)) @if i + 1 < map.len() { "," } "\n"
                }
                (end) "}"
            };
            fold(body, map.len(), "keys")
        }
        other => html! { span.v { (other.to_string()) } },
    }
}

fn fold(body: Markup, n: usize, what: &str) -> Markup {
    if n <= MANY {
        return body;
    }
    html! { details.fold { summary { (n) " " (what) } (body) } }
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_and_long_ones_fold() {
        let v = serde_json::json!({"html": "<script>alert(1)</script>", "long": "x".repeat(500)});
        let out = render(&v).into_string();
        assert!(!out.contains("<script>"), "{out}");
        assert!(out.contains("&lt;script&gt;"));
        assert!(out.contains("<details"));
        assert!(out.contains("500 chars"));
    }
}
