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

mod canary_support;

use mpio_sim::checker::Checker;

/// Seeds within which the canary must be caught (seed 47 does).
const SEEDS: u64 = 100;

#[test]
fn the_simulator_catches_a_retried_unfenced_write() {
    let first = canary_support::first_caught(
        "unfenced canary",
        SEEDS,
        Checker::ReferenceDisk,
        "the canary lets a stale copy land over newer data",
    );
    let failure = first.failure.as_ref().unwrap();
    assert!(
        failure.detail.contains("after the write completed"),
        "{failure}"
    );
}
