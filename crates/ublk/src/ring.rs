//! A ublk thread's io_uring: the one ring every command of the thread and
//! every read and write of its file paths go through, and the waker read
//! on it (an eventfd the engine writes to wake the thread). The thread's
//! ring `unsafe` is all here.
//!
//! # How it is set up
//! - One issuer (`IORING_SETUP_SINGLE_ISSUER`): made disabled on the
//!   engine's thread and enabled by the I/O thread ([`Ring::enable`]),
//!   the only thread that enters it.
//! - Deferred task work (`IORING_SETUP_DEFER_TASKRUN`) where the
//!   driver has `UBLK_F_AUTO_BUF_REG` (6.16+): the kernel completes a
//!   command or a path's I/O as work queued for the thread, run when the
//!   thread enters the ring to wait, not by interrupting it wherever it
//!   runs. Older drivers get cooperative task work
//!   (`IORING_SETUP_COOP_TASKRUN`), run at the thread's next entry of
//!   any system call: on 6.12, a device whose server ended with
//!   requests waiting as deferred work on its ring was seen to stay live
//!   (never quiesced), so no next server could recover it (5 of 7 runs
//!   of the kernel suite). Either way `IORING_SQ_TASKRUN` says such work
//!   waits, and a turn that would not enter the kernel enters then
//!   ([`Ring::submit_queued`]).
//! - A sparse table of [`FILE_SLOTS`] fixed files, lent with the ring to
//!   the thread's file path queues ([`RingShare`]): their entries go on
//!   this ring, their completions come back on it.
//! - A sparse table of [`BUFFER_SLOTS`] buffers, where the kernel
//!   registers a zero-copy device's requests (`buffers.rs`); a path's
//!   read or write names the slot, and the kernel unregisters it at the
//!   request's commit.
//!
//! # Memory the kernel writes
//! An entry on the ring may name memory the kernel reads or writes until
//! its completion is reaped, so whoever pushes one
//! ([`Submissions::push`]) keeps that memory alive until then. The
//! thread's entries are the waker's read, into a counter this ring owns
//! and frees only after the ring is closed; the poll of a hosted loop's
//! descriptor, which names no memory; the queues' commands, whose
//! buffers stay in their tags while the kernel holds them (`queue.rs`);
//! and its file paths' I/O, whose buffers stay in their path queue until
//! the completion is delivered back (`mpio_transport`'s `RingShare`).
//!
//! # User data
//! A completion's user data says whose it is: [`WAKER`] and [`HOSTED`]
//! are the ring's own; a file path's is marked
//! ([`mpio_transport::is_path_completion`]); every other value is a
//! queue's slot and tag (`queue::user_data`), which stay below them.

#![allow(unsafe_code)]

use crate::buffers::BUFFER_SLOTS;
use crate::UblkError;
use io_uring::{cqueue, opcode, squeue, types, CompletionQueue, IoUring};
use io_uring::{SubmissionQueue, Submitter};
use mpio_transport::RingShare;
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
/// Fixed files the ring lends its file paths (each path queue of the
/// thread takes one: a thread serves every file path of every ublk map),
/// at most the open-file limit, which `mpio serve` raises to its hard
/// value; a path queue finding none left gets a ring of its own. The
/// kernel's table costs 8 bytes a slot.
const FILE_SLOTS: u32 = 16384;

/// One thread's ring and its waker. See the module docs.
pub(crate) struct Ring {
    ring: IoUring<squeue::Entry, cqueue::Entry>,
    /// Where the kernel writes the waker's count. A field after `ring`,
    /// so it is freed after the ring is closed (and with it the read).
    waker_count: Box<u64>,
    waker: Arc<File>,
    /// The ring as its file paths borrow it; `None` if its table could
    /// not be registered (each path queue then has a ring of its own).
    share: Option<RingShare>,
    /// It has its buffer table (for zero copy).
    buffers: bool,
}

/// The submission side of a [`Ring`], while its completions are read.
pub(crate) struct Submissions<'ring> {
    submitter: Submitter<'ring>,
    queue: SubmissionQueue<'ring>,
}

