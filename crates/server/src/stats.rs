//! Counters the server keeps for tests, logs and (later) metrics.
//!
//! # Concurrency
//! Every counter is a `Relaxed` atomic: each is a tally read on its own
//! for reporting, never used to order other memory, so a reader seeing a
//! slightly stale value costs accuracy of a glance, never correctness.

use std::sync::atomic::{AtomicU64, Ordering};

/// The live counters, shared by the acceptor and every event loop.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) accepted: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) evicted: AtomicU64,
    pub(crate) closed: AtomicU64,
    pub(crate) protocol_errors: AtomicU64,
    pub(crate) requests_refused: AtomicU64,
    pub(crate) requests_completed: AtomicU64,
    pub(crate) replies_dropped: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64) {
        Counters::add_many(counter, 1);
    }

    pub(crate) fn add_many(counter: &AtomicU64, count: u64) {
        counter.fetch_add(count, Ordering::Relaxed);
    }

    /// A snapshot of every counter.
    pub(crate) fn snapshot(&self) -> ServerStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ServerStats {
            connections_accepted: read(&self.accepted),
            connections_refused: read(&self.refused),
            connections_evicted: read(&self.evicted),
            connections_closed: read(&self.closed),
            protocol_errors: read(&self.protocol_errors),
            requests_refused: read(&self.requests_refused),
            requests_completed: read(&self.requests_completed),
            replies_dropped: read(&self.replies_dropped),
        }
    }
}

/// What the server counted since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections handed to an event loop.
    pub connections_accepted: u64,
    /// Connections closed at once because the server held its maximum
    /// and no connection was idle enough to make room.
    pub connections_refused: u64,
    /// Idle connections closed to make room for a new one at the maximum
    /// (`crate::acceptor`).
    pub connections_evicted: u64,
    /// Accepted connections that have since closed.
    pub connections_closed: u64,
    /// Connections closed for breaking the protocol (bad magic, a
    /// truncated message, an oversize write, an unknown export).
    pub protocol_errors: u64,
    /// Requests answered with an error without reaching the map.
    pub requests_refused: u64,
    /// Requests the map completed (successfully or not).
    pub requests_completed: u64,
    /// Completions whose connection was gone (its client vanished).
    pub replies_dropped: u64,
}
