//! The fencing canary: under `--cfg mpio_canary_unfenced` the core
//! retries a write its path abandoned past the fence timeout (a copy the
//! path still holds, which may land later) as if it were a read — what
//! mpio did before writes were fenced, when the NBD transport handed a
//! held write back as connection-lost. The simulator's paths keep such a
//! copy and land it later (a ghost, see `transport.rs`); its reference
//! disk must catch the stale copy landing after its write completed.
//!
//! Run (its own target dir, so the normal build is not rebuilt):
//!
//! ```text
//! RUSTFLAGS="--cfg mpio_canary_unfenced" CARGO_TARGET_DIR=target/canary-unfenced \
//!   cargo test -p mpio-sim --release --test canary_unfenced
//! ```
//!
//! Without `--cfg mpio_canary_unfenced` this file compiles to nothing.

#![cfg(mpio_canary_unfenced)]

use mpio_sim::checker::Checker;
use mpio_sim::{run_seed, run_seeds};

/// Seeds within which the canary must be caught (seeds 7 and 47 do).
const SEEDS: u64 = 100;

#[test]
fn the_simulator_catches_a_retried_unfenced_write() {
    let report = run_seeds(0, SEEDS, 2);
    let Some(first) = report.failures.first() else {
        panic!("{SEEDS} seeds ran against the unfenced canary core and no checker fired");
    };
    let failure = first
        .failure
        .as_ref()
        .expect("a failing seed carries its failure");
    assert_eq!(
        failure.checker,
        Checker::ReferenceDisk,
        "the canary lets a stale copy land over newer data: {first}"
    );
    assert!(
        failure.detail.contains("after the write completed"),
        "{failure}"
    );
    let replay = run_seed(first.seed, true);
    assert_eq!(replay.failure.as_ref(), Some(failure));
    assert_eq!(replay.trace_hash, first.trace_hash);
    println!(
        "unfenced canary caught by {} of {SEEDS} seeds; first: seed {}",
        report.failures.len(),
        first.seed
    );
}
