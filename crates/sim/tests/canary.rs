//! The canary: under `--cfg mpio_canary` the core gives up on an I/O at its
//! first path error, even with another path usable (see `Queue::retry`).
//! The simulator must catch that within a few seeds, and report it as the
//! promise it breaks, replayably: a harness that cannot fail proves
//! nothing.
//!
//! Run (its own target dir, so the normal build is not rebuilt):
//!
//! ```text
//! RUSTFLAGS="--cfg mpio_canary" CARGO_TARGET_DIR=target/canary \
//!   cargo test -p mpio-sim --release --test canary
//! ```
//!
//! Without `--cfg mpio_canary` this file compiles to nothing.

#![cfg(mpio_canary)]

use mpio_sim::checker::Checker;
use mpio_sim::{run_seed, run_seeds};

/// Seeds within which the canary must be caught.
const SEEDS: u64 = 50;

#[test]
fn the_simulator_catches_the_broken_failover() {
    let report = run_seeds(0, SEEDS, 2);
    let Some(first) = report.failures.first() else {
        panic!("{SEEDS} seeds ran against the canary core and no checker fired");
    };
    let failure = first
        .failure
        .as_ref()
        .expect("a failing seed carries its failure");
    assert_eq!(
        failure.checker,
        Checker::FailedWhileUsable,
        "the canary breaks 'no I/O fails while a path is usable': {first}"
    );
    let text = first.to_string();
    assert!(
        text.contains(&format!("replay: mpio sim --seed {}", first.seed)),
        "{text}"
    );
    assert!(text.contains("last 30 events"), "{text}");

    // The replay fails the same way, on the same trace.
    let replay = run_seed(first.seed, true);
    assert_eq!(replay.failure.as_ref(), Some(failure));
    assert_eq!(replay.trace_hash, first.trace_hash);
    println!(
        "canary caught by {} of {SEEDS} seeds; first: seed {}",
        report.failures.len(),
        first.seed
    );
}
