//! [`AnyQueue`]: one thread's queue to a path of any transport, so one
//! map can mix transports with one `match` per I/O and no `dyn` call;
//! and what it says about the thread resting ([`AnyQueue::rest`]).

use crate::file::FileQueue;
use crate::memory::MemoryQueue;
use crate::nbd::NbdQueue;
use crate::null::NullQueue;
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use mpio_io_loop::Rest;

/// A per-thread queue to a path of any transport.
#[derive(Debug)]
pub enum AnyQueue {
    /// A `null` path.
    Null(NullQueue),
    /// A port of a memory disk.
    Memory(MemoryQueue),
    /// A file or block device.
    File(FileQueue),
    /// A connection to an NBD server.
    Nbd(NbdQueue),
}

impl AnyQueue {
    /// Whether a thread may sleep on its own ring instead of polling this
    /// queue ([`Rest`]). A file path on the thread's ring completes there;
    /// the other transports complete where only a poll sees it.
    pub fn rest(&mut self) -> Rest {
        match self {
            AnyQueue::File(queue) => queue.rest(),
            AnyQueue::Null(_) | AnyQueue::Memory(_) | AnyQueue::Nbd(_) => Rest::Poll,
        }
    }
}

impl PathQueue for AnyQueue {
    // Always inlined into the core's dispatch: one jump on the transport's
    // kind instead of a call that moves the I/O twice.
    #[inline(always)]
    fn submit(&mut self, io: PathIo, now_ns: u64) {
        match self {
            AnyQueue::Null(queue) => queue.submit(io, now_ns),
            AnyQueue::Memory(queue) => queue.submit(io, now_ns),
            AnyQueue::File(queue) => queue.submit(io, now_ns),
            AnyQueue::Nbd(queue) => queue.submit(io, now_ns),
        }
    }

    #[inline]
    fn poll(&mut self, now_ns: u64, completions: &mut Vec<PathCompletion>) {
        match self {
            AnyQueue::Null(queue) => queue.poll(now_ns, completions),
            AnyQueue::Memory(queue) => queue.poll(now_ns, completions),
            AnyQueue::File(queue) => queue.poll(now_ns, completions),
            AnyQueue::Nbd(queue) => queue.poll(now_ns, completions),
        }
    }

    fn abort(&mut self, tag: u64) -> Option<PathIo> {
        match self {
            AnyQueue::Null(queue) => queue.abort(tag),
            AnyQueue::Memory(queue) => queue.abort(tag),
            AnyQueue::File(queue) => queue.abort(tag),
            AnyQueue::Nbd(queue) => queue.abort(tag),
        }
    }

    fn abandon(&mut self, tag: u64) -> Option<PathIo> {
        match self {
            AnyQueue::Null(queue) => queue.abandon(tag),
            AnyQueue::Memory(queue) => queue.abandon(tag),
            AnyQueue::File(queue) => queue.abandon(tag),
            AnyQueue::Nbd(queue) => queue.abandon(tag),
        }
    }
}
