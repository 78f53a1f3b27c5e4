//! The real clock, for callers outside the simulator: monotonic ns since
//! the first call in this process.

use std::sync::OnceLock;
use std::time::Instant;

/// Monotonic nanoseconds since the first call in this process.
#[inline]
pub fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}
