//! One event loop's spare data buffers, so that steady-state I/O reuses
//! buffers instead of allocating one per request.
//!
//! # Bounds
//! At most [`MAX_POOLED`] buffers are kept, none larger than
//! [`MAX_POOLED_BYTES`]: a burst of 32 MiB requests does not pin
//! gigabytes after it ends.

use mpio_core::io::Buffer;

/// Most spare buffers kept.
pub const MAX_POOLED: usize = 1024;
/// Largest buffer kept (1 MiB); bigger ones are freed on return.
pub const MAX_POOLED_BYTES: usize = 1 << 20;

/// A stack of spare buffers.
#[derive(Debug, Default)]
pub struct BufferPool {
    spare: Vec<Buffer>,
}

impl BufferPool {
    /// A buffer of `len` bytes: a spare one resized (which allocates only
    /// if it must grow), or a new one. Its contents are unspecified.
    pub fn take(&mut self, len: usize) -> Buffer {
        match self.spare.pop() {
            Some(mut buffer) => {
                buffer.resize(len);
                buffer
            }
            None => Buffer::zeroed(len),
        }
    }

    /// Gives `buffer` back for reuse (or frees it, past the bounds).
    pub fn give(&mut self, buffer: Buffer) {
        if buffer.capacity() > 0
            && buffer.capacity() <= MAX_POOLED_BYTES
            && self.spare.len() < MAX_POOLED
        {
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
}
