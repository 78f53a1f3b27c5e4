//! Marginal paths: a path that fails and recovers again and again (a bad
//! cable, a flapping switch port) is held out of use until it has stayed
//! healthy for a recovery time, instead of being reinstated by every good
//! probe and failing the next I/O again.
//!
//! This module is pure policy: time comes in as `now_ns`.

/// When a path counts as marginal and when it is let back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarginalPolicy {
    /// Path failures within [`MarginalPolicy::window_ns`] that make a path
    /// marginal (at least 2).
    pub failures: u32,
    /// The window the failures are counted in.
    pub window_ns: u64,
    /// How long a marginal path must stay healthy (every probe good)
    /// before it is reinstated.
    pub recovery_ns: u64,
}

impl Default for MarginalPolicy {
    fn default() -> Self {
        MarginalPolicy {
            failures: 3,
            window_ns: 60_000_000_000,
            recovery_ns: 60_000_000_000,
        }
    }
}
