//! mpio's deterministic simulator (FoundationDB's simulation, TigerBeetle's
//! VOPR): the real core — [`mpio_core::map::Map`], [`mpio_core::queue::Queue`],
//! every selector, the message verbs — driven under a simulated clock, over
//! simulated paths, by one seeded schedule of workload and faults, and
//! checked against a reference disk.
//!
//! One seed fixes everything: the map drawn ([`scenario`]), the fault
//! schedule ([`schedule`]), the interleaving of the simulated I/O threads
//! and every latency and write landing in the simulated paths
//! ([`transport`]). A failing seed replays exactly, event for event.
//!
//! # Fault model
//! What mpio promises to survive, and what it does not, is written out in
//! `docs/SIMULATION.md`; [`invariants::Invariant`] lists the promises checked,
//! [`model`] the write semantics, [`completion`] when an I/O may fail.
//!
//! # Entry points
//! [`run_seed`] runs one seed; [`run_seeds`] runs a range of seeds on
//! several threads (each seed still runs on one).

#![warn(unreachable_pub)]

pub mod batch;
pub mod completion;
pub mod data;
pub mod invariants;
pub mod model;
mod owner;
mod path_checker;
pub mod rng;
mod runner;
pub mod scenario;
pub mod schedule;
pub mod seed;
pub mod trace;
pub mod transport;

pub use batch::{run_seeds, BatchReport};
pub use seed::{run_seed, SeedReport};
