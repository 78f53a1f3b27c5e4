//! Paths: their access state (ALUA/ANA) and their health as I/O threads
//! see it.
//!
//! # Concurrency
//! [`PathShared`] is written only by the map's control code under its
//! control lock, when a path fails or returns; I/O threads read it
//! lock-free to skip work on paths already failed. Load counters are not
//! here: each queue keeps its own ([`crate::load`]), so the fast path
//! writes nothing another thread reads on every I/O.

use crate::sync::{AtomicBool, AtomicU32, Ordering};
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

/// Health of one path, shared by every I/O thread.
#[derive(Debug, Default)]
#[repr(align(128))] // two cache lines: adjacent-line prefetch must not couple paths
pub struct PathShared {
    failed: AtomicBool,
    fail_count: AtomicU32,
}

impl PathShared {
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

    /// Sets the failure count, for a map that takes over a path from the
    /// map it replaces. Control code only, under the map's control lock.
    pub(crate) fn restore_fail_count(&self, count: u32) {
        // Relaxed: statistic; the lock orders writers.
        self.fail_count.store(count, Ordering::Relaxed);
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
