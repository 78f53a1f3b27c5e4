//! mpio's deterministic simulator (FoundationDB's simulation, TigerBeetle's
//! VOPR): the real core — [`mpio_core::map::Map`], [`mpio_core::queue::Queue`],
//! every selector, the message verbs — driven under a simulated clock, over
//! simulated paths, by one seeded schedule of workload and faults, and
//! checked against a reference disk.
//!
//! One seed fixes everything: the map drawn (`src/scenario.rs`), the fault
//! schedule (`src/schedule.rs`), the interleaving of the simulated I/O threads
//! and every latency and write landing in the simulated paths
//! (`src/transport.rs`). A failing seed replays exactly, event for event.
//!
//! # Fault model
//! What mpio promises to survive, and what it does not, is written out in
//! `docs/SIMULATION.md`; [`Invariant`] lists the promises checked,
//! `src/model.rs` the write semantics, `src/completion.rs` when an I/O may fail.
//!
//! # Entry points
//! [`run_seed`] runs one seed; [`run_seeds`] runs a range of seeds on
//! several threads (each seed still runs on one).

#![warn(unreachable_pub)]

mod batch;
mod completion;
mod data;
mod invariants;
mod model;
mod owner;
mod path_checker;
mod rng;
mod runner;
mod scenario;
mod schedule;
mod seed;
mod trace;
mod transport;

pub use batch::{run_seeds, BatchReport};
pub use invariants::Invariant;
pub use seed::{run_seed, SeedReport};
pub use trace::Trace;
pub use transport::{Mode, SimPathQueue, World, WorldSetup};