impl Ring {
    /// A ring and a new waker, its read not yet on the ring
    /// ([`Ring::arm_waker`]); its task work deferred if `defer_task_work`
    /// (see the module docs).
    ///
    /// # Errors
    /// An io_uring or an eventfd that cannot be made (the error says
    /// what to change).
    pub(crate) fn new(defer_task_work: bool) -> Result<Ring, UblkError> {
        let mut builder = IoUring::builder();
        builder
            .setup_cqsize(2 * RING_ENTRIES)
            .setup_single_issuer()
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .setup_r_disabled();
        if defer_task_work {
            builder.setup_defer_taskrun();
        }
        let ring = builder.build(RING_ENTRIES).map_err(|error| {
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
        let share = share(&ring)
            .map_err(|error| {
                tracing::warn!(
                    "a ublk thread's ring cannot lend fixed files ({error}): \
                     each file path gets a ring of its own"
                );
            })
            .ok();
        // Zero copy needs both tables: the request's pages are named on
        // this ring, by I/O that only a shared path queue puts here.
        let buffers = share.is_some()
            && ring
                .submitter()
                .register_buffers_sparse(BUFFER_SLOTS)
                .map_err(|error| {
                    tracing::warn!(
                        "a ublk thread's ring has no buffer table ({error}): \
                         its devices copy their data"
                    );
                })
                .is_ok();
        Ok(Ring {
            ring,
            waker_count: Box::new(0),
            waker,
            share,
            buffers,
        })
    }

    /// It has the buffer table zero copy needs.
    pub(crate) fn has_buffers(&self) -> bool {
        self.buffers
    }

    /// Empties buffer slot `index`: what the kernel registered there (a
    /// request's pages) is let go, so the request can complete once no
    /// path I/O still uses them.
    pub(crate) fn clear_buffer(&mut self, index: u16) {
        let empty = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }];
        // SAFETY: an empty entry names no memory; the kernel drops what
        // the slot held (the I/O using it holds its own reference).
        let cleared = unsafe {
            self.ring
                .submitter()
                .register_buffers_update(u32::from(index), &empty, None)
        };
        if let Err(error) = cleared {
            panic!("ublk thread: emptying buffer slot {index} failed: {error}");
        }
    }

    /// The ring as its file paths borrow it, if it lends its table.
    pub(crate) fn share(&self) -> Option<RingShare> {
        self.share.clone()
    }

    /// Makes the calling thread the ring's one submitter: the ring is
    /// made disabled on the engine's thread and enabled by the I/O thread
    /// before its first entry (`IORING_SETUP_SINGLE_ISSUER` fixes the
    /// issuer at enabling).
    ///
    /// # Errors
    /// The kernel refused to enable it.
    pub(crate) fn enable(&self) -> std::io::Result<()> {
        self.ring.submitter().register_enable_rings()
    }

    /// The waker's file, for the engine to write to.
    pub(crate) fn waker_file(&self) -> Arc<File> {
        Arc::clone(&self.waker)
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
        let submissions = self.ring.submission();
        // IORING_SQ_TASKRUN: completions wait as deferred task work,
        // which only an entry runs.
        let idle = submissions.is_empty() && !submissions.taskrun();
        drop(submissions);
        if idle {
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

/// Lends `ring` to the thread's file paths, with as many fixed files as
/// [`FILE_SLOTS`] and the open-file limit allow.
fn share(ring: &IoUring) -> std::io::Result<RingShare> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit, which `limit` is.
    let slots = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        FILE_SLOTS.min(u32::try_from(limit.rlim_cur).unwrap_or(u32::MAX))
    } else {
        FILE_SLOTS
    };
    RingShare::lend(ring, slots)
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
        // SAFETY: every entry's memory (a tag's buffer, a path I/O's
        // buffer, the waker's counter) lives until its completion is
        // reaped: buffers stay in their tag or path queue while the
        // kernel holds them, and the counter lives as long as the
        // thread's ring.
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
