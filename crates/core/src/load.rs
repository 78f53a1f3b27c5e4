//! Path load as one I/O thread sees it: what its queue has in flight on
//! each path, what it sent there in all, and what it learnt from its
//! completions.
//!
//! # Why per queue
//! The load-aware selectors (queue-length, service-time,
//! historical-service-time, queue-depth) read a path's in-flight count on
//! every I/O and change it twice per I/O. Shared counters make every core
//! that does I/O write the same cache lines, which costs a line transfer
//! per update as soon as two threads are busy (at 2 jobs, ten times the
//! 25 ns per I/O the whole map may add: `docs/BENCHMARKS.md`), and even
//! one thread pays a locked read-modify-write per update. So each queue keeps its own
//! [`PathLoad`] per path and its selectors balance its own I/O. A path that
//! other threads congest still shows here, as this queue's I/O on it
//! completing later and piling up; the sum of per-queue balanced loads is
//! balanced. This is blk-mq's per-hardware-context view rather than
//! dm-mpath's global one, and it is what lets the fast path share nothing.
//!
//! # Concurrency
//! One writer: the queue that owns the record (its thread). Readers: that
//! queue's selectors, and status code on any thread, through
//! [`crate::map::Map::path_load`], which sums the records of every live
//! queue. Fields are atomics written with plain `load` + `store` (no
//! read-modify-write, so no locked instruction): with one writer no update
//! can be lost, and readers elsewhere only need a value that was true
//! recently.
//!
//! # Latency histogram
//! Each record also counts its completed attempts (successful or not) by
//! latency, for metrics: bucket `i` holds the attempts that took less than
//! `2^(i + 10)` ns (1.024 µs, 2.048 µs, ... 4.29 s) and at least the bound
//! of bucket `i - 1`; the last bucket is unbounded. Powers of two make the
//! bucket an `ilog2` (one `bsr`/`lzcnt`) and a `min`, with no branch and
//! no table, so recording costs a few instructions and one load and store
//! of the bucket's counter per attempt. See [`latency_bucket_upper_ns`].

use crate::sync::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// Buckets of the per-path latency histogram ([`PathLoad::latency_buckets`]).
pub const LATENCY_BUCKETS: usize = 24;

/// log2 of the first bucket's upper bound (1,024 ns).
const FIRST_BUCKET_LOG2: u32 = 10;

/// The exclusive upper bound, in ns, of latency bucket `bucket`: `2^(bucket
/// + 10)`; `None` for the last bucket (+Inf) and beyond.
pub fn latency_bucket_upper_ns(bucket: usize) -> Option<u64> {
    (bucket < LATENCY_BUCKETS - 1).then(|| 1u64 << (bucket as u32 + FIRST_BUCKET_LOG2))
}

/// The bucket of an attempt that took `latency_ns`.
///
/// `latency >> 9 | 1` is at least 1, so `ilog2` is defined (one `bsr`, no
/// zero check) and is `floor(log2(latency)) - 9` for latencies of 1,024 ns
/// and more: 1 for [1024, 2048), 2 for [2048, 4096), ...; below 1,024 ns
/// the shifted value is 0 or 1 and its `ilog2` 0. The `min` folds
/// everything from 2^32 ns up into the last bucket. LLVM compiles the
/// `min` to a compare and a branch that is never taken in practice (it
/// did so for a mask formulation and `select_unpredictable` too): the
/// bucket itself is computed without a branch or a table.
#[inline(always)]
fn latency_bucket(latency_ns: u64) -> usize {
    ((latency_ns >> (FIRST_BUCKET_LOG2 - 1) | 1).ilog2() as usize).min(LATENCY_BUCKETS - 1)
}

/// One queue's load on one path. See the module docs.
///
/// # Invariants
/// With no I/O of the owning queue in flight on the path, `in_flight` and
/// `in_flight_bytes` are 0: every [`PathLoad::start_io`] is matched by one
/// [`PathLoad::end_io`].
#[derive(Debug, Default)]
pub struct PathLoad {
    in_flight: AtomicU32,
    in_flight_bytes: AtomicU64,
    service_time_ewma: AtomicU64,
    last_completion_ns: AtomicU64,
    dispatched: AtomicU64,
    dispatched_bytes: AtomicU64,
    path_errors: AtomicU64,
    hedged_reads: AtomicU64,
    latency_sum_ns: AtomicU64,
    /// Last, so that the fields the selectors read share the first line.
    latency_buckets: [AtomicU64; LATENCY_BUCKETS],
}

