//! The checkers: what a run asserts, and how a failed assertion reads.
//!
//! Each [`Checker`] is one promise of mpio's fault model (see
//! `docs/SIMULATION.md`); the runner evaluates them after every call into
//! the core, at every completion, and at the end of the run.

use serde::Serialize;
use std::fmt;

/// One promise the simulator checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Checker {
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

impl Checker {
    /// The checker's name, as printed.
    pub fn name(self) -> &'static str {
        match self {
            Checker::ReferenceDisk => "reference-disk",
            Checker::ExactlyOnce => "exactly-once",
            Checker::FailedWhileUsable => "failed-while-usable",
            Checker::UnexplainedTargetError => "unexplained-target-error",
            Checker::SpuriousPathFailure => "spurious-path-failure",
            Checker::IgnoredPathError => "ignored-path-error",
            Checker::Latency => "latency",
            Checker::Counters => "counters",
            Checker::Liveness => "liveness",
            Checker::TransportContract => "transport-contract",
            Checker::Verification => "verification",
            Checker::Panic => "panic",
            Checker::Harness => "harness",
        }
    }
}

/// A checker that fired, with what it saw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// Which promise broke.
    pub checker: Checker,
    /// What exactly was seen.
    pub detail: String,
}

impl Failure {
    /// A failure of `checker`.
    pub fn new(checker: Checker, detail: impl Into<String>) -> Self {
        Failure {
            checker,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.checker.name(), self.detail)
    }
}
