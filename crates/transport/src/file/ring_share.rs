//! [`RingShare`]: a thread's own io_uring lent to the file path queues it
//! opens, so their reads and writes go through the ring the thread already
//! enters and waits on (the ublk thread's): one kernel entry per turn
//! submits the thread's commands and every path's I/O together, and a
//! path's completion lands on the ring the thread sleeps on, with no
//! second ring to enter and no eventfd to signal.
//!
//! # The exchange
//! An attached [`super::FileQueue`] never touches the ring's queues: it
//! writes its submission entries to an outbox and settles completions
//! from an inbox. The thread owning the ring moves them each turn
//! ([`crate::DeviceQueue::deliver`] before it polls the map, then
//! [`crate::DeviceQueue::drain_entries`] after): completions whose user
//! data [`is_path_completion`] go back to the queue whose slot they name,
//! and outboxes go onto the ring, submitted at the thread's next entry.
//!
//! # User data
//! A path entry's user data is `0b01` in its two highest bits, the
//! queue's slot in bits 32..62 and the I/O's index in the queue in the
//! low 32: the ring's own entries keep values with the highest bit set
//! (the ublk thread's waker and hosted poll) or with both clear (its
//! commands, `slot << 16 | tag`).
//!
//! # Fixed files
//! The ring has a sparse table of fixed files registered by its owner; a
//! queue takes a slot of it at open and points it at its path's file (or
//! at nothing while the path is revoked) with `IORING_REGISTER_FILES_UPDATE`
//! on its own thread, before any entry that follows the switch is pushed:
//! the kernel fails every later entry of a revoked path with `EBADF`, as
//! on a queue's own ring. A queue dropped while the kernel still holds some
//! of its I/O retires its slot rather than freeing it, so a late
//! completion is never taken for another queue's.

#![allow(unsafe_code)]

use io_uring::IoUring;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

/// Marks a path entry's user data (the two highest bits `0b01`).
const PATH_MARK: u64 = 1 << 62;
/// `IORING_REGISTER_FILES_UPDATE` (linux/io_uring.h).
const REGISTER_FILES_UPDATE: libc::c_uint = 6;

/// `struct io_uring_files_update` (linux/io_uring.h).
#[repr(C)]
struct FilesUpdate {
    offset: u32,
    resv: u32,
    fds: u64,
}

/// A thread's ring as its file path queues borrow it. Cloned into each
/// queue the thread opens; see the module docs.
#[derive(Clone, Debug)]
pub struct RingShare {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// A descriptor of the ring of its own: the ring lives while a queue
    /// may still update its table.
    ring: OwnedFd,
    /// Fixed-file slots no queue holds. Taken and given back only when a
    /// queue opens or closes, never per I/O.
    free: Mutex<Vec<u32>>,
}

impl RingShare {
    /// Registers a sparse table of `slots` fixed files on `ring` and
    /// shares it. The ring's owner enters it, and moves its file paths'
    /// entries and completions (see the module docs).
    ///
    /// # Errors
    /// The table could not be registered (`slots` above the open-file
    /// limit, a kernel before 5.19), or the descriptor not duplicated.
    pub fn lend(ring: &IoUring, slots: u32) -> std::io::Result<RingShare> {
        ring.submitter().register_files_sparse(slots)?;
        // SAFETY: the ring's descriptor is open for as long as `ring`
        // lives, which covers this call.
        let descriptor = unsafe { BorrowedFd::borrow_raw(ring.as_raw_fd()) };
        Ok(RingShare {
            inner: Arc::new(Shared {
                ring: descriptor.try_clone_to_owned()?,
                free: Mutex::new((0..slots).rev().collect()),
            }),
        })
    }

    /// A free slot of the table, if one is left.
    pub(super) fn take_slot(&self) -> Option<u32> {
        self.inner.free.lock().ok()?.pop()
    }

    /// Gives `slot` back (its queue is gone and the kernel holds none of
    /// its I/O).
    pub(super) fn give_back(&self, slot: u32) {
        if let Ok(mut free) = self.inner.free.lock() {
            free.push(slot);
        }
    }

    /// Points fixed file `slot` at `fd` (-1: at nothing).
    ///
    /// # Errors
    /// The kernel refused the update.
    pub(super) fn point(&self, slot: u32, fd: RawFd) -> std::io::Result<()> {
        let fds = [fd];
        let update = FilesUpdate {
            offset: slot,
            resv: 0,
            fds: fds.as_ptr() as u64,
        };
        // SAFETY: io_uring_register reads one `FilesUpdate` and the one
        // descriptor it names, both alive for the call; the ring
        // descriptor is owned by `inner`.
        let result = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                self.inner.ring.as_raw_fd(),
                REGISTER_FILES_UPDATE,
                std::ptr::addr_of!(update),
                1 as libc::c_uint,
            )
        };
        if result < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

/// The user data of I/O `index` of the queue holding `slot`.
pub(super) fn path_user_data(slot: u32, index: u32) -> u64 {
    PATH_MARK | (u64::from(slot) << 32) | u64::from(index)
}

/// Whether a completion's `user_data` is a file path queue's.
pub fn is_path_completion(user_data: u64) -> bool {
    user_data >> 62 == 0b01
}

/// The slot of a path completion's `user_data`.
pub(super) fn slot_of(user_data: u64) -> u32 {
    ((user_data >> 32) as u32) & !(0b11 << 30)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_user_data_stays_clear_of_the_rings_own() {
        let data = path_user_data((1 << 30) - 1, u32::MAX);
        assert!(is_path_completion(data));
        assert_eq!(slot_of(data), (1 << 30) - 1);
        assert_eq!(data as u32, u32::MAX);
        assert!(!is_path_completion(u64::MAX), "the ublk waker");
        assert!(!is_path_completion(u64::MAX - 1), "a hosted loop's poll");
        assert!(!is_path_completion((4095 << 16) | 65535), "a ublk command");
    }
}
