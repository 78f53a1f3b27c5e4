//! Zero copy's bookkeeping: each I/O thread's ring has a sparse table of
//! [`BUFFER_SLOTS`] io_uring buffers, where the kernel registers a
//! zero-copy device's requests (`UBLK_F_AUTO_BUF_REG`), and the engine
//! hands each such device's queue on that thread a [`BufferRange`]: one
//! slot per tag, the tag's own, so the index a fetch names is never
//! another request's.
//!
//! The thread empties a tag's slot as the tag ends (`Ring::clear_buffer`:
//! a request whose pages stayed registered would never complete), so a
//! range goes back to its thread's free list, when its queue is gone,
//! with every slot empty.

use std::sync::{Arc, Mutex};

/// Buffers in each thread's table: io_uring's most
/// (`IORING_MAX_REG_BUFFERS`).
pub(crate) const BUFFER_SLOTS: u32 = 1 << 14;

/// One thread's table as ranges of `depth` slots.
#[derive(Debug)]
pub(crate) struct BufferRanges {
    /// First slots of the ranges no queue holds.
    free: Mutex<Vec<u16>>,
}

/// A queue's slots: `first..first + depth`; back to the free list when
/// dropped.
#[derive(Debug)]
pub(crate) struct BufferRange {
    ranges: Arc<BufferRanges>,
    first: u16,
}

impl BufferRanges {
    /// A table of [`BUFFER_SLOTS`] cut into ranges of `depth`.
    pub(crate) fn new(depth: u16) -> Arc<BufferRanges> {
        let count = BUFFER_SLOTS / u32::from(depth.max(1));
        Arc::new(BufferRanges {
            free: Mutex::new(
                (0..count)
                    .rev()
                    .map(|range| (range * u32::from(depth)) as u16)
                    .collect(),
            ),
        })
    }

    /// A free range, if one is left.
    pub(crate) fn take(self: &Arc<Self>) -> Option<BufferRange> {
        let first = self.free.lock().ok()?.pop()?;
        Some(BufferRange {
            ranges: Arc::clone(self),
            first,
        })
    }
}

impl BufferRange {
    /// The slot of `tag`.
    pub(crate) fn slot(&self, tag: u16) -> u16 {
        self.first + tag
    }
}

impl Drop for BufferRange {
    fn drop(&mut self) {
        if let Ok(mut free) = self.ranges.free.lock() {
            free.push(self.first);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_table_without_overlap_and_come_back() {
        let ranges = BufferRanges::new(128);
        let taken: Vec<BufferRange> = std::iter::from_fn(|| ranges.take()).collect();
        assert_eq!(taken.len(), (BUFFER_SLOTS / 128) as usize);
        let mut slots: Vec<u32> = taken
            .iter()
            .flat_map(|range| (0..128).map(|tag| u32::from(range.slot(tag))))
            .collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), BUFFER_SLOTS as usize, "every slot, once");
        drop(taken);
        assert!(ranges.take().is_some(), "a dropped range is free again");
    }
}
