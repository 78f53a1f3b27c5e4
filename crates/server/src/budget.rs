//! The server's bound on buffered request and reply bytes, over every
//! connection of every event loop: what one export can make the process
//! hold, whatever its clients do (once, 128 connections pipelining
//! 32 MiB reads whose replies they never read could pin 12 GiB).
//!
//! # Rule
//! A READ or WRITE's buffer is reserved before its header is consumed.
//! A connection holding nothing may always take one request of at most
//! `FIRST_REQUEST_BYTES` outside the budget (so no set of other
//! connections can stop a client that waits for each reply, as most
//! do); every other buffer comes from the shared budget of
//! [`crate::ServerConfig::max_buffered_bytes`], and a request that does
//! not fit waits, unparsed and with nothing behind it read, until replies
//! going out free room (its connection tries again every
//! `crate::event_loop::STARVED_RETRY`).
//! The bytes a request took from the budget travel with it (`Hold`)
//! and go back when its reply has left, or when it is dropped.
//!
//! # Bound
//! Buffers held ≤ `max_connections` × `FIRST_REQUEST_BYTES` +
//! `max_buffered_bytes`, plus each connection's input buffer
//! ([`crate::connection::INPUT_LEN`]) and each loop's spare buffers
//! (`crate::pool::MAX_POOL_TOTAL_BYTES`).

use std::sync::atomic::{AtomicUsize, Ordering};

/// Largest request a connection holding nothing may take outside the
/// budget (1 MiB).
pub(crate) const FIRST_REQUEST_BYTES: usize = 1 << 20;

/// The budget's default: an eighth of the host's memory, between 256 MiB
/// and 16 GiB (256 MiB where the host's memory is unknown).
pub fn default_max_buffered_bytes() -> usize {
    let host = mpio_transport::host::memory_bytes().unwrap_or(0);
    let eighth = usize::try_from(host / 8).unwrap_or(usize::MAX);
    eighth.clamp(256 << 20, 16 << 30)
}

/// What one request holds: its buffer's bytes, and how many of them came
/// from the shared budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Hold {
    /// The request's buffer bytes (counted against its connection's
    /// bound).
    pub bytes: usize,
    /// Of those, the bytes taken from the [`Budget`].
    pub budgeted: usize,
}

/// The shared budget of buffered bytes. See the module docs.
#[derive(Debug)]
pub(crate) struct Budget {
    used: AtomicUsize,
    limit: usize,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Budget {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    /// The [`Hold`] of a `bytes` buffer for a connection holding
    /// `held` bytes now, its budgeted part taken; `None` if the budget
    /// lacks room (nothing taken).
    pub(crate) fn reserve(&self, held: usize, bytes: usize) -> Option<Hold> {
        if held == 0 && bytes <= FIRST_REQUEST_BYTES {
            return Some(Hold { bytes, budgeted: 0 });
        }
        // Relaxed: the count bounds memory; it orders no other data (the
        // buffers travel with their requests, inside one loop).
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .ok()
            .map(|_| Hold {
                bytes,
                budgeted: bytes,
            })
    }

    /// Gives back what `hold` took.
    pub(crate) fn release(&self, hold: Hold) {
        if hold.budgeted > 0 {
            // Relaxed: as in `reserve`.
            self.used.fetch_sub(hold.budgeted, Ordering::Relaxed);
        }
    }

    /// Bytes taken from the budget now.
    pub(crate) fn used(&self) -> usize {
        // Relaxed: a gauge.
        self.used.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_small_request_is_free_and_the_rest_bounded() {
        let budget = Budget::new(8 << 20);
        let free = budget.reserve(0, FIRST_REQUEST_BYTES).unwrap();
        assert_eq!(free.budgeted, 0);
        // Past the first request, or past its size: from the budget.
        let second = budget.reserve(4096, 4 << 20).unwrap();
        let big = budget.reserve(0, 4 << 20).unwrap();
        assert_eq!(budget.used(), 8 << 20);
        assert_eq!(budget.reserve(4096, 1), None, "the budget is full");
        assert_eq!(budget.reserve(0, 4096).map(|hold| hold.budgeted), Some(0));
        budget.release(second);
        budget.release(free);
        assert_eq!(budget.used(), 4 << 20);
        budget.release(big);
        assert_eq!(budget.used(), 0);
    }
}
