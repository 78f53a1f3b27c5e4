//! The invariants: what a run asserts, and how a broken one reads.
//!
//! Each [`Invariant`] is one promise of mpio's fault model (see
//! `docs/SIMULATION.md`); the runner evaluates them after every call into
//! the core, at every completion, and at the end of the run.

use serde::Serialize;
use std::fmt;

/// One promise the simulator checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Invariant {
    /// A read returned data no write could have left there (the reference
    /// disk), or verification found a block that differs between paths.
    ReferenceDisk,
    /// An I/O completed twice, on the wrong queue, or was never submitted.
    ExactlyOnce,
    /// An I/O failed with a path-class error (`NoPath`, `NoPathTimeout`,
    /// `RetryLimit`) while the map had a usable path, or a valid request
    /// was refused as invalid, or an invalid one was not.
    FailedWhileUsable,
    /// An I/O failed with a target error the storage never gave for it.
    UnexplainedTargetError,
    /// The map failed a path that reported no path error and held no
    /// attempt past the I/O timeout (a target error must not fail a path).
    SpuriousPathFailure,
    /// A path reported a path error for an I/O and the map did not fail
    /// it (a path error fails the path, as dm's `fail_path` on error).
    IgnoredPathError,
    /// An I/O took longer than its bound (see the runner's `latency_bound_ns`).
    Latency,
    /// A counter (a path's in-flight count or bytes, a queue's in-flight
    /// or waiting count, a transport's held attempts) disagrees with the
    /// ground truth, or is not back to zero at the end.
    Counters,
    /// After the faults stopped, an I/O did not finish within the bound;
    /// or a queue kept I/O waiting for a path while the map had a route.
    Liveness,
    /// The core broke the transport contract (aborted an attempt before
    /// its timeout, or sent an out-of-range request down a path).
    TransportContract,
    /// The final pass could not read a block back through a healthy path.
    Verification,
    /// The core panicked.
    Panic,
    /// The simulator itself misused the core (a bug in the simulator).
    Harness,
}

impl Invariant {
    /// The invariant's name, as printed.
    pub fn name(self) -> &'static str {
        match self {
            Invariant::ReferenceDisk => "reference-disk",
            Invariant::ExactlyOnce => "exactly-once",
            Invariant::FailedWhileUsable => "failed-while-usable",
            Invariant::UnexplainedTargetError => "unexplained-target-error",
            Invariant::SpuriousPathFailure => "spurious-path-failure",
            Invariant::IgnoredPathError => "ignored-path-error",
            Invariant::Latency => "latency",
            Invariant::Counters => "counters",
            Invariant::Liveness => "liveness",
            Invariant::TransportContract => "transport-contract",
            Invariant::Verification => "verification",
            Invariant::Panic => "panic",
            Invariant::Harness => "harness",
        }
    }
}

/// An invariant that broke, with what was seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// Which promise broke.
    pub invariant: Invariant,
    /// What exactly was seen.
    pub detail: String,
}

impl Failure {
    /// A failure of `invariant`.
    pub fn new(invariant: Invariant, detail: impl Into<String>) -> Self {
        Failure {
            invariant,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.invariant.name(), self.detail)
    }
}
