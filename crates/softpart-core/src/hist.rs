//! The run-delay histogram layout shared with the observer's BPF program
//! (`sp_hist_bucket()` in bpf/include/softpart_hist.h): log-linear, 8 sub-buckets per power
//! of two, so any recorded value is known within 12.5%. Values of 2^40 ns
//! (about 18 minutes) and more land in the last bucket.

/// Sub-buckets per power of two (as a shift).
pub const SUB_BITS: u32 = 3;
pub const SUB: u64 = 1 << SUB_BITS;
/// Largest power of two distinguished.
pub const MAX_MSB: u32 = 40;
pub const NR_BUCKETS: usize = ((MAX_MSB - SUB_BITS + 1) as usize + 1) * SUB as usize;

pub fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    if msb > MAX_MSB {
        return NR_BUCKETS - 1;
    }
    ((msb - SUB_BITS + 1) as usize) * SUB as usize + ((v >> (msb - SUB_BITS)) & (SUB - 1)) as usize
}

/// The values `[lo, hi)` that map to bucket `idx`.
pub fn bounds(idx: usize) -> (u64, u64) {
    if (idx as u64) < SUB {
        return (idx as u64, idx as u64 + 1);
    }
    let msb = (idx as u64 / SUB) as u32 + SUB_BITS - 1;
    let sub = idx as u64 % SUB;
    let width = 1u64 << (msb - SUB_BITS);
    let lo = (SUB + sub) << (msb - SUB_BITS);
    (lo, lo + width)
}

/// The `q` quantile (0..=1) of a histogram, as the upper bound of the bucket
/// it falls in (so "p99 = x" reads "99% of delays were below x"). None when
/// the histogram is empty.
pub fn quantile(hist: &[u64], q: f64) -> Option<u64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (idx, &n) in hist.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(bounds(idx).1);
        }
    }
    Some(bounds(hist.len() - 1).1)
}

/// Upper bound of the highest non-empty bucket.
pub fn max(hist: &[u64]) -> Option<u64> {
    hist.iter().rposition(|&n| n > 0).map(|idx| bounds(idx).1)
}

/// The same counts in fewer buckets, for exporters: count `i` of the
/// result is what fell below `upper[i]` (and at or above `upper[i - 1]`),
/// the last what fell above every bound. A fine bucket goes to the first
/// coarse bound at or above its own upper bound, so a value is never
/// counted below what it may have been. `upper` ascending.
pub fn coarsen(hist: &[u64], upper: &[u64]) -> Vec<u64> {
    let mut out = vec![0; upper.len() + 1];
    for (idx, &n) in hist.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let hi = bounds(idx).1;
        let at = upper.iter().position(|&u| hi <= u).unwrap_or(upper.len());
        out[at] += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_is_contiguous() {
        let mut expect_lo = 0;
        for idx in 0..NR_BUCKETS - 1 {
            let (lo, hi) = bounds(idx);
            assert_eq!(lo, expect_lo, "bucket {idx}");
            assert!(hi > lo);
            expect_lo = hi;
        }
        assert_eq!(bucket(u64::MAX), NR_BUCKETS - 1);
    }

    #[test]
    fn quantiles() {
        let mut h = vec![0u64; NR_BUCKETS];
        for v in 1..=100u64 {
            h[bucket(v * 1000)] += 1;
        }
        let p50 = quantile(&h, 0.5).unwrap();
        assert!((50_000..=57_000).contains(&p50), "{p50}");
        let p99 = quantile(&h, 0.99).unwrap();
        assert!((99_000..=114_000).contains(&p99), "{p99}");
        assert!(max(&h).unwrap() >= 100_000);
        assert_eq!(quantile(&vec![0; NR_BUCKETS], 0.5), None);
    }

    proptest! {
        #[test]
        fn value_lies_in_its_bucket(v in 0u64..(1u64 << 41)) {
            let idx = bucket(v);
            prop_assert!(idx < NR_BUCKETS);
            let (lo, hi) = bounds(idx);
            if idx < NR_BUCKETS - 1 {
                prop_assert!(lo <= v && v < hi, "{} not in [{}, {})", v, lo, hi);
                prop_assert!((hi - lo) as f64 <= (lo as f64 / 8.0).max(1.0));
            }
        }
    }

    #[test]
    fn coarsening_keeps_every_count_at_or_above_its_value() {
        let mut h = vec![0u64; NR_BUCKETS];
        for v in [3u64, 9, 1_000, 1_000, 50_000, 5_000_000_000] {
            h[bucket(v)] += 1;
        }
        let upper = [10, 1_000, 100_000];
        let c = coarsen(&h, &upper);
        assert_eq!(c.iter().sum::<u64>(), 6);
        // 3 and 9 below 10 (9's bucket is [9, 10)); 1000's bucket ends
        // above 1000, so both go to the 100_000 bound with 50_000.
        assert_eq!(c, vec![2, 0, 3, 1]);
        assert_eq!(coarsen(&[], &upper), vec![0; 4]);
    }
}
