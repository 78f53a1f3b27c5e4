//! What this crate adds to the core's path checker
//! ([`mpio_core::checker`], which makes every decision: rounds,
//! timeouts, stalls, reinstating and failing paths, failback, marginal
//! paths, reloads): the probes, carried by this crate's transports, and
//! the thread that runs the checkers of every map ([`CheckerPool`]).
//!
//! # Probes
//! A probe goes through the path's own transport, on a queue of depth 1
//! opened from its [`PathHandle`]: a file read through io_uring for
//! `file` paths, an NBD round trip for `nbd` paths (its connect, on a
//! fresh queue, runs in the background and counts against the probe's
//! timeout: nothing in a checker poll waits on a server), a port read for
//! `memory` paths, an immediate answer for `null` paths. A file read the
//! kernel keeps past the timeout, or an NBD connection being severed, is
//! what stalls a path (the core's module docs say what a stall does).
//!
//! # Time
//! A [`CheckerPool`] runs the checkers of every map on one thread with an
//! injected clock, each polled when it said it next has something due
//! (`probe/pool.rs`). [`PooledChecker::path_checks`] gives each path's
//! record with its word, for `show topology`-style output.

use crate::{AnyQueue, Device, DeviceSlot, PathHandle};
use mpio_core::checker::{Checker, CheckerOptions, ProbePath};
use std::sync::Arc;

/// The core's path checker over a [`DeviceSlot`]: [`Checker::on_slot`]
/// follows the slot's reloads; [`Device::checker`] checks a device that
/// is never reloaded.
pub type SlotChecker = Checker<Arc<DeviceSlot>>;

impl ProbePath for PathHandle {
    type Queue = AnyQueue;

    fn open_probe(&self) -> AnyQueue {
        self.open(1, None)
    }

    fn min_block(&self) -> u32 {
        PathHandle::min_block(self)
    }
}

impl Device {
    /// A checker over the device's paths (a map that is never reloaded);
    /// its first round starts at the first poll.
    pub fn checker(&self, options: CheckerOptions) -> SlotChecker {
        SlotChecker::new(Arc::clone(&self.map), self.paths.clone(), options)
    }
}

/// A clock for [`CheckerPool`]: monotonic ns.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

mod pool;
pub use pool::{CheckerPool, PooledChecker};

#[cfg(test)]
mod tests;
