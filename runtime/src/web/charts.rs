//! Charts drawn on the server as inline SVG (no script, no external
//! library): per-minute throughput and the day's wait and run times.

use maud::{html, Markup};

use crate::board::Minute;
use crate::stats::Timing;

const W: f64 = 600.0;
const H: f64 = 120.0;

/// Completed (and, stacked on top, failed) jobs per minute.
pub(crate) fn throughput(minutes: &[Minute]) -> Markup {
    let max = minutes
        .iter()
        .map(|m| m.completed + m.failed)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let step = W / minutes.len().max(1) as f64;
    let total: u64 = minutes.iter().map(|m| m.completed).sum();
    let failed: u64 = minutes.iter().map(|m| m.failed).sum();
    html! {
        figure.chart {
            svg viewBox={"0 0 " (W) " " (H + 14.0)} role="img" aria-label="jobs per minute" {
                @for (i, m) in minutes.iter().enumerate() {
                    @let x = i as f64 * step;
                    @let hc = m.completed as f64 / max * H;
                    @let hf = m.failed as f64 / max * H;
                    rect.ok x=(x) y=(H - hc) width=(step * 0.8) height=(hc) { title { (m.completed) " completed" } }
                    rect.bad x=(x) y=(H - hc - hf) width=(step * 0.8) height=(hf) { title { (m.failed) " failed" } }
                }
                line x1="0" y1=(H) x2=(W) y2=(H) {}
                text x="0" y=(H + 12.0) { "-" (minutes.len()) " min" }
                text x=(W - 30.0) y=(H + 12.0) { "now" }
            }
            figcaption { "completed " strong { (total) } ", failed " strong { (failed) } " in the last " (minutes.len()) " minutes (peak " (max as u64) "/min)" }
        }
    }
}

/// Coarse bins of a day's wait or run times (from qless's buckets).
const BINS: [(&str, f64); 7] = [
    ("<1s", 1.0),
    ("1–10s", 10.0),
    ("10–60s", 60.0),
    ("1–10m", 600.0),
    ("10–60m", 3600.0),
    ("1–24h", 86_400.0),
    ("≥1d", f64::INFINITY),
];

/// The day's wait or run times as a histogram.
pub(crate) fn timing(name: &str, t: &Timing) -> Markup {
    let mut bins = [0u64; BINS.len()];
    for (bucket, n) in &t.histogram {
        let secs = bucket_seconds(bucket);
        let i = BINS
            .iter()
            .position(|(_, upper)| secs < *upper)
            .unwrap_or(BINS.len() - 1);
        bins[i] += n;
    }
    let max = bins.iter().copied().max().unwrap_or(0).max(1) as f64;
    let step = W / BINS.len() as f64;
    html! {
        figure.chart {
            svg viewBox={"0 0 " (W) " " (H + 14.0)} role="img" aria-label={(name) " times"} {
                @for (i, n) in bins.iter().enumerate() {
                    @let h = *n as f64 / max * H;
                    rect.ok x=(i as f64 * step) y=(H - h) width=(step * 0.8) height=(h) { title { (n) " jobs" } }
                    text x=(i as f64 * step) y=(H + 12.0) { (BINS[i].0) }
                }
            }
            figcaption {
                (name) " today: " strong { (t.count) } " jobs, mean " (format!("{:.1}", t.mean_ms / 1000.0)) "s"
            }
        }
    }
}

/// The lower bound, in seconds, of a qless bucket (`s5`, `m3`, `h2`, `d1`).
fn bucket_seconds(bucket: &str) -> f64 {
    let (unit, n) = bucket.split_at(1);
    let n: f64 = n.parse().unwrap_or(0.0);
    n * match unit {
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_fall_in_their_bins() {
        assert_eq!(bucket_seconds("s0"), 0.0);
        assert_eq!(bucket_seconds("m2"), 120.0);
        let t = Timing {
            count: 3,
            mean_ms: 1.0,
            std_dev_ms: 0.0,
            histogram: vec![("s0".into(), 2), ("h3".into(), 1)],
        };
        let svg = timing("run", &t).into_string();
        assert!(svg.contains("2 jobs") && svg.contains("1 jobs"), "{svg}");
    }
}
