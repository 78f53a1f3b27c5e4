//! A ublk thread's io_uring: the one ring every command of the thread
//! goes through, and the waker read on it (an eventfd the engine writes
//! to wake the thread, and the thread's file paths' rings signal). The
//! thread's ring `unsafe` is all here.
//!
//! # Memory the kernel writes
//! An entry on the ring may name memory the kernel reads or writes until
//! its completion is reaped, so whoever pushes one
//! ([`Submissions::push`]) keeps that memory alive until then. The
//! thread's entries are the waker's read, into a counter this ring owns
//! and frees only after the ring is closed; the poll of a hosted loop's
//! descriptor, which names no memory; and the queues' commands, whose
//! buffers stay in their tags while the kernel holds them (`queue.rs`).
//!
//! # User data
//! A completion's user data says whose it is: [`WAKER`] and [`HOSTED`]
//! are the ring's own; every other value is a queue's slot and tag
//! (`queue::user_data`), which stay below them.

#![allow(unsafe_code)]

use crate::UblkError;
use io_uring::{cqueue, opcode, squeue, types, CompletionQueue, IoUring};
use io_uring::{SubmissionQueue, Submitter};
use mpio_io_loop::Waker;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

/// The user data of the waker's read.
pub(crate) const WAKER: u64 = u64::MAX;
/// The user data of the poll of a hosted loop's descriptor.
pub(crate) const HOSTED: u64 = u64::MAX - 1;
/// Ring entries per thread; the completion queue has twice as many, and
/// the kernel keeps completions that overflow it (IORING_FEAT_NODROP).
const RING_ENTRIES: u32 = 1024;

/// One thread's ring and its waker. See the module docs.
pub(crate) struct Ring {
    ring: IoUring<squeue::Entry, cqueue::Entry>,
    /// Where the kernel writes the waker's count. A field after `ring`,
    /// so it is freed after the ring is closed (and with it the read).
    waker_count: Box<u64>,
    waker: Arc<File>,
}

/// The submission side of a [`Ring`], while its completions are read.
pub(crate) struct Submissions<'ring> {
    submitter: Submitter<'ring>,
    queue: SubmissionQueue<'ring>,
}

impl Ring {
    /// A ring and a new waker, its read not yet on the ring
    /// ([`Ring::arm_waker`]).
    ///
    /// # Errors
    /// An io_uring or an eventfd that cannot be made (the error says
    /// what to change).
    pub(crate) fn new() -> Result<Ring, UblkError> {
        let ring = IoUring::builder()
            .setup_cqsize(2 * RING_ENTRIES)
            .build(RING_ENTRIES)
            .map_err(|error| {
                UblkError::system(
                    "io_uring for a ublk thread (a locked-memory limit? raise RLIMIT_MEMLOCK)",
                    error,
                )
            })?;
        // SAFETY: eventfd has no preconditions; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(UblkError::system(
                "eventfd",
                std::io::Error::last_os_error(),
            ));
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let waker = Arc::new(File::from(unsafe { OwnedFd::from_raw_fd(raw) }));
        Ok(Ring {
            ring,
            waker_count: Box::new(0),
            waker,
        })
    }

    /// The waker's file, for the engine to write to.
    pub(crate) fn waker_file(&self) -> Arc<File> {
        Arc::clone(&self.waker)
    }

    /// The waker, for the path queues the thread opens to signal.
    pub(crate) fn waker(&self) -> Waker {
        Waker(self.waker.as_raw_fd())
    }

    /// Puts the waker's read (into `waker_count`) on the ring: at start,
    /// and each time it completed.
    pub(crate) fn arm_waker(&mut self) {
        let read = opcode::Read::new(
            types::Fd(self.waker.as_raw_fd()),
            (&mut *self.waker_count as *mut u64).cast::<u8>(),
            8,
        )
        .build()
        .user_data(WAKER);
        self.split().0.push(&read);
    }

    /// Puts a poll for `descriptor` being readable on the ring; it
    /// completes, once, with [`HOSTED`].
    pub(crate) fn watch(&mut self, descriptor: RawFd) {
        let poll = opcode::PollAdd::new(types::Fd(descriptor), libc::POLLIN as u32)
            .build()
            .user_data(HOSTED);
        self.split().0.push(&poll);
    }

    /// The ring's submission side and its completions, together.
    pub(crate) fn split(&mut self) -> (Submissions<'_>, CompletionQueue<'_, cqueue::Entry>) {
        let (submitter, queue, completions) = self.ring.split();
        (Submissions { submitter, queue }, completions)
    }

    /// Submits what is queued, without waiting.
    pub(crate) fn submit(&mut self) -> std::io::Result<usize> {
        self.ring.submit()
    }

    /// Submits what is queued if anything is, entering the kernel only
    /// then.
    pub(crate) fn submit_queued(&mut self) -> std::io::Result<usize> {
        if self.ring.submission().is_empty() {
            Ok(0)
        } else {
            self.ring.submit()
        }
    }

    /// Submits what is queued and waits for one completion.
    pub(crate) fn wait_for_one(&mut self) -> std::io::Result<usize> {
        self.ring.submit_and_wait(1)
    }

    /// Submits what is queued and waits for one completion, or `limit`.
    pub(crate) fn wait_at_most(&mut self, limit: Duration) -> std::io::Result<usize> {
        let timeout = types::Timespec::from(limit);
        let arguments = types::SubmitArgs::new().timespec(&timeout);
        self.ring.submitter().submit_with_args(1, &arguments)
    }
}

impl Submissions<'_> {
    /// Pushes `entry`, submitting first when the submission queue is
    /// full. What it names must live until its completion is reaped (see
    /// the module docs).
    pub(crate) fn push(&mut self, entry: &squeue::Entry) {
        push(&self.submitter, &mut self.queue, entry);
    }

    /// Submits what is queued, without waiting.
    pub(crate) fn submit(&mut self) -> std::io::Result<usize> {
        self.queue.sync();
        self.submitter.submit()
    }
}

/// Pushes `entry`, submitting first when the submission queue is full.
fn push(submitter: &Submitter<'_>, queue: &mut SubmissionQueue<'_>, entry: &squeue::Entry) {
    loop {
        // SAFETY: every entry's memory (a tag's buffer, the waker's
        // counter) lives until its completion is reaped: buffers stay
        // in their tag while the kernel holds them, and the counter
        // lives as long as the thread's ring.
        if unsafe { queue.push(entry) }.is_ok() {
            return;
        }
        queue.sync();
        if let Err(error) = submitter.submit() {
            panic!("ublk thread: io_uring submit failed: {error}");
        }
        queue.sync();
    }
}