// Relaxed everywhere below: one thread writes, the values only steer load
// or feed status, and no other data is published through them.
impl PathLoad {
    /// I/Os in flight.
    #[inline]
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Relaxed)
    }

    /// Bytes of the I/Os in flight.
    #[inline]
    pub fn in_flight_bytes(&self) -> u64 {
        self.in_flight_bytes.load(Relaxed)
    }

    /// historical-service-time's estimate of the service time (fixed
    /// point, its scale); 0 until it learnt one.
    #[inline]
    pub(crate) fn service_time_ewma(&self) -> u64 {
        self.service_time_ewma.load(Relaxed)
    }

    /// The caller's clock (ns) at the last completion a selector learnt
    /// from; 0 before the first.
    #[inline]
    pub(crate) fn last_completion_ns(&self) -> u64 {
        self.last_completion_ns.load(Relaxed)
    }

    /// Attempts sent to the path, over the record's life.
    #[inline]
    pub fn dispatched(&self) -> u64 {
        self.dispatched.load(Relaxed)
    }

    /// Bytes of those attempts (reads and writes; 0 for the others).
    #[inline]
    pub fn dispatched_bytes(&self) -> u64 {
        self.dispatched_bytes.load(Relaxed)
    }

    /// Attempts that ended in a path error, timeouts included.
    #[inline]
    pub fn path_errors(&self) -> u64 {
        self.path_errors.load(Relaxed)
    }

    /// Completed attempts by latency, bucket by bucket (not cumulative):
    /// see [`latency_bucket_upper_ns`] for the bounds.
    pub fn latency_buckets(&self) -> [u64; LATENCY_BUCKETS] {
        std::array::from_fn(|bucket| self.latency_buckets[bucket].load(Relaxed))
    }

    /// The latencies of the attempts counted in
    /// [`PathLoad::latency_buckets`], summed, in ns (wrapping, as a
    /// Prometheus counter may).
    #[inline]
    pub fn latency_sum_ns(&self) -> u64 {
        self.latency_sum_ns.load(Relaxed)
    }

    /// Counts one ended attempt of `latency_ns` in the histogram. Owning
    /// queue only.
    #[inline(always)]
    pub(crate) fn record_latency(&self, latency_ns: u64) {
        let bucket = &self.latency_buckets[latency_bucket(latency_ns)];
        bucket.store(bucket.load(Relaxed).wrapping_add(1), Relaxed);
        self.latency_sum_ns
            .store(self.latency_sum_ns().wrapping_add(latency_ns), Relaxed);
    }

    /// An upper bound on the latency below which `per_mille` of this
    /// record's attempts completed: the upper bound of the histogram
    /// bucket that reaches that share (`u64::MAX` for the last, unbounded
    /// bucket); `None` before any attempt completed. Reads 24 counters:
    /// for periodic checks, not per I/O.
    pub(crate) fn latency_quantile_upper_ns(&self, per_mille: u64) -> Option<u64> {
        let buckets = self.latency_buckets();
        let total: u64 = buckets.iter().sum();
        if total == 0 {
            return None;
        }
        // The rank of the quantile, rounded up: at least one attempt.
        let rank = (u128::from(total) * u128::from(per_mille.min(1000)))
            .div_ceil(1000)
            .max(1) as u64;
        let mut seen = 0;
        for (bucket, count) in buckets.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(latency_bucket_upper_ns(bucket).unwrap_or(u64::MAX));
            }
        }
        Some(u64::MAX)
    }

    /// Counts an I/O of `bytes` as started: in flight, and dispatched.
    /// For the record's one writer: the queue that owns it (or a
    /// benchmark or test driving a selector without a queue, which then
    /// calls the selector's `started` hook as the queue does); a second
    /// writer would lose counts.
    #[inline]
    pub fn start_io(&self, bytes: u64) {
        self.in_flight
            .store(self.in_flight().wrapping_add(1), Relaxed);
        self.in_flight_bytes
            .store(self.in_flight_bytes().wrapping_add(bytes), Relaxed);
        self.dispatched
            .store(self.dispatched().wrapping_add(1), Relaxed);
        self.dispatched_bytes
            .store(self.dispatched_bytes().wrapping_add(bytes), Relaxed);
    }

    /// Reads the owning queue took back from this path past its hedge
    /// delay and sent down another.
    pub fn hedged_reads(&self) -> u64 {
        self.hedged_reads.load(Relaxed)
    }

    /// Counts a read taken back past its hedge delay. Owning queue only.
    pub(crate) fn hedged_read(&self) {
        self.hedged_reads
            .store(self.hedged_reads().wrapping_add(1), Relaxed);
    }

    /// Counts an attempt that ended in a path error. Owning queue only.
    pub(crate) fn path_error(&self) {
        self.path_errors
            .store(self.path_errors().wrapping_add(1), Relaxed);
    }

    /// Counts an I/O of `bytes` started with [`PathLoad::start_io`] as
    /// done. For the record's one writer, as `start_io`.
    #[inline]
    pub fn end_io(&self, bytes: u64) {
        debug_assert!(self.in_flight() > 0, "end_io without start_io");
        self.in_flight
            .store(self.in_flight().wrapping_sub(1), Relaxed);
        self.in_flight_bytes
            .store(self.in_flight_bytes().wrapping_sub(bytes), Relaxed);
    }

    /// Records a learnt service-time estimate and the completion it came
    /// from. Owning queue only.
    #[inline]
    pub(crate) fn learn(&self, service_time_ewma: u64, completion_ns: u64) {
        self.service_time_ewma.store(service_time_ewma, Relaxed);
        self.last_completion_ns.store(completion_ns, Relaxed);
    }

    /// Adds `other` into this record: counts add up; the estimate is the
    /// one of the queue that completed on the path last. For status.
    pub(crate) fn accumulate(&self, other: &PathLoad) {
        self.accumulate_totals(other);
        self.in_flight
            .store(self.in_flight().saturating_add(other.in_flight()), Relaxed);
        self.in_flight_bytes.store(
            self.in_flight_bytes()
                .saturating_add(other.in_flight_bytes()),
            Relaxed,
        );
        if other.last_completion_ns() >= self.last_completion_ns() {
            self.learn(other.service_time_ewma(), other.last_completion_ns());
        }
    }

    /// Adds only `other`'s running totals into this record (I/Os, bytes,
    /// path errors, the latency histogram and sum), not its live state (in
    /// flight, the estimate): what a reloaded map takes over from the map
    /// it replaces, so that totals never go back.
    pub(crate) fn accumulate_totals(&self, other: &PathLoad) {
        for (total, more) in [
            (&self.dispatched, other.dispatched()),
            (&self.dispatched_bytes, other.dispatched_bytes()),
            (&self.path_errors, other.path_errors()),
            (&self.hedged_reads, other.hedged_reads()),
        ] {
            total.store(total.load(Relaxed).saturating_add(more), Relaxed);
        }
        // The histogram wraps, as each queue's own counters do: a sum of
        // wrapped counters is still right modulo 2^64, which is all a
        // Prometheus counter promises a reader taking differences.
        self.latency_sum_ns.store(
            self.latency_sum_ns().wrapping_add(other.latency_sum_ns()),
            Relaxed,
        );
        for (total, more) in self.latency_buckets.iter().zip(other.latency_buckets()) {
            total.store(total.load(Relaxed).wrapping_add(more), Relaxed);
        }
    }

    /// A record holding the given values, for selector tests.
    #[cfg(test)]
    pub(crate) fn with(
        in_flight: u32,
        in_flight_bytes: u64,
        service_time_ewma: u64,
        last_completion_ns: u64,
    ) -> Self {
        let load = PathLoad::default();
        load.in_flight.store(in_flight, Relaxed);
        load.in_flight_bytes.store(in_flight_bytes, Relaxed);
        load.learn(service_time_ewma, last_completion_ns);
        load
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn start_and_end_balance() {
        let load = PathLoad::default();
        load.start_io(4096);
        load.start_io(512);
        load.end_io(4096);
        assert_eq!((load.in_flight(), load.in_flight_bytes()), (1, 512));
        load.end_io(512);
        assert_eq!((load.in_flight(), load.in_flight_bytes()), (0, 0));
        assert_eq!((load.dispatched(), load.dispatched_bytes()), (2, 4608));
        load.path_error();
        let total = PathLoad::default();
        total.accumulate(&load);
        total.accumulate(&load);
        assert_eq!(
            (
                total.dispatched(),
                total.dispatched_bytes(),
                total.path_errors()
            ),
            (4, 9216, 2)
        );
    }

    #[test]
    fn latency_buckets_split_at_powers_of_two() {
        assert_eq!(latency_bucket_upper_ns(0), Some(1024));
        assert_eq!(latency_bucket_upper_ns(1), Some(2048));
        assert_eq!(latency_bucket_upper_ns(22), Some(1 << 32));
        assert_eq!(latency_bucket_upper_ns(23), None);
        assert_eq!(latency_bucket_upper_ns(24), None);
        // Every latency lands in the first bucket whose bound is above it.
        for (latency, bucket) in [
            (0, 0),
            (1, 0),
            (511, 0),
            (512, 0),
            (1023, 0),
            (1024, 1),
            (2047, 1),
            (2048, 2),
            (4095, 2),
            (4096, 3),
            ((1 << 32) - 1, 22),
            (1 << 32, 23),
            ((1 << 33) - 1, 23),
            (1 << 33, 23),
            (u64::MAX, 23),
        ] {
            assert_eq!(latency_bucket(latency), bucket, "latency {latency}");
        }
        for bucket in 0..LATENCY_BUCKETS - 1 {
            let upper = latency_bucket_upper_ns(bucket).unwrap();
            assert_eq!(latency_bucket(upper - 1), bucket);
            assert_eq!(latency_bucket(upper), bucket + 1);
        }
    }

    #[test]
    fn latency_quantile_is_the_bound_of_the_bucket_reaching_it() {
        let load = PathLoad::default();
        assert_eq!(load.latency_quantile_upper_ns(990), None);
        for _ in 0..99 {
            load.record_latency(1_500); // bucket [1024, 2048)
        }
        load.record_latency(100_000); // bucket [65536, 131072)
        assert_eq!(load.latency_quantile_upper_ns(500), Some(2_048));
        assert_eq!(load.latency_quantile_upper_ns(990), Some(2_048));
        assert_eq!(load.latency_quantile_upper_ns(1000), Some(131_072));
        load.record_latency(u64::MAX);
        assert_eq!(load.latency_quantile_upper_ns(1000), Some(u64::MAX));
    }

    #[test]
    fn latency_histogram_counts_and_sums() {
        let load = PathLoad::default();
        for latency in [100, 1500, 1600, 5_000_000_000] {
            load.record_latency(latency);
        }
        let mut expected = [0; LATENCY_BUCKETS];
        expected[0] = 1;
        expected[1] = 2;
        expected[23] = 1;
        assert_eq!(load.latency_buckets(), expected);
        assert_eq!(load.latency_sum_ns(), 5_000_003_200);
        let total = PathLoad::default();
        total.accumulate(&load);
        total.accumulate(&load);
        assert_eq!(total.latency_buckets(), expected.map(|count| count * 2));
        assert_eq!(total.latency_sum_ns(), 10_000_006_400);
    }

    #[test]
    fn accumulate_sums_counts_and_keeps_the_latest_estimate() {
        let total = PathLoad::default();
        total.accumulate(&PathLoad::with(2, 8192, 700, 50));
        total.accumulate(&PathLoad::with(1, 4096, 300, 90));
        total.accumulate(&PathLoad::with(0, 0, 900, 10));
        assert_eq!((total.in_flight(), total.in_flight_bytes()), (3, 12288));
        assert_eq!(
            (total.service_time_ewma(), total.last_completion_ns()),
            (300, 90)
        );
    }
}
