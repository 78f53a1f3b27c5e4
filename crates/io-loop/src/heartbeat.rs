//! [`Heartbeat`]: how a loop's thread shows a watchdog that it still
//! turns.
//!
//! # Contract
//! - The loop's own thread is the only writer: [`Heartbeat::beat`] once
//!   per turn, after its wait, and [`Heartbeat::idle`] just before a wait
//!   that only an event ends (nothing to do until then).
//! - A reader ([`Heartbeat::read`]) takes the loop as alive when the
//!   reading moved since its last one, or when the loop is idle: a thread
//!   waiting for work is not stuck. A loop is stuck when a turn began
//!   and did not end: the reading stands still, not idle.
//! - Per turn this is one load and one store to a line only this thread
//!   writes; nothing allocates.

use std::sync::atomic::{AtomicU64, Ordering};

/// The low bit of the reading: the loop waits for an event.
const IDLE: u64 = 1;

/// One loop's liveness counter. See the module docs.
#[derive(Debug, Default)]
pub struct Heartbeat {
    /// Turns, counted in steps of two; the low bit is [`IDLE`].
    reading: AtomicU64,
}

/// What a [`Heartbeat`] read at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Beat(u64);

impl Heartbeat {
    /// A turn began: the reading moves and the loop is not idle.
    #[inline]
    pub fn beat(&self) {
        // Relaxed: the reading is a liveness count read every few seconds;
        // it orders no other memory, and its only writer is this thread.
        let reading = self.reading.load(Ordering::Relaxed);
        self.reading
            .store((reading & !IDLE).wrapping_add(2), Ordering::Relaxed);
    }

    /// The loop is about to wait for an event with nothing to do.
    #[inline]
    pub fn idle(&self) {
        // Relaxed: as in `beat`.
        let reading = self.reading.load(Ordering::Relaxed);
        self.reading.store(reading | IDLE, Ordering::Relaxed);
    }

    /// The reading now.
    pub fn read(&self) -> Beat {
        // Relaxed: as in `beat`; a stale reading only delays a verdict.
        Beat(self.reading.load(Ordering::Relaxed))
    }
}

impl Beat {
    /// Whether the loop that gave `self` now and `earlier` before was alive
    /// in between: it turned, or it is waiting for work.
    pub fn alive_since(self, earlier: Beat) -> bool {
        self != earlier || self.0 & IDLE != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_or_an_idle_wait_is_alive_and_a_stuck_turn_is_not() {
        let heartbeat = Heartbeat::default();
        let start = heartbeat.read();
        heartbeat.beat();
        let turned = heartbeat.read();
        assert!(turned.alive_since(start));
        // Inside a turn that does not end: the reading stands still.
        assert!(!heartbeat.read().alive_since(turned));
        heartbeat.idle();
        let waiting = heartbeat.read();
        assert!(waiting.alive_since(turned));
        assert!(heartbeat.read().alive_since(waiting));
        heartbeat.beat();
        let woken = heartbeat.read();
        assert!(woken.alive_since(waiting));
        assert!(!heartbeat.read().alive_since(woken));
    }
}
