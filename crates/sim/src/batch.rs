//! Running many seeds: a range of seeds spread over threads, each seed on
//! one thread from start to end, so the results do not depend on the
//! number of threads.

use crate::seed::{run_seed, SeedReport};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// What a range of seeds found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BatchReport {
    /// First seed run.
    pub first_seed: u64,
    /// Seeds run.
    pub seeds: u64,
    /// I/Os over every seed.
    pub ios: u64,
    /// Blocks checked against the reference disk over every seed.
    pub blocks_checked: u64,
    /// Path failures over every seed.
    pub path_failures: u64,
    /// Wrapping sum of every seed's trace hash: equal for two batches of
    /// the same seeds, whatever the thread count.
    pub trace_digest: u64,
    /// The failing seeds' reports, by seed.
    pub failures: Vec<SeedReport>,
}

/// Runs seeds `first_seed..first_seed + count` on `jobs` threads.
pub fn run_seeds(first_seed: u64, count: u64, jobs: usize) -> BatchReport {
    let next = AtomicU64::new(0);
    let total = Mutex::new(BatchReport {
        first_seed,
        seeds: count,
        ..BatchReport::default()
    });
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                // Relaxed: the counter only hands out distinct seeds; the
                // results travel through the mutex.
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= count {
                    break;
                }
                let report = run_seed(first_seed.wrapping_add(index), false);
                let mut total = total
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                total.ios += report.ios;
                total.blocks_checked += report.blocks_checked;
                total.path_failures += report.path_failures;
                total.trace_digest = total.trace_digest.wrapping_add(report.trace_hash);
                if report.failure.is_some() {
                    total.failures.push(report);
                }
            });
        }
    });
    let mut total = total
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    total.failures.sort_by_key(|report| report.seed);
    total
}
