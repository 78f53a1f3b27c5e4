//! Paths: their access state (ALUA/ANA), their health, and the per-path
//! counters that I/O threads share.
//!
//! # Concurrency
//! [`PathShared`] is the only mutable state that I/O threads share on the
//! fast path. Each path's record sits on its own cache lines so that two
//! threads busy on two different paths never write the same line.
//! Health changes (`failed`, `fail_count`) are written only by the map's
//! control code under its control lock; I/O threads read them lock-free to
//! skip work on paths already failed.

use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use serde::Serialize;

/// ALUA / ANA access state of a path.
///
/// Selectors use `Optimized` paths first, `NonOptimized` only when no
/// optimized path is usable, and never the other two.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccessState {
    /// Active/optimized: the preferred route.
    #[default]
    Optimized,
    /// Active/non-optimized: usable, but slower (the other controller).
    NonOptimized,
    /// Standby: must not carry I/O.
    Standby,
    /// Unavailable: must not carry I/O.
    Unavailable,
}

impl AccessState {
    /// True for the states that may carry I/O.
    pub fn carries_io(self) -> bool {
        matches!(self, AccessState::Optimized | AccessState::NonOptimized)
    }

    /// The word used in status output and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessState::Optimized => "optimized",
            AccessState::NonOptimized => "non-optimized",
            AccessState::Standby => "standby",
            AccessState::Unavailable => "unavailable",
        }
    }

    /// Parses [`AccessState::as_str`]'s words.
    pub fn parse(word: &str) -> Option<Self> {
        [
            AccessState::Optimized,
            AccessState::NonOptimized,
            AccessState::Standby,
            AccessState::Unavailable,
        ]
        .into_iter()
        .find(|state| state.as_str() == word)
    }
}

/// Counters and health of one path, shared by every I/O thread.
///
/// # Invariants
/// With no I/O in flight on the path, `in_flight == 0` and
/// `in_flight_bytes == 0`: every `start_io` is matched by one `end_io`.
#[derive(Debug, Default)]
#[repr(align(128))] // two cache lines: adjacent-line prefetch must not couple paths
pub struct PathShared {
    /// I/Os submitted to the path and not yet completed.
    pub in_flight: AtomicU32,
    /// Bytes of the I/Os in `in_flight`.
    pub in_flight_bytes: AtomicU64,
    /// Exponentially weighted service time in ns, scaled by
    /// historical-service-time; 0 until the first completion.
    pub service_time_ns_ewma: AtomicU64,
    /// Time (ns, the caller's clock) of the path's last completion, for
    /// historical-service-time's stale-path probing.
    pub last_completion_ns: AtomicU64,
    failed: AtomicBool,
    fail_count: AtomicU32,
}

impl PathShared {
    /// Counts an I/O of `bytes` as started on this path.
    #[inline]
    pub fn start_io(&self, bytes: u64) {
        // Relaxed: these counters only steer load; a stale value costs
        // balance, never correctness, and no other data is published
        // through them.
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.in_flight_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts an I/O of `bytes` started with [`PathShared::start_io`] as done.
    #[inline]
    pub fn end_io(&self, bytes: u64) {
        // Relaxed: as in `start_io`.
        let previous = self.in_flight.fetch_sub(1, Ordering::Relaxed);
        debug_assert!(previous > 0, "end_io without start_io");
        self.in_flight_bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// I/Os in flight on the path now.
    #[inline]
    pub fn in_flight(&self) -> u32 {
        // Relaxed: advisory, see `start_io`.
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Bytes in flight on the path now.
    #[inline]
    pub fn in_flight_bytes(&self) -> u64 {
        // Relaxed: advisory, see `start_io`.
        self.in_flight_bytes.load(Ordering::Relaxed)
    }

    /// True once the path has been failed and not yet reinstated.
    #[inline]
    pub fn is_failed(&self) -> bool {
        // Acquire pairs with the Release in `set_failed`: a thread that sees
        // the path failed also sees the snapshot generation bump that the
        // control code made before it (`Map::publish` sets the flag last).
        self.failed.load(Ordering::Acquire)
    }

    /// How many times the path has been failed.
    pub fn fail_count(&self) -> u32 {
        // Relaxed: a statistic for status output.
        self.fail_count.load(Ordering::Relaxed)
    }

    /// Marks the path failed (counting it) or reinstated. Control code only,
    /// under the map's control lock; returns false if nothing changed.
    pub(crate) fn set_failed(&self, failed: bool) -> bool {
        if self.failed.load(Ordering::Relaxed) == failed {
            return false;
        }
        if failed {
            // Relaxed: statistic; the lock orders writers.
            self.fail_count.fetch_add(1, Ordering::Relaxed);
        }
        // Release: see `is_failed`.
        self.failed.store(failed, Ordering::Release);
        true
    }
}
