//! One event loop's spare data buffers, so that steady-state I/O reuses
//! buffers instead of allocating one per request.
//!
//! # Bounds
//! At most [`MAX_POOLED`] buffers are kept, none larger than
//! [`MAX_POOLED_BYTES`], and no more than [`MAX_POOL_TOTAL_BYTES`] in all:
//! a burst of large requests does not pin gigabytes after it ends.

use mpio_core::io::Buffer;

/// Most spare buffers kept.
pub(crate) const MAX_POOLED: usize = 1024;
/// Largest buffer kept (1 MiB); bigger ones are freed on return.
pub(crate) const MAX_POOLED_BYTES: usize = 1 << 20;
/// Most bytes kept over all spare buffers (64 MiB per event loop).
pub(crate) const MAX_POOL_TOTAL_BYTES: usize = 64 << 20;

/// A stack of spare buffers.
#[derive(Debug, Default)]
pub(crate) struct BufferPool {
    spare: Vec<Buffer>,
    /// Capacity of the buffers in `spare`.
    spare_bytes: usize,
}

impl BufferPool {
    /// A buffer of `len` bytes: a spare one resized (which allocates only
    /// if it must grow), or a new one. Its contents are unspecified.
    pub(crate) fn take(&mut self, len: usize) -> Buffer {
        match self.spare.pop() {
            Some(mut buffer) => {
                self.spare_bytes -= buffer.capacity();
                buffer.resize(len);
                buffer
            }
            None => Buffer::zeroed(len),
        }
    }

    /// Gives `buffer` back for reuse (or frees it, past the bounds).
    pub(crate) fn give(&mut self, buffer: Buffer) {
        let capacity = buffer.capacity();
        if capacity > 0
            && capacity <= MAX_POOLED_BYTES
            && self.spare.len() < MAX_POOLED
            && self.spare_bytes + capacity <= MAX_POOL_TOTAL_BYTES
        {
            self.spare_bytes += capacity;
            self.spare.push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_within_bounds() {
        let mut pool = BufferPool::default();
        let buffer = pool.take(4096);
        assert_eq!(buffer.len(), 4096);
        pool.give(buffer);
        let again = pool.take(512);
        assert_eq!((again.len(), again.capacity()), (512, 4096));
        pool.give(again);
        pool.give(Buffer::zeroed(MAX_POOLED_BYTES + 1));
        pool.give(Buffer::empty());
        assert_eq!(pool.spare.len(), 1);
    }

    #[test]
    fn one_burst_pins_at_most_the_total_bound() {
        let mut pool = BufferPool::default();
        for _ in 0..MAX_POOLED {
            pool.give(Buffer::zeroed(MAX_POOLED_BYTES));
        }
        assert!(pool.spare_bytes <= MAX_POOL_TOTAL_BYTES);
        assert_eq!(pool.spare.len(), MAX_POOL_TOTAL_BYTES / MAX_POOLED_BYTES);
        let _ = pool.take(4096);
        assert_eq!(pool.spare_bytes, MAX_POOL_TOTAL_BYTES - MAX_POOLED_BYTES);
    }
}
