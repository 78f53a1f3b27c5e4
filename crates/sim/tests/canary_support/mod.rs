//! Shared by the canary tests: runs seeds against a deliberately broken
//! core, asserts the simulator caught the break with the invariant meant
//! to catch it, and that the failing seed replays the same way.

use mpio_sim::Invariant;
use mpio_sim::{run_seed, run_seeds, SeedReport};

/// Runs `seeds` seeds against the `canary` core and returns the first
/// failing one, after asserting that `invariant` caught it (else panics
/// with `promise`, the promise the canary breaks) and that it replays
/// with the same failure on the same trace.
pub fn first_caught(canary: &str, seeds: u64, invariant: Invariant, promise: &str) -> SeedReport {
    let report = run_seeds(0, seeds, 2);
    let Some(first) = report.failures.first() else {
        panic!("{seeds} seeds ran against the {canary} core and no invariant broke");
    };
    let failure = first
        .failure
        .as_ref()
        .expect("a failing seed carries its failure");
    assert_eq!(failure.invariant, invariant, "{promise}: {first}");

    // The replay fails the same way, on the same trace.
    let replay = run_seed(first.seed, true);
    assert_eq!(replay.failure.as_ref(), Some(failure));
    assert_eq!(replay.trace_hash, first.trace_hash);
    println!(
        "{canary} caught by {} of {seeds} seeds; first: seed {}",
        report.failures.len(),
        first.seed
    );
    first.clone()
}
