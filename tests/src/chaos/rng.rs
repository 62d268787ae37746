//! A small seeded random number generator (SplitMix64): every random
//! choice of a chaos run comes from the run's seed, so a run's plan can be
//! named by its seed.

use std::ops::RangeInclusive;

/// SplitMix64 (Steele, Lea and Flood), good enough for test plans.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `range` (inclusive; the range must not be empty).
    pub fn in_range(&mut self, range: &RangeInclusive<u64>) -> u64 {
        let (lo, hi) = (*range.start(), *range.end());
        let span = hi - lo;
        if span == u64::MAX {
            return self.next_u64();
        }
        lo + self.next_u64() % (span + 1)
    }

    /// An index below `len` (which must be above 0).
    pub fn index(&mut self, len: usize) -> usize {
        // Truncation intended: `len` is a usize, so the result fits.
        (self.next_u64() % len as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_numbers_and_ranges_hold() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..1000 {
            let x = a.in_range(&(5..=30));
            assert_eq!(x, b.in_range(&(5..=30)));
            assert!((5..=30).contains(&x));
            assert!(a.index(3) < 3);
            b.index(3);
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
        assert_eq!(Rng::new(3).in_range(&(4..=4)), 4);
    }
}
