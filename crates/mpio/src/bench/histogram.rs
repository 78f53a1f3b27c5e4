//! The bench's latency histogram: an HdrHistogram (the `hdrhistogram`
//! crate) with fixed bounds, 1 ns to an hour at three significant digits,
//! so a percentile is within 0.1 % of the truth and recording never
//! allocates (its counts are sized at creation). A latency past an hour
//! counts as an hour.

/// The longest latency told apart (an hour, in ns).
const HIGHEST_NS: u64 = 3_600 * 1_000_000_000;
/// Significant decimal digits kept of each latency.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Latency counts in ns.
#[derive(Clone, Debug)]
pub struct Histogram(hdrhistogram::Histogram<u64>);

impl Default for Histogram {
    fn default() -> Self {
        Histogram(
            hdrhistogram::Histogram::new_with_bounds(1, HIGHEST_NS, SIGNIFICANT_DIGITS)
                .expect("the bounds are valid"),
        )
    }
}

impl Histogram {
    /// Counts one latency.
    #[inline]
    pub fn record(&mut self, value_ns: u64) {
        self.0.saturating_record(value_ns);
    }

    /// Adds `other`'s counts to this one.
    pub fn merge(&mut self, other: &Histogram) {
        self.0
            .add(&other.0)
            .expect("histograms of one set of bounds add up");
    }

    /// The value at or below which `percent` of the samples fall (the
    /// highest value equivalent to it at the histogram's precision); 0
    /// when empty.
    pub fn percentile(&self, percent: f64) -> u64 {
        if self.0.is_empty() {
            return 0;
        }
        self.0
            .highest_equivalent(self.0.value_at_percentile(percent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_within_a_thousandth() {
        let mut histogram = Histogram::default();
        assert_eq!(histogram.percentile(50.0), 0);
        for value in 1..=100_000 {
            histogram.record(value);
        }
        let p50 = histogram.percentile(50.0);
        assert!((50_000..=50_050).contains(&p50), "{p50}");
        let p99 = histogram.percentile(99.0);
        assert!((99_000..=99_100).contains(&p99), "{p99}");
        let mut other = Histogram::default();
        other.record(1_000_000);
        other.record(u64::MAX);
        histogram.merge(&other);
        assert!(histogram.percentile(100.0) >= HIGHEST_NS);
        assert!(histogram.percentile(99.999) >= 1_000_000);
    }

    #[test]
    fn recording_never_allocates_past_creation() {
        let mut histogram = Histogram::default();
        let before = histogram.0.distinct_values();
        for shift in 0..64 {
            histogram.record(1u64 << shift);
        }
        assert_eq!(histogram.0.distinct_values(), before);
    }
}
