//! One path's probe machinery: the probe queue the checker keeps between
//! probes, the buffer, and the probe in flight or stalled (see the
//! [`crate::checker`] module docs for when each happens).
//!
//! # Invariants
//! - `started_ns` is set exactly while a probe is in flight; its tag is
//!   `tag`.
//! - `stalled_tag` is set only while `queue` holds a timed-out probe the
//!   transport could not hand back.

use super::ProbePath;
use crate::io::Buffer;
use crate::queue::{PathCompletion, PathQueue};

/// One path's probe machinery.
#[derive(Debug)]
pub(super) struct Probe<P: ProbePath> {
    pub(super) path: P,
    /// Opened at the first probe, dropped after a failed one.
    pub(super) queue: Option<P::Queue>,
    /// The probe's buffer while no probe is in flight.
    pub(super) buf: Option<Buffer>,
    /// Start of the probe in flight.
    pub(super) started_ns: Option<u64>,
    /// Tag of the probe in flight.
    pub(super) tag: u64,
    /// Tag of a timed-out probe the transport kept (the path is stalled).
    pub(super) stalled_tag: Option<u64>,
    /// Reinstated since the last failback decision.
    pub(super) returned: bool,
}

impl<P: ProbePath> Probe<P> {
    pub(super) fn new(path: &P) -> Self {
        Probe {
            path: path.clone(),
            queue: None,
            buf: None,
            started_ns: None,
            tag: 0,
            stalled_tag: None,
            returned: false,
        }
    }

    /// Gives up the probe of a path a reload removed. Returns the probe if
    /// its transport still holds a probe: it must be polled until that
    /// comes back (a stall), never dropped with it.
    pub(super) fn retire(mut self) -> Option<Self> {
        if self.started_ns.take().is_some() {
            let tag = self.tag;
            let handed_back = self.queue.as_mut().and_then(|queue| queue.abort(tag));
            if handed_back.is_none() && self.queue.is_some() {
                self.stalled_tag = Some(tag);
            }
        }
        (self.stalled_tag.is_some() && self.queue.is_some()).then_some(self)
    }

    /// Polls a stalled probe's queue; true once the probe is back (the
    /// queue is then dropped).
    pub(super) fn poll_stalled(&mut self, now_ns: u64, scratch: &mut Vec<PathCompletion>) -> bool {
        let Some(tag) = self.stalled_tag else {
            return true;
        };
        if let Some(queue) = self.queue.as_mut() {
            queue.poll(now_ns, scratch);
            for completion in scratch.drain(..) {
                if completion.tag == tag {
                    self.buf = Some(completion.buf);
                    self.stalled_tag = None;
                }
            }
        } else {
            self.stalled_tag = None;
        }
        if self.stalled_tag.is_none() {
            self.queue = None;
            return true;
        }
        false
    }
}
