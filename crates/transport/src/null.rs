//! The `null` transport: no data, completion at once or after a fixed
//! latency (null_blk with `completion_nsec`). Reads leave the buffer as it
//! was; writes go nowhere (so FUA has nothing to make durable). It is the
//! baseline of `mpio bench`. Nothing lands anywhere, so nothing needs
//! fencing: `abort` takes back anything not yet completed.

use mpio_core::io::PathOutcome;
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use std::collections::VecDeque;

/// One thread's queue to a null path.
///
/// # Invariants
/// `pending` is ordered by due time: every I/O gets the same latency and
/// the caller's clock never goes back.
#[derive(Debug)]
pub struct NullQueue {
    latency_ns: u64,
    pending: VecDeque<(u64, PathIo)>,
}

impl NullQueue {
    /// A queue whose I/Os complete `latency_ns` after submission (0: at the
    /// next poll), with room for `depth` I/Os before it allocates.
    pub fn new(latency_ns: u64, depth: usize) -> Self {
        NullQueue {
            latency_ns,
            pending: VecDeque::with_capacity(depth),
        }
    }
}

impl PathQueue for NullQueue {
    #[inline]
    fn submit(&mut self, io: PathIo, now_ns: u64) {
        self.pending
            .push_back((now_ns.saturating_add(self.latency_ns), io));
    }

    #[inline]
    fn poll(&mut self, now_ns: u64, completions: &mut Vec<PathCompletion>) {
        while let Some((due_ns, _)) = self.pending.front() {
            if *due_ns > now_ns {
                break;
            }
            let Some((_, io)) = self.pending.pop_front() else {
                break;
            };
            completions.push(PathCompletion {
                tag: io.tag,
                buf: io.buf,
                outcome: PathOutcome::Ok,
            });
        }
    }

    fn abort(&mut self, tag: u64) -> Option<PathIo> {
        let position = self.pending.iter().position(|(_, io)| io.tag == tag)?;
        self.pending.remove(position).map(|(_, io)| io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpio_core::io::Buffer;

    fn io(tag: u64) -> PathIo {
        PathIo::read(tag, 0, Buffer::zeroed(512))
    }

    #[test]
    fn completes_after_latency_in_order() {
        let mut queue = NullQueue::new(100, 4);
        queue.submit(io(1), 0);
        queue.submit(io(2), 50);
        let mut done = Vec::new();
        queue.poll(99, &mut done);
        assert!(done.is_empty());
        queue.poll(149, &mut done);
        assert_eq!(done.iter().map(|c| c.tag).collect::<Vec<_>>(), [1]);
        queue.poll(150, &mut done);
        assert_eq!(done.iter().map(|c| c.tag).collect::<Vec<_>>(), [1, 2]);
    }

    #[test]
    fn aborts_pending() {
        let mut queue = NullQueue::new(100, 4);
        queue.submit(io(1), 0);
        assert_eq!(queue.abort(1).map(|io| io.tag), Some(1));
        assert!(queue.abort(1).is_none());
        let mut done = Vec::new();
        queue.poll(1000, &mut done);
        assert!(done.is_empty());
    }
}
