//! The simulator as a test: seeds pass against the real core, and a seed
//! is a replayable run — the same seed gives the same trace, another seed
//! another trace, whatever the thread count.
//!
//! CI runs the big batch through `mpio sim --seeds` in release (see
//! `scripts/test.sh`); these tests keep a small batch in every
//! `cargo test`, where the core's debug assertions are on.

use mpio_sim::{run_seed, run_seeds};

#[test]
fn seeds_pass_against_the_real_core() {
    let report = run_seeds(0, 64, 2);
    if let Some(first) = report.failures.first() {
        panic!(
            "{} of 64 seeds failed; the first:\n{first}",
            report.failures.len()
        );
    }
    assert!(report.ios > 0 && report.blocks_checked > 0);
    assert!(
        report.path_failures > 0,
        "64 seeds of faults failed no path: the faults do not reach the core"
    );
}

#[test]
fn a_seed_replays_event_for_event() {
    let first = run_seed(11, true);
    let again = run_seed(11, true);
    assert!(first.failure.is_none(), "{first}");
    assert!(first.trace_events > 100, "a run this short checks little");
    assert_eq!(first.trace_hash, again.trace_hash);
    assert_eq!(first.full_trace, again.full_trace);
    assert_eq!(first.ios, again.ios);
    let other = run_seed(12, false);
    assert_ne!(first.trace_hash, other.trace_hash);
}

#[test]
fn the_thread_count_changes_nothing() {
    let one = run_seeds(100, 8, 1);
    let two = run_seeds(100, 8, 2);
    assert_eq!(one.trace_digest, two.trace_digest);
    assert_eq!(one.ios, two.ios);
    let shifted = run_seeds(101, 8, 2);
    assert_ne!(one.trace_digest, shifted.trace_digest);
}
