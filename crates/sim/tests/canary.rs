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

mod canary_support;

use mpio_sim::Invariant;

/// Seeds within which the canary must be caught.
const SEEDS: u64 = 50;

#[test]
fn the_simulator_catches_the_broken_failover() {
    let first = canary_support::first_caught(
        "canary",
        SEEDS,
        Invariant::FailedWhileUsable,
        "the canary breaks 'no I/O fails while a path is usable'",
    );
    let text = first.to_string();
    assert!(
        text.contains(&format!("replay: mpio sim --seed {}", first.seed)),
        "{text}"
    );
    assert!(text.contains("last 30 events"), "{text}");
}
