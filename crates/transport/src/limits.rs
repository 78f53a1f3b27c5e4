//! What a path's storage takes, in the terms of a Linux block device's
//! queue limits, and what a whole map takes: every path's limits at
//! once, since any I/O may go down any path.
//!
//! A frontend that is itself a block device (ublk) advertises the map's
//! [`Limits`], and a reload may give it only paths whose limits it
//! already honours ([`Limits::admits`]): the kernel reads a device's
//! limits once, when the disk is made.

use crate::lock;
use std::fmt;
use std::sync::Mutex;

/// A path's or a map's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Every offset and length is a multiple of this many bytes (a power
    /// of two, at least 512).
    pub logical_block: u32,
    /// The storage's own block: smaller writes cost a read-modify-write
    /// (a power of two, at least `logical_block`).
    pub physical_block: u32,
    /// The largest read or write, bytes (`u32::MAX`: no limit of its own).
    pub max_io_bytes: u32,
    /// Discards reach the storage (without, a discard is a hint dropped).
    pub discard: bool,
    /// Write-zeroes is done by the storage (without, the kernel writes
    /// zeroes itself).
    pub write_zeroes: bool,
    /// Completed writes may sit in a cache that a flush empties, so the
    /// device must pass flushes and FUA on.
    pub volatile_cache: bool,
    /// A read's or write's memory starts at a multiple of this many bytes
    /// (a power of two: the queue's `dma_alignment` + 1, `O_DIRECT`'s
    /// memory alignment): what a zero-copy device hands its paths as is.
    pub dma_alignment: u32,
}

impl Limits {
    /// What a path with no limits of its own takes (memory, null).
    pub const ANY: Limits = Limits {
        logical_block: 512,
        physical_block: 512,
        max_io_bytes: u32::MAX,
        discard: true,
        write_zeroes: true,
        volatile_cache: false,
        dma_alignment: 1,
    };

    /// What is assumed of storage whose limits cannot be read (sysfs
    /// missing, an NBD path not yet settled): the largest block a device
    /// may have, no discard or write-zeroes, and a cache to flush.
    pub const UNKNOWN: Limits = Limits {
        logical_block: 4096,
        physical_block: 4096,
        max_io_bytes: u32::MAX,
        discard: false,
        write_zeroes: false,
        volatile_cache: true,
        dma_alignment: 512,
    };

    /// What both `self`'s storage and `other`'s take: the larger blocks,
    /// the smaller I/O, an operation only if both do it, a cache if
    /// either has one, the stricter memory alignment.
    #[must_use]
    pub fn and(self, other: Limits) -> Limits {
        Limits {
            logical_block: self.logical_block.max(other.logical_block),
            physical_block: self.physical_block.max(other.physical_block),
            max_io_bytes: self.max_io_bytes.min(other.max_io_bytes),
            discard: self.discard && other.discard,
            write_zeroes: self.write_zeroes && other.write_zeroes,
            volatile_cache: self.volatile_cache || other.volatile_cache,
            dma_alignment: self.dma_alignment.max(other.dma_alignment),
        }
    }

    /// What every one of `paths` takes; `None` for no paths (nothing is
    /// known of what they take).
    pub(crate) fn of_all(paths: impl IntoIterator<Item = Limits>) -> Option<Limits> {
        paths.into_iter().reduce(Limits::and)
    }

    /// Whether a device advertising `self` may be served by storage
    /// taking `paths`: every I/O the device lets through must suit the
    /// paths, and a cache they have must be one the device flushes.
    ///
    /// # Errors
    /// What `paths` would refuse, in words.
    pub fn admits(&self, paths: &Limits) -> Result<(), LimitsRefused> {
        let refuse = |what: String| Err(LimitsRefused(what));
        if !self.logical_block.is_multiple_of(paths.logical_block) {
            return refuse(format!(
                "the paths take I/O in blocks of {} bytes, the device sends blocks of {}",
                paths.logical_block, self.logical_block
            ));
        }
        if paths.max_io_bytes < self.max_io_bytes {
            return refuse(format!(
                "the paths take I/O of at most {} bytes, the device sends up to {}",
                paths.max_io_bytes, self.max_io_bytes
            ));
        }
        if !self.dma_alignment.is_multiple_of(paths.dma_alignment) {
            return refuse(format!(
                "the paths take memory aligned to {} bytes, the device sends memory aligned to {}",
                paths.dma_alignment, self.dma_alignment
            ));
        }
        if paths.volatile_cache && !self.volatile_cache {
            return refuse(
                "the paths have a volatile write cache and the device sends no flushes".into(),
            );
        }
        Ok(())
    }
}

/// The limits of the block devices serving a map (the kernel fixed them
/// when it made each): what a path that opens or settles after the map
/// was built must take. Devices are added as they start serving.
#[derive(Debug, Default)]
pub(crate) struct ServedAs(Mutex<Vec<Limits>>);

impl ServedAs {
    /// Served as `devices` so far.
    pub(crate) fn new(devices: &[Limits]) -> ServedAs {
        ServedAs(Mutex::new(devices.to_vec()))
    }

    /// A device advertising `limits` now serves the map too.
    pub(crate) fn require(&self, limits: Limits) {
        lock(&self.0).push(limits);
    }

    /// Why a path taking `path` cannot serve behind the devices, if it
    /// cannot.
    pub(crate) fn refusal(&self, path: &Limits) -> Option<String> {
        lock(&self.0)
            .iter()
            .find_map(|device| device.admits(path).err())
            .map(|refused| format!("the map's block device cannot be served by it: {refused}"))
    }
}

/// Why a device cannot be served by some paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitsRefused(pub String);

impl fmt::Display for LimitsRefused {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for LimitsRefused {}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(logical_block: u32, max_io_bytes: u32, volatile_cache: bool) -> Limits {
        Limits {
            logical_block,
            physical_block: 4096,
            max_io_bytes,
            discard: false,
            write_zeroes: true,
            volatile_cache,
            dma_alignment: 512,
        }
    }

    #[test]
    fn a_map_takes_what_every_path_takes() {
        let map = Limits::of_all([disk(512, 1 << 20, false), disk(4096, 128 << 10, true)]).unwrap();
        assert_eq!(map.logical_block, 4096);
        assert_eq!(map.physical_block, 4096);
        assert_eq!(map.max_io_bytes, 128 << 10);
        assert!(!map.discard, "one path cannot discard");
        assert!(map.write_zeroes);
        assert!(map.volatile_cache, "one path has a cache");
        assert_eq!(Limits::of_all([]), None);
    }

    #[test]
    fn a_device_admits_only_paths_that_take_all_it_sends() {
        let device = disk(4096, 128 << 10, true);
        assert_eq!(device.admits(&disk(512, 1 << 20, false)), Ok(()));
        assert_eq!(device.admits(&device), Ok(()));
        let refused = |paths: Limits| device.admits(&paths).unwrap_err().to_string();
        assert!(refused(disk(8192, 1 << 20, true)).contains("blocks of 8192"));
        assert!(refused(disk(4096, 64 << 10, true)).contains("at most 65536"));
        let no_flush = disk(4096, 128 << 10, false);
        assert!(no_flush
            .admits(&disk(4096, 128 << 10, true))
            .unwrap_err()
            .to_string()
            .contains("no flushes"));
    }
}
