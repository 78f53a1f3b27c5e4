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
/// optimized path is usable, and never the others.
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
    /// Inaccessible (ANA inaccessible or persistent loss, ALUA offline):
    /// must not carry I/O.
    Inaccessible,
    /// Changing state (ANA change, ALUA transitioning): must not carry
    /// I/O until it settles.
    Transitioning,
}

impl AccessState {
    /// Every state, best first.
    pub const ALL: [AccessState; 6] = [
        AccessState::Optimized,
        AccessState::NonOptimized,
        AccessState::Standby,
        AccessState::Unavailable,
        AccessState::Inaccessible,
        AccessState::Transitioning,
    ];

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
            AccessState::Inaccessible => "inaccessible",
            AccessState::Transitioning => "transitioning",
        }
    }

    /// Parses [`AccessState::as_str`]'s words.
    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == word)
    }

    /// The state of a SCSI path from the words of its sysfs
    /// `device/access_state` (`scsi_dh_alua`'s names); `None` for a word
    /// that names no state (`unknown`, or a handler that is not ALUA).
    /// `lba-dependent` carries I/O to some blocks only: taken as
    /// non-optimized, as multipath-tools' `alua` prioritizer ranks it
    /// below active/non-optimized but above standby.
    pub fn from_alua(word: &str) -> Option<Self> {
        Some(match word.trim() {
            "active/optimized" => AccessState::Optimized,
            "active/non-optimized" | "lba-dependent" => AccessState::NonOptimized,
            "standby" => AccessState::Standby,
            "unavailable" => AccessState::Unavailable,
            "offline" => AccessState::Inaccessible,
            "transitioning" => AccessState::Transitioning,
            _ => return None,
        })
    }

    /// The state of an NVMe ANA group from its ANA log page descriptor's
    /// state byte (NVMe base spec, ANA state); `None` for a reserved code.
    pub fn from_ana_code(code: u8) -> Option<Self> {
        Some(match code & 0x0f {
            0x1 => AccessState::Optimized,
            0x2 => AccessState::NonOptimized,
            0x3 | 0x4 => AccessState::Inaccessible,
            0xf => AccessState::Transitioning,
            _ => return None,
        })
    }

    /// The state of an NVMe path from the kernel's words for ANA states
    /// (sysfs `ana_state` with native multipath on); `None` for others.
    pub fn from_ana_word(word: &str) -> Option<Self> {
        Some(match word.trim() {
            "optimized" => AccessState::Optimized,
            "non-optimized" => AccessState::NonOptimized,
            "inaccessible" | "persistent-loss" => AccessState::Inaccessible,
            "change" => AccessState::Transitioning,
            _ => return None,
        })
    }

    /// multipath-tools' `alua`/`ana` prioritizer value of the state, for
    /// `group_by_prio`: higher is better.
    pub fn prio(self) -> u32 {
        match self {
            AccessState::Optimized => 50,
            AccessState::NonOptimized => 10,
            AccessState::Standby => 1,
            AccessState::Unavailable | AccessState::Inaccessible | AccessState::Transitioning => 0,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_words_and_codes_name_states() {
        for state in AccessState::ALL {
            assert_eq!(AccessState::parse(state.as_str()), Some(state));
        }
        assert_eq!(
            AccessState::from_alua("active/optimized\n"),
            Some(AccessState::Optimized)
        );
        assert_eq!(
            AccessState::from_alua("active/non-optimized"),
            Some(AccessState::NonOptimized)
        );
        assert_eq!(
            AccessState::from_alua("standby"),
            Some(AccessState::Standby)
        );
        assert_eq!(AccessState::from_alua("unknown"), None);
        assert_eq!(AccessState::from_ana_code(1), Some(AccessState::Optimized));
        assert_eq!(
            AccessState::from_ana_code(2),
            Some(AccessState::NonOptimized)
        );
        assert_eq!(
            AccessState::from_ana_code(3),
            Some(AccessState::Inaccessible)
        );
        assert_eq!(AccessState::from_ana_code(0), None);
        assert_eq!(
            AccessState::from_ana_word("persistent-loss"),
            Some(AccessState::Inaccessible)
        );
        assert_eq!(
            AccessState::from_ana_word("change\n"),
            Some(AccessState::Transitioning)
        );
        let usable: Vec<_> = AccessState::ALL
            .into_iter()
            .filter(|state| state.carries_io())
            .collect();
        assert_eq!(usable, [AccessState::Optimized, AccessState::NonOptimized]);
        assert!(AccessState::Optimized.prio() > AccessState::NonOptimized.prio());
        assert!(AccessState::NonOptimized.prio() > AccessState::Standby.prio());
    }
}
