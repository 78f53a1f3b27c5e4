//! A fixed-size log-linear latency histogram: 16 sub-buckets per power of
//! two, so a percentile is within 1/16 (6 %) of the truth. Recording is an
//! index computation and an increment; nothing allocates after creation.

/// Sub-buckets per power of two.
const SUB_BUCKETS: usize = 16;
const SUB_BITS: u32 = SUB_BUCKETS.trailing_zeros();

/// Latency counts in ns.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; 64 * SUB_BUCKETS],
            total: 0,
        }
    }
}

fn bucket_of(value: u64) -> usize {
    if value < SUB_BUCKETS as u64 {
        return value as usize;
    }
    let magnitude = 63 - value.leading_zeros(); // >= SUB_BITS
    let shift = magnitude - SUB_BITS;
    let sub = (value >> shift) as usize & (SUB_BUCKETS - 1);
    (shift as usize + 1) * SUB_BUCKETS + sub
}

/// The largest value that falls in `bucket`.
fn upper_bound(bucket: usize) -> u64 {
    if bucket < SUB_BUCKETS {
        return bucket as u64;
    }
    let shift = (bucket / SUB_BUCKETS - 1) as u32;
    let sub = (bucket % SUB_BUCKETS) as u128;
    // The top bucket's bound is past u64::MAX: compute wide, saturate.
    let bound = ((SUB_BUCKETS as u128 + sub + 1) << shift) - 1;
    u64::try_from(bound).unwrap_or(u64::MAX)
}

impl Histogram {
    /// Counts one latency.
    #[inline]
    pub fn record(&mut self, value_ns: u64) {
        self.counts[bucket_of(value_ns)] += 1;
        self.total += 1;
    }

    /// Adds `other`'s counts to this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.total += other.total;
    }

    /// The value at or below which `percent` of the samples fall (an upper
    /// bound within the bucket's width); 0 when empty.
    pub fn percentile(&self, percent: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let wanted = ((percent / 100.0) * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bucket, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= wanted {
                return upper_bound(bucket);
            }
        }
        upper_bound(self.counts.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut previous = 0;
        for value in (0..100_000u64).chain([u64::MAX / 3, u64::MAX]) {
            let bucket = bucket_of(value);
            assert!(bucket >= previous);
            previous = bucket;
            let bound = upper_bound(bucket);
            assert!(bound >= value, "{value} above its bucket bound {bound}");
            assert!(bound - value <= value / 16 + 1, "{value} bucket too wide");
        }
    }

    #[test]
    fn percentiles() {
        let mut histogram = Histogram::default();
        assert_eq!(histogram.percentile(50.0), 0);
        for value in 1..=1000 {
            histogram.record(value);
        }
        let p50 = histogram.percentile(50.0);
        assert!((500..=532).contains(&p50), "{p50}");
        let p99 = histogram.percentile(99.0);
        assert!((990..=1055).contains(&p99), "{p99}");
        let mut other = Histogram::default();
        other.record(1_000_000);
        histogram.merge(&other);
        assert!(histogram.percentile(100.0) >= 1_000_000);
    }
}
