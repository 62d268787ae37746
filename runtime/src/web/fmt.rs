//! Small formatting helpers of the pages: times, ages, counts, links.

use maud::{html, Markup};

/// A duration in ms as `1.2s`, `3m 4s`, `2h 5m`, `3d 4h`.
pub(crate) fn age(ms: i64) -> String {
    let ms = ms.max(0);
    let s = ms / 1000;
    match s {
        0..=59 => format!("{:.1}s", ms as f64 / 1000.0),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// A time (ms since the epoch) as `YYYY-MM-DD HH:MM:SS` UTC.
pub(crate) fn time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// A count, or `—` for a state the backend does not keep.
pub(crate) fn count(n: Option<u64>) -> Markup {
    match n {
        Some(n) => html! { (n) },
        None => html! { span.na title="not kept by this backend" { "—" } },
    }
}

/// `/queues/<queue>` (path segments are percent-encoded).
pub(crate) fn queue_url(queue: &str) -> String {
    format!("/queues/{}", segment(queue))
}

/// `/queues/<queue>/jobs/<id>`.
pub(crate) fn job_url(queue: &str, id: &str) -> String {
    format!("/queues/{}/jobs/{}", segment(queue), segment(id))
}

/// A query string value, percent-encoded.
pub(crate) fn query(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// A path segment, percent-encoded.
fn segment(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_urls_read_well() {
        assert_eq!(age(1500), "1.5s");
        assert_eq!(age(125_000), "2m 5s");
        assert_eq!(age(2 * 3_600_000 + 60_000), "2h 1m");
        assert_eq!(age(-5), "0.0s");
        assert_eq!(job_url("a b", "x/y"), "/queues/a%20b/jobs/x%2Fy");
        assert_eq!(query("a&b c"), "a%26b+c");
        assert_eq!(time(0), "1970-01-01 00:00:00");
    }
}
