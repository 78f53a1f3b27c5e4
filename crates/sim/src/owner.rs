//! Who sends an attempt down a simulated path: a simulated I/O thread's
//! queue, by its index, or the path checker, whose probes go on queues of
//! their own under the index [`PROBE_QUEUE`], which no queue has. The
//! transport keeps its books by this index (probes are not I/O); the
//! trace names it ([`Owner`]: `q3`, or `checker`).

use std::fmt;

/// The queue index that owns the path checker's probes.
pub(crate) const PROBE_QUEUE: usize = usize::MAX;

/// Who sent an attempt, as the trace prints it: a queue, or the path
/// checker's probes.
pub(crate) struct Owner(pub(crate) usize);

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            PROBE_QUEUE => write!(f, "checker"),
            queue => write!(f, "q{queue}"),
        }
    }
}
