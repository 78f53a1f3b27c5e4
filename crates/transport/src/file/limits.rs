//! A file path's [`Limits`]: a block device's from its queue in sysfs,
//! a regular file's from its file system (`statx`).
//!
//! | limit | block device (`/sys/dev/block/M:m/queue/`) | regular file |
//! |---|---|---|
//! | logical block | `logical_block_size` | `O_DIRECT`'s offset alignment (`STATX_DIOALIGN`), else 512 |
//! | physical block | `physical_block_size` | the file system's block (`st_blksize`) |
//! | largest I/O | none: the kernel splits what exceeds `max_sectors_kb` | none |
//! | discard | `discard_max_bytes` > 0 | hole punching (a hint where refused) |
//! | write-zeroes | `write_zeroes_max_bytes` > 0 | `ZERO_RANGE` |
//! | volatile cache | `write_cache` is `write back` | always: data reaches the disk at `fdatasync` |
//! | memory alignment | `dma_alignment` + 1, else 512 | `O_DIRECT`'s memory alignment (`STATX_DIOALIGN`), else 512; 1 without `O_DIRECT` |
//!
//! A partition has no queue of its own: its disk's (`../queue`) holds.
//! What cannot be read is taken at its most careful ([`Limits::UNKNOWN`]):
//! 4096-byte blocks and a volatile cache.

#![allow(unsafe_code)]

use crate::blockdev::read_word;
use crate::limits::Limits;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The limits of `file`, opened with `O_DIRECT` if `direct`.
pub(super) fn limits_of(file: &File, direct: bool) -> Limits {
    let Ok(metadata) = file.metadata() else {
        return Limits::UNKNOWN;
    };
    if metadata.file_type().is_block_device() {
        let (major, minor) = (libc::major(metadata.rdev()), libc::minor(metadata.rdev()));
        block_device_limits(Path::new(&format!("/sys/dev/block/{major}:{minor}")))
    } else {
        let (logical_block, dma_alignment) = if direct {
            dio_align(file).unwrap_or((512, 512))
        } else {
            (512, 1)
        };
        let physical_block = u32::try_from(metadata.blksize()).unwrap_or(4096);
        Limits {
            logical_block,
            physical_block: physical_block.max(logical_block),
            max_io_bytes: u32::MAX,
            discard: true,
            write_zeroes: true,
            volatile_cache: true,
            dma_alignment,
        }
    }
}

/// The limits of the block device whose sysfs directory is `device`.
fn block_device_limits(device: &Path) -> Limits {
    let Some(queue) = queue_dir(device) else {
        return Limits::UNKNOWN;
    };
    let number = |name: &str| -> Option<u64> { read_word(&queue.join(name))?.parse().ok() };
    let block = |name: &str| {
        number(name)
            .and_then(|bytes| u32::try_from(bytes).ok())
            .filter(|bytes| bytes.is_power_of_two() && *bytes >= 512)
    };
    let logical_block = block("logical_block_size").unwrap_or(Limits::UNKNOWN.logical_block);
    let physical_block =
        block("physical_block_size").map_or(logical_block, |physical| physical.max(logical_block));
    let volatile_cache =
        read_word(&queue.join("write_cache")).is_none_or(|mode| mode != "write through");
    let dma_alignment = number("dma_alignment")
        .and_then(|mask| u32::try_from(mask + 1).ok())
        .filter(|bytes| bytes.is_power_of_two())
        .unwrap_or(Limits::UNKNOWN.dma_alignment);
    Limits {
        logical_block,
        physical_block,
        max_io_bytes: u32::MAX,
        discard: number("discard_max_bytes").is_some_and(|bytes| bytes > 0),
        write_zeroes: number("write_zeroes_max_bytes").is_some_and(|bytes| bytes > 0),
        volatile_cache,
        dma_alignment,
    }
}

/// The queue directory of `device`: its own, or its disk's for a
/// partition.
fn queue_dir(device: &Path) -> Option<PathBuf> {
    [device.join("queue"), device.join("../queue")]
        .into_iter()
        .find(|queue| queue.is_dir())
}

/// The alignments `O_DIRECT` asks of offsets in `file` and of memory,
/// where the kernel says (Linux 6.1 and later).
fn dio_align(file: &File) -> Option<(u32, u32)> {
    // SAFETY: all-zero is a valid `statx` (plain integers).
    let mut status: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open, the empty path with AT_EMPTY_PATH
    // names it, and `status` is a valid, writable statx.
    let result = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut status,
        )
    };
    let (offset, memory) = (status.stx_dio_offset_align, status.stx_dio_mem_align);
    (result == 0
        && status.stx_mask & libc::STATX_DIOALIGN != 0
        && offset.is_power_of_two()
        && memory.is_power_of_two())
    .then_some((offset.max(512), memory))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, value: &str) {
        std::fs::write(dir.join(name), value).unwrap();
    }

    /// A sysfs block device directory with a queue of the given values.
    fn fake_device(root: &Path, values: &[(&str, &str)]) -> PathBuf {
        let device = root.join("8:16");
        std::fs::create_dir_all(device.join("queue")).unwrap();
        for (name, value) in values {
            write(&device.join("queue"), name, value);
        }
        device
    }

    #[test]
    fn a_block_device_takes_what_its_queue_says() {
        let root = tempfile::tempdir().unwrap();
        let device = fake_device(
            root.path(),
            &[
                ("logical_block_size", "4096\n"),
                ("physical_block_size", "4096\n"),
                ("discard_max_bytes", "0\n"),
                ("write_zeroes_max_bytes", "1048576\n"),
                ("write_cache", "write through\n"),
                ("dma_alignment", "3\n"),
            ],
        );
        let limits = block_device_limits(&device);
        assert_eq!(
            limits,
            Limits {
                logical_block: 4096,
                physical_block: 4096,
                max_io_bytes: u32::MAX,
                discard: false,
                write_zeroes: true,
                volatile_cache: false,
                dma_alignment: 4,
            }
        );
        write(&device.join("queue"), "write_cache", "write back\n");
        write(
            &device.join("queue"),
            "discard_max_bytes",
            "2199023255040\n",
        );
        let limits = block_device_limits(&device);
        assert!(limits.volatile_cache && limits.discard);
    }

    #[test]
    fn a_partition_takes_its_disks_queue() {
        let root = tempfile::tempdir().unwrap();
        let disk = fake_device(root.path(), &[("logical_block_size", "512\n")]);
        let partition = disk.join("sdb1");
        std::fs::create_dir_all(&partition).unwrap();
        assert_eq!(block_device_limits(&partition).logical_block, 512);
    }

    #[test]
    fn what_cannot_be_read_is_taken_at_its_most_careful() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(block_device_limits(root.path()), Limits::UNKNOWN);
        let odd = fake_device(root.path(), &[("logical_block_size", "1000\n")]);
        let limits = block_device_limits(&odd);
        assert_eq!(limits.logical_block, 4096);
        assert!(limits.volatile_cache);
    }

    #[test]
    fn a_regular_file_has_a_cache_and_small_blocks() {
        let file = tempfile::tempfile().unwrap();
        let limits = limits_of(&file, false);
        assert_eq!(limits.logical_block, 512);
        assert!(limits.volatile_cache && limits.discard && limits.write_zeroes);
        assert!(limits.physical_block >= 512);
    }
}
