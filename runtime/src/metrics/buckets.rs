//! qless's histogram buckets (`s0`–`s59`, `m1`–`m59`, `h1`–`h23`,
//! `d1`–`d7`) as Prometheus' buckets: an upper bound in seconds each, in
//! order, all of them every time (so `histogram_quantile` over a range
//! always sees one set of bounds).

use crate::stats::Timing;

/// Each unit's buckets: its letter, first and last number, and seconds per
/// number. Bucket `<letter>N` holds N to N+1 units, so its bound is
/// (N+1) units. `d7` and above (a week and more) is the last bucket, +Inf.
const UNITS: [(char, u32, u32, f64); 4] = [
    ('s', 0, 59, 1.0),
    ('m', 1, 59, 60.0),
    ('h', 1, 23, 3_600.0),
    ('d', 1, 6, 86_400.0),
];

/// Every bucket's upper bound in seconds, in order, ending with +Inf.
fn bounds() -> Vec<f64> {
    let mut bounds: Vec<f64> = UNITS
        .iter()
        .flat_map(|&(_, first, last, unit)| (first..=last).map(move |n| f64::from(n + 1) * unit))
        .collect();
    bounds.push(f64::INFINITY);
    bounds
}

/// The position of a qless bucket among [`bounds`]; `None` for a name
/// that is none of them.
fn position(name: &str) -> Option<usize> {
    let letter = name.chars().next()?;
    let n: u32 = name[letter.len_utf8()..].parse().ok()?;
    let mut offset = 0;
    for (unit, first, last, _) in UNITS {
        if unit == letter && (first..=last).contains(&n) {
            return Some(offset + (n - first) as usize);
        }
        offset += (last - first + 1) as usize;
    }
    (letter == 'd' && n > 6).then_some(offset)
}

/// A day's timing as (upper bound in seconds, jobs in that bucket alone)
/// pairs (the encoder makes them cumulative), the jobs counted, and the
/// sum of their times in seconds. A bucket of a name this version does
/// not know counts under +Inf, so no job goes missing.
pub(super) fn histogram(timing: &Timing) -> (Vec<(f64, u64)>, u64, f64) {
    let mut buckets: Vec<(f64, u64)> = bounds().into_iter().map(|b| (b, 0)).collect();
    let last = buckets.len() - 1;
    for (name, jobs) in &timing.histogram {
        buckets[position(name).unwrap_or(last)].1 += jobs;
    }
    let count = buckets.iter().map(|(_, jobs)| jobs).sum();
    let sum = timing.mean_ms * timing.count as f64 / 1000.0;
    (buckets, count, sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_qless_bucket_has_its_bound() {
        let b = bounds();
        assert_eq!(b.len(), 60 + 59 + 23 + 6 + 1);
        assert!(b.windows(2).all(|w| w[0] < w[1]), "bounds rise");
        let at = |name: &str| b[position(name).unwrap()];
        assert_eq!(at("s0"), 1.0);
        assert_eq!(at("s59"), 60.0);
        assert_eq!(at("m1"), 120.0);
        assert_eq!(at("m59"), 3_600.0);
        assert_eq!(at("h1"), 7_200.0);
        assert_eq!(at("h23"), 86_400.0);
        assert_eq!(at("d1"), 172_800.0);
        assert_eq!(at("d6"), 604_800.0);
        assert_eq!(at("d7"), f64::INFINITY);
        for bad in ["", "s", "s60", "m0", "h24", "x1", "é1", "s-1"] {
            assert_eq!(position(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_timing_becomes_buckets_count_and_sum() {
        let timing = Timing {
            count: 4,
            mean_ms: 1_500.0,
            std_dev_ms: 0.0,
            histogram: vec![("s0".into(), 1), ("s2".into(), 2), ("zz".into(), 1)],
        };
        let (buckets, count, sum) = histogram(&timing);
        assert_eq!((count, sum), (4, 6.0));
        assert_eq!(buckets[0], (1.0, 1));
        assert_eq!(buckets[2], (3.0, 2));
        assert_eq!(
            *buckets.last().unwrap(),
            (f64::INFINITY, 1),
            "unknown names count as +Inf"
        );
    }
}
