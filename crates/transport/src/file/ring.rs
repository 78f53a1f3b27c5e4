//! One thread's io_uring queue to one file path: the file transport's
//! unsafe code, beside one `statx` call in `limits` and the table update
//! in `ring_share`.
//!
//! # Shape
//! A queue's I/O goes through one of two rings, with the path's file as a
//! fixed file: no `fget`/`fput` of a file shared by every I/O thread on
//! each request, and a per-queue switch the kernel itself enforces
//! ([`super::FilePath::revoke`]).
//! - Its thread's ring ([`RingShare`], the ublk threads'): `submit` and
//!   `poll` only fill an outbox and settle an inbox, which the thread
//!   exchanges with its ring each turn; the thread's one entry per turn
//!   submits every path's I/O with its own commands, and it sleeps on the
//!   ring the completions land on ([`Rest::OnRing`]).
//! - A ring of its own, with the file as fixed file 0 (the NBD server's
//!   loops, and a thread whose table is full): `submit` only writes an
//!   entry, `poll` enters the kernel once to submit what was queued and
//!   reaps completions without a system call when it has nothing to
//!   submit; its thread polls it ([`Rest::Poll`]).
//!
//! Buffers are not registered: each I/O brings its caller's
//! [`mpio_core::io::Buffer`], so fixed buffers would mean a copy into a
//! queue-owned pool, which costs more than the page pinning it saves at
//! 4 KiB. Completions are matched to their I/O by `user_data`, the I/O's
//! slot index (with the queue's table slot on a shared ring).
//!
//! # Contract (see [`PathQueue`])
//! - Every submitted I/O comes back once, through `poll` or `abort`.
//! - `abort` gives back only an I/O the kernel has never seen (still
//!   waiting for room in the submission ring, or waiting to be sent again
//!   after `EAGAIN` with nothing transferred). Once the kernel holds a
//!   write, `IORING_OP_ASYNC_CANCEL` cannot promise it did not reach the
//!   disk (a request already in the block layer is not cancellable), so
//!   `abort` answers `None` and the I/O completes through `poll`.
//! - Fencing: the kernel's completion is the fence. Every error `poll`
//!   reports is a request the kernel handed back, which can no longer
//!   reach the disk, so the core may retry it at once; `abandon` is left
//!   at its default (`None`): the kernel holds the buffer until it hands
//!   the request back, so a write is waited for, however long.
//! - A queue whose own ring could not be set up completes every I/O with
//!   [`PathError::Transport`]: the path fails over like any broken route.
//! - `EAGAIN` and `EINTR` completions are sent again at once, up to
//!   `MAX_AGAIN` (8) times, then count as a path error: io_uring itself
//!   waits for readiness (it arms a poll) before it answers `EAGAIN` to a
//!   file that supports it, so a repeated `EAGAIN` means a route that
//!   keeps refusing, not one that is merely busy.
//!
//! # Safety
//! The kernel writes into (reads) and reads from (writes) an I/O's buffer
//! until its completion is reaped. Each I/O stays in `slots`, untouched,
//! from push to completion (on a shared ring: until the completion is
//! delivered back and settled); its buffer's heap storage does not move
//! when the `PathIo` that owns it does. Dropping a queue with its own ring
//! cancels what the kernel holds and waits for it (bounded); buffers still
//! held after the bound, or held by a shared ring the queue cannot wait
//! on, are leaked, never freed under the kernel.

#![allow(unsafe_code)]

use super::ring_share::{path_user_data, slot_of, RingShare};
use super::{end_of_file, outcome_of_errno, FilePath};
use io_uring::{opcode, squeue, types, IoUring};
use mpio_core::io::{Op, PathError, PathOutcome, TargetError};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use mpio_io_loop::Rest;
use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most submission entries per ring; deeper queues keep the rest waiting.
const MAX_RING_ENTRIES: usize = 4096;
/// Times one I/O is sent again after `EAGAIN` or `EINTR` before it counts
/// as a path error.
const MAX_AGAIN: u8 = 8;
/// How long dropping a queue waits for the kernel to give buffers back.
const DROP_WAIT: Duration = Duration::from_secs(5);
/// `user_data` of the cancel request sent at drop (slot indices are u32).
const CANCEL_TAG: u64 = u64::MAX;

/// An I/O the queue holds.
#[derive(Debug)]
struct InFlight {
    io: PathIo,
    /// Bytes already transferred (a short read or write is continued).
    done_bytes: u32,
    /// Times sent again after `EAGAIN`/`EINTR`.
    again: u8,
    /// A FUA discard or write-zeroes succeeded and its `fdatasync` is
    /// what is in the kernel now (a FUA write needs none: it goes out
    /// with `RWF_DSYNC`).
    syncing: bool,
}

/// The ring a queue's I/O goes through (see the module docs).
enum QueueRing {
    /// Its own (boxed: it is large, and `AnyQueue` holds the queue by
    /// value), with the path's file as fixed file 0.
    Own(Box<IoUring>),
    /// Its thread's.
    Shared(Shared),
}

/// A queue's share of its thread's ring.
struct Shared {
    share: RingShare,
    /// Its fixed file in the ring's table.
    slot: u32,
    /// Entries for the thread to put on its ring.
    outbox: Vec<squeue::Entry>,
    /// (user_data, result) of its completions the thread delivered.
    inbox: Vec<(u64, i32)>,
}

/// One thread's queue to one file path. See the module docs.
pub struct FileQueue {
    path: Arc<FilePath>,
    /// Its ring, or why its own could not be set up.
    ring: Result<QueueRing, String>,
    slots: Vec<Option<InFlight>>,
    free: Vec<u32>,
    /// Slots to push to the ring: new I/O that found the submission ring
    /// full, and I/O to send again (short transfer, `EAGAIN`).
    backlog: VecDeque<u32>,
    /// Slots pushed to the ring and not yet completed.
    in_kernel: usize,
    /// Most slots the kernel may hold: the completion ring's size, so its
    /// completions always fit and none waits in the kernel's overflow list.
    max_in_kernel: usize,
    /// Completions known, handed over at the next poll.
    done: Vec<PathCompletion>,
    /// (user_data, result) of reaped completion entries, reused.
    reaped: Vec<(u64, i32)>,
    /// The path's switch count this queue last applied to its ring.
    switches_seen: Option<u64>,
    /// Its fixed file is the path's file (not an empty slot).
    file_registered: bool,
    /// The registered file is a block device.
    block_device: bool,
    /// A zero-copy request reached it on a ring of its own (logged once;
    /// each such request fails over).
    zero_copy_refused: bool,
}

impl std::fmt::Debug for FileQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileQueue")
            .field("path", &self.path.path())
            .field(
                "ring",
                &self.ring.as_ref().map(|ring| match ring {
                    QueueRing::Own(_) => "own".to_string(),
                    QueueRing::Shared(shared) => format!("shared, slot {}", shared.slot),
                }),
            )
            .field("in_kernel", &self.in_kernel)
            .field("backlog", &self.backlog.len())
            .finish()
    }
}

impl FileQueue {
    /// A queue to `path` with room for `depth` I/Os in flight, on its
    /// thread's ring `share` if given and its table has a slot left, else
    /// on a ring of its own.
    pub fn new(path: Arc<FilePath>, depth: usize, share: Option<RingShare>) -> Self {
        let entries = depth.clamp(1, MAX_RING_ENTRIES).next_power_of_two() as u32;
        let slot = share.as_ref().and_then(RingShare::take_slot);
        let mut ring = match (share, slot) {
            (Some(share), Some(slot)) => Ok(QueueRing::Shared(Shared {
                share,
                slot,
                outbox: Vec::with_capacity(depth),
                inbox: Vec::with_capacity(depth),
            })),
            (share, _) => {
                if share.is_some() {
                    tracing::warn!(
                        path = %path.path().display(),
                        "the thread's ring has no fixed-file slot left: the path gets a ring of its own"
                    );
                }
                own_ring(&path, entries)
            }
        };
        // On its own ring its completions always fit the completion ring
        // (twice the entries), so none waits in the kernel's overflow
        // list; on the thread's it holds as many (that ring keeps what
        // overflows, and the thread's next entry flushes it).
        let max_in_kernel = match &mut ring {
            Ok(QueueRing::Own(ring)) => ring.completion().capacity(),
            Ok(QueueRing::Shared(_)) => 2 * entries as usize,
            Err(_) => 0,
        };
        let mut queue = FileQueue {
            path,
            ring,
            slots: Vec::with_capacity(depth),
            free: Vec::with_capacity(depth),
            backlog: VecDeque::with_capacity(depth),
            in_kernel: 0,
            max_in_kernel,
            done: Vec::with_capacity(depth),
            reaped: Vec::with_capacity(2 * entries as usize),
            switches_seen: None,
            file_registered: false,
            block_device: false,
            zero_copy_refused: false,
        };
        queue.apply_switch();
        queue
    }

    /// What its thread may do before the next poll: on its own ring, poll
    /// ([`Rest::Poll`]: only an entry sees its completions); on the
    /// thread's ring, sleep on that ring ([`Rest::OnRing`]) unless the
    /// queue has something to do at once ([`Rest::Ready`]): completions
    /// to settle or hand over, entries not yet handed to the thread, or
    /// a backlog with room in the kernel.
    pub fn rest(&mut self) -> Rest {
        let Ok(QueueRing::Shared(shared)) = &self.ring else {
            return Rest::Poll;
        };
        // A backlog the kernel has no room for (as many entries out as
        // the completion ring holds) waits for completions like the rest.
        let backlog_fits = !self.backlog.is_empty() && self.in_kernel < self.max_in_kernel;
        if !self.done.is_empty()
            || backlog_fits
            || !shared.outbox.is_empty()
            || !shared.inbox.is_empty()
        {
            Rest::Ready
        } else {
            Rest::OnRing
        }
    }

    /// On its thread's ring: takes the completions of `completions` that
    /// are this queue's (settled at its next poll), leaving the others.
    pub fn deliver(&mut self, completions: &mut Vec<(u64, i32)>) {
        let Ok(QueueRing::Shared(shared)) = &mut self.ring else {
            return;
        };
        let slot = shared.slot;
        completions.retain(|&(user_data, result)| {
            if slot_of(user_data) == slot {
                shared.inbox.push((user_data, result));
                false
            } else {
                true
            }
        });
    }

    /// On its thread's ring: hands every entry the queue wrote to `push`,
    /// which puts it on the ring; what an entry names lives until its
    /// completion is delivered back (see the module's Safety section).
    pub fn drain_entries(&mut self, push: &mut impl FnMut(squeue::Entry)) {
        if let Ok(QueueRing::Shared(shared)) = &mut self.ring {
            shared.outbox.drain(..).for_each(push);
        }
    }

    /// Points the ring's fixed file at the path's file, or at nothing while
    /// the path is revoked or not open.
    fn apply_switch(&mut self) {
        let (switches, file) = self.path.switch_state();
        if self.switches_seen == Some(switches) {
            return;
        }
        let fd = file.map_or(-1, |opened| opened.file.as_raw_fd());
        // Only an unchanged count is skipped next time: a failed update is
        // tried again at the next submit or poll.
        let updated = match &self.ring {
            Ok(QueueRing::Own(ring)) => ring.submitter().register_files_update(0, &[fd]).is_ok(),
            Ok(QueueRing::Shared(shared)) => shared.share.point(shared.slot, fd).is_ok(),
            Err(_) => return,
        };
        if updated {
            self.switches_seen = Some(switches);
            self.file_registered = file.is_some();
            self.block_device = file.is_some_and(|opened| opened.block_device);
        }
    }

    fn complete_now(&mut self, io: PathIo, outcome: PathOutcome) {
        self.done.push(PathCompletion {
            tag: io.tag,
            buf: io.buf,
            outcome,
        });
    }

    /// Pushes waiting slots to the ring (its own submission ring, or the
    /// outbox) while the kernel has room for them.
    fn push_backlog(&mut self) {
        let Ok(ring) = &mut self.ring else {
            return;
        };
        let (file, slot) = match ring {
            QueueRing::Own(_) => (types::Fixed(0), None),
            QueueRing::Shared(shared) => (types::Fixed(shared.slot), Some(shared.slot)),
        };
        while self.in_kernel < self.max_in_kernel {
            let Some(&index) = self.backlog.front() else {
                break;
            };
            let Some(in_flight) = self.slots[index as usize].as_mut() else {
                self.backlog.pop_front();
                continue;
            };
            let user_data = slot.map_or(u64::from(index), |slot| path_user_data(slot, index));
            let entry = entry_for(file, in_flight, self.block_device).user_data(user_data);
            match ring {
                // SAFETY: the entry points into `in_flight.io.buf`, which
                // stays in `slots`, unmoved and untouched, until this
                // entry's completion is reaped (see the module's Safety
                // section). The fixed file is the path's file, or
                // (revoked, not open) an empty slot, for which the kernel
                // fails the request with EBADF: it never names another
                // file.
                QueueRing::Own(ring) => {
                    if unsafe { ring.submission().push(&entry) }.is_err() {
                        break;
                    }
                }
                QueueRing::Shared(shared) => shared.outbox.push(entry),
            }
            self.backlog.pop_front();
            self.in_kernel += 1;
        }
    }

    /// Submits what is queued on its own ring and reaps what completed
    /// there; settles what its thread delivered from a shared one.
    fn enter_and_reap(&mut self) {
        let Ok(ring) = &mut self.ring else {
            return;
        };
        match ring {
            QueueRing::Own(ring) => {
                if !ring.submission().is_empty() {
                    // EAGAIN/EBUSY (no room for completions yet) and EINTR
                    // leave the entries queued for the next poll; nothing
                    // is lost.
                    let _ = ring.submit();
                }
                self.reaped.extend(
                    ring.completion()
                        .map(|entry| (entry.user_data(), entry.result())),
                );
            }
            QueueRing::Shared(shared) => self.reaped.append(&mut shared.inbox),
        }
        let mut reaped = std::mem::take(&mut self.reaped);
        for (user_data, result) in reaped.drain(..) {
            self.settle(user_data, result);
        }
        self.reaped = reaped;
    }

    /// Handles the completion of the entry of slot `user_data`.
    fn settle(&mut self, user_data: u64, result: i32) {
        if user_data == CANCEL_TAG {
            return;
        }
        let index = user_data as u32;
        let Some(in_flight) = self.slots.get_mut(index as usize).and_then(Option::as_mut) else {
            return;
        };
        self.in_kernel -= 1;
        let outcome = if result < 0 {
            let errno = -result;
            if matches!(errno, libc::EAGAIN | libc::EINTR) && in_flight.again < MAX_AGAIN {
                in_flight.again += 1;
                self.backlog.push_back(index);
                return;
            }
            outcome_of_errno(in_flight.io.op, errno, self.block_device)
        } else {
            match in_flight.io.op {
                Op::Read | Op::Write => {
                    let moved = result as u32;
                    in_flight.done_bytes = in_flight.done_bytes.saturating_add(moved);
                    if in_flight.done_bytes >= in_flight.io.len {
                        PathOutcome::Ok
                    } else if moved == 0 {
                        // The end of the file came before the end of the
                        // request: a file shrank, a device went away.
                        end_of_file(self.block_device)
                    } else {
                        self.backlog.push_back(index);
                        return;
                    }
                }
                Op::Discard | Op::WriteZeroes if in_flight.io.fua && !in_flight.syncing => {
                    // Durable only once synced: the same slot goes back
                    // to the kernel as an `fdatasync`.
                    in_flight.syncing = true;
                    self.backlog.push_back(index);
                    return;
                }
                Op::Flush | Op::Discard | Op::WriteZeroes => PathOutcome::Ok,
            }
        };
        self.finish(index, outcome);
    }

    fn finish(&mut self, index: u32, outcome: PathOutcome) {
        if let Some(in_flight) = self.slots[index as usize].take() {
            self.free.push(index);
            self.complete_now(in_flight.io, outcome);
        }
    }
}

/// `BLOCK_URING_CMD_DISCARD` (`_IO(0x12, 0)`, linux/fs.h): a block
/// device's discard as an io_uring command, its range in the entry's
/// `addr` (start) and `addr3` (length, the command data's first 8 bytes).
const BLOCK_URING_CMD_DISCARD: u32 = 0x12 << 8;

/// A ring of its own for a queue to `path`, with `entries` entries and
/// fixed file 0 empty, or why it could not be made (logged: every I/O of
/// the queue then fails over).
fn own_ring(path: &FilePath, entries: u32) -> Result<QueueRing, String> {
    IoUring::builder()
        .build(entries)
        .and_then(|ring| {
            // Fixed file 0 starts empty (-1); `apply_switch` points it
            // at the file when there is one.
            ring.submitter().register_files(&[-1])?;
            Ok(QueueRing::Own(Box::new(ring)))
        })
        .map_err(|error| {
            let message = format!(
                "io_uring setup for {}: {error}; {}",
                path.path().display(),
                super::ring_setup_hint(&error)
            );
            // Every I/O on this queue fails over to another path: say
            // why once, with what to change.
            tracing::error!("{message}");
            message
        })
}

/// The submission entry (without its user data) that does (the rest of)
/// `in_flight`'s I/O on fixed file `file`, a block device if
/// `block_device`.
fn entry_for(file: types::Fixed, in_flight: &mut InFlight, block_device: bool) -> squeue::Entry {
    let io = &mut in_flight.io;
    let done = in_flight.done_bytes;
    // Saturating: an offset past the end of u64 is the kernel's EINVAL
    // (the caller's error), not a panic here.
    let offset = io.offset.saturating_add(u64::from(done));
    let remaining = io.len - done;
    let entry = match io.op {
        _ if in_flight.syncing => opcode::Fsync::new(file)
            .flags(types::FsyncFlags::DATASYNC)
            .build(),
        // A kernel buffer (a ublk request's pages in the ring's buffer
        // table): the address is the offset into the request.
        Op::Read => match io.buf.kernel_index() {
            Some(index) => opcode::ReadFixed::new(file, done as usize as *mut u8, remaining, index)
                .offset(offset)
                .build(),
            None => {
                let rest = &mut io.buf.as_mut_slice()[done as usize..];
                opcode::Read::new(file, rest.as_mut_ptr(), remaining)
                    .offset(offset)
                    .build()
            }
        },
        Op::Write => {
            // FUA: the kernel returns once the data is durable (a FUA
            // write to the device under O_DIRECT).
            let flags = if io.fua { libc::RWF_DSYNC } else { 0 };
            match io.buf.kernel_index() {
                Some(index) => {
                    opcode::WriteFixed::new(file, done as usize as *const u8, remaining, index)
                        .offset(offset)
                        .rw_flags(flags)
                        .build()
                }
                None => {
                    let rest = &io.buf.as_slice()[done as usize..];
                    opcode::Write::new(file, rest.as_ptr(), remaining)
                        .offset(offset)
                        .rw_flags(flags)
                        .build()
                }
            }
        }
        Op::Flush => opcode::Fsync::new(file)
            .flags(types::FsyncFlags::DATASYNC)
            .build(),
        Op::Discard if block_device => {
            let mut length = [0u8; 16];
            length[..8].copy_from_slice(&u64::from(io.len).to_ne_bytes());
            opcode::UringCmd16::new(file, BLOCK_URING_CMD_DISCARD)
                .addr(Some(io.offset))
                .cmd(length)
                .build()
        }
        Op::Discard => opcode::Fallocate::new(file, u64::from(io.len))
            .offset(io.offset)
            .mode(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE)
            .build(),
        Op::WriteZeroes => opcode::Fallocate::new(file, u64::from(io.len))
            .offset(io.offset)
            .mode(libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE)
            .build(),
    };
    entry
}

impl PathQueue for FileQueue {
    fn submit(&mut self, io: PathIo, _now_ns: u64) {
        self.apply_switch();
        if !self.file_registered {
            // Revoked, or not open: the kernel fails it (EBADF), and a
            // path not open is tried again (`late.rs`).
            self.path.open_later();
        }
        match &self.ring {
            Err(_) => {
                self.complete_now(io, PathOutcome::Path(PathError::Transport));
                return;
            }
            Ok(QueueRing::Own(_)) if io.buf.kernel_index().is_some() => {
                // The request's pages are registered in the thread's ring,
                // which this queue could not share (its table was full).
                if !self.zero_copy_refused {
                    self.zero_copy_refused = true;
                    tracing::error!(
                        path = %self.path.path().display(),
                        "zero-copy requests reached a path queue with a ring of its own: \
                         each fails over (raise the open-file limit, LimitNOFILE=)"
                    );
                }
                self.complete_now(io, PathOutcome::Path(PathError::Transport));
                return;
            }
            Ok(_) => {}
        }
        let data = matches!(io.op, Op::Read | Op::Write);
        if data && io.buf.len() < io.len as usize {
            self.complete_now(io, PathOutcome::Target(TargetError::Invalid));
            return;
        }
        if io.len == 0 && io.op != Op::Flush {
            self.complete_now(io, PathOutcome::Ok);
            return;
        }
        let in_flight = InFlight {
            io,
            done_bytes: 0,
            again: 0,
            syncing: false,
        };
        let index = match self.free.pop() {
            Some(index) => {
                self.slots[index as usize] = Some(in_flight);
                index
            }
            None => {
                self.slots.push(Some(in_flight));
                (self.slots.len() - 1) as u32
            }
        };
        self.backlog.push_back(index);
        self.push_backlog();
    }

    fn poll(&mut self, _now_ns: u64, completions: &mut Vec<PathCompletion>) {
        self.apply_switch();
        self.push_backlog();
        self.enter_and_reap();
        if !self.backlog.is_empty() {
            // Continuations of short transfers and retries go out now, not
            // one poll later.
            self.push_backlog();
            self.enter_and_reap();
        }
        completions.append(&mut self.done);
    }

    fn abort(&mut self, tag: u64) -> Option<PathIo> {
        let position = self.backlog.iter().position(|&index| {
            self.slots[index as usize]
                .as_ref()
                .is_some_and(|in_flight| in_flight.io.tag == tag && in_flight.done_bytes == 0)
        })?;
        let index = self.backlog.remove(position)?;
        let in_flight = self.slots[index as usize].take()?;
        self.free.push(index);
        Some(in_flight.io)
    }
}

impl FileQueue {
    /// Cancels what the kernel holds on its own ring and reaps it, waiting
    /// at most `DROP_WAIT`: every I/O the kernel gave back is in `done`.
    /// (A shared ring's completions reach the queue only through its
    /// thread, which is not waiting for it now.)
    fn cancel_and_reap(&mut self) {
        if self.in_kernel == 0 {
            return;
        }
        let Ok(QueueRing::Own(ring)) = &mut self.ring else {
            return;
        };
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(CANCEL_TAG);
        // SAFETY: a cancel request points at no memory.
        let _ = unsafe { ring.submission().push(&cancel) };
        let deadline = Instant::now() + DROP_WAIT;
        let wait = types::Timespec::new().nsec(10_000_000);
        while self.in_kernel > 0 && Instant::now() < deadline {
            let Ok(QueueRing::Own(ring)) = &mut self.ring else {
                return;
            };
            // ETIME (nothing within 10 ms) and EINTR just loop.
            let _ = ring
                .submitter()
                .submit_with_args(1, &types::SubmitArgs::new().timespec(&wait));
            self.enter_and_reap();
        }
    }
}

impl Drop for FileQueue {
    fn drop(&mut self) {
        self.cancel_and_reap();
        if let Ok(QueueRing::Shared(shared)) = &self.ring {
            // The table lets go of the file; a slot the kernel may still
            // complete an entry of is retired, never handed to another
            // queue (see the module docs of `ring_share`).
            let _ = shared.share.point(shared.slot, -1);
            if self.in_kernel == 0 {
                shared.share.give_back(shared.slot);
            }
        }
        if self.in_kernel > 0 {
            // The kernel still holds these buffers: leak them rather than
            // free memory it may write.
            for in_flight in self.slots.drain(..).flatten() {
                std::mem::forget(in_flight.io.buf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::pipe;
    use super::*;
    use crate::is_path_completion;
    use mpio_core::io::Buffer;

    /// What a FUA I/O puts in the kernel: a write goes as one write (its
    /// `RWF_DSYNC` is not visible in an entry's Debug form), a discard or
    /// write-zeroes first as itself, then, once it succeeded, as an
    /// `fdatasync` of the same slot.
    #[test]
    fn a_fua_discard_or_write_zeroes_is_synced_after_it() {
        let op_code = |in_flight: &mut InFlight, block_device: bool| {
            let entry = format!("{:?}", entry_for(types::Fixed(0), in_flight, block_device));
            entry
                .split("op_code: ")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .and_then(|code| code.parse::<u8>().ok())
                .unwrap()
        };
        for (op, block_device, code) in [
            (Op::Discard, false, opcode::Fallocate::CODE),
            (Op::Discard, true, opcode::UringCmd16::CODE),
            (Op::WriteZeroes, false, opcode::Fallocate::CODE),
            (Op::WriteZeroes, true, opcode::Fallocate::CODE),
            (Op::Write, false, opcode::Write::CODE),
        ] {
            let mut in_flight = InFlight {
                io: PathIo {
                    tag: 0,
                    op,
                    offset: 0,
                    len: 4096,
                    buf: if op == Op::Write {
                        Buffer::zeroed(4096)
                    } else {
                        Buffer::empty()
                    },
                    fua: true,
                },
                done_bytes: 0,
                again: 0,
                syncing: false,
            };
            assert_eq!(op_code(&mut in_flight, block_device), code, "{op:?}");
            in_flight.syncing = true;
            assert_eq!(
                op_code(&mut in_flight, block_device),
                opcode::Fsync::CODE,
                "{op:?}"
            );
        }
    }

    #[test]
    fn dropping_a_queue_cancels_and_reaps_what_the_kernel_holds() {
        let (read_end, _write_end) = pipe();
        let path = Arc::new(FilePath::over(read_end, 1 << 20));
        let mut queue = FileQueue::new(path, 4, None);
        assert!(queue.ring.is_ok(), "{:?}", queue.ring.as_ref().err());
        for tag in 0..2 {
            queue.submit(PathIo::read(tag, 0, Buffer::zeroed(4096)), 0);
        }
        let mut done = Vec::new();
        queue.poll(0, &mut done);
        assert!(done.is_empty(), "nothing was written to the pipe");
        assert_eq!(queue.in_kernel, 2, "both reads wait in the kernel");
        // What the drop does first.
        queue.cancel_and_reap();
        assert_eq!(queue.in_kernel, 0, "the cancellations were reaped");
        let mut tags: Vec<u64> = queue.done.iter().map(|done| done.tag).collect();
        tags.sort_unstable();
        assert_eq!(tags, [0, 1], "every buffer came back");
        assert!(queue
            .done
            .iter()
            .all(|done| matches!(done.outcome, PathOutcome::Path(_))));
    }

    /// A ring lending `slots` fixed files, as a ublk thread's does.
    fn lent_ring(slots: u32) -> (IoUring, RingShare) {
        let ring = IoUring::new(16).expect("an io_uring");
        let share = RingShare::lend(&ring, slots).expect("a sparse file table");
        (ring, share)
    }

    /// What the owning thread does each turn: puts the queue's entries on
    /// its ring, enters it (waiting for `wait` completions), and delivers
    /// what completed, with a completion of another path queue's among
    /// them that the queue must leave.
    fn turn(ring: &mut IoUring, queue: &mut FileQueue, wait: usize) -> Vec<(u64, i32)> {
        queue.drain_entries(&mut |entry| {
            // SAFETY: the entry's buffer stays in the queue until its
            // completion is delivered back (the queue's contract).
            unsafe { ring.submission().push(&entry) }.expect("room on the ring");
        });
        ring.submit_and_wait(wait).expect("io_uring_enter");
        let mut completions: Vec<(u64, i32)> = ring
            .completion()
            .map(|entry| (entry.user_data(), entry.result()))
            .collect();
        assert!(completions
            .iter()
            .all(|&(data, _)| is_path_completion(data)));
        completions.push((path_user_data(3, 0), 0));
        queue.deliver(&mut completions);
        completions
    }

    /// On its thread's ring a queue only fills an outbox and settles what
    /// the thread delivers: the thread may sleep on its ring while the
    /// kernel holds the I/O, a completion that is not the queue's stays
    /// with the thread, and a revoked path's next I/O fails in the kernel
    /// (its fixed file points at nothing).
    #[test]
    fn a_queue_on_its_threads_ring_goes_through_the_exchange() {
        let (mut ring, share) = lent_ring(4);
        let (read_end, write_end) = pipe();
        let path = Arc::new(FilePath::over(read_end, 1 << 20));
        let mut queue = FileQueue::new(Arc::clone(&path), 4, Some(share));
        assert!(matches!(queue.ring, Ok(QueueRing::Shared(_))));
        assert_eq!(queue.rest(), Rest::OnRing, "an empty queue");
        queue.submit(PathIo::read(7, 0, Buffer::zeroed(4096)), 0);
        assert_eq!(queue.rest(), Rest::Ready, "the read is in the outbox");
        let left = turn(&mut ring, &mut queue, 0);
        assert_eq!(left, [(path_user_data(3, 0), 0)], "another queue's");
        assert_eq!(queue.rest(), Rest::OnRing, "the read is with the kernel");
        std::io::Write::write_all(&mut &write_end, &[9u8; 4096]).unwrap();
        let left = turn(&mut ring, &mut queue, 1);
        assert_eq!(left.len(), 1, "the read's completion was the queue's");
        assert_eq!(queue.rest(), Rest::Ready, "a completion to settle");
        let mut done = Vec::new();
        queue.poll(0, &mut done);
        assert_eq!(done.len(), 1);
        assert_eq!((done[0].tag, &done[0].outcome), (7, &PathOutcome::Ok));
        assert!(done[0].buf.as_slice().iter().all(|&byte| byte == 9));
        assert_eq!(queue.rest(), Rest::OnRing, "nothing held, nothing waiting");

        path.revoke();
        queue.submit(PathIo::read(8, 0, Buffer::zeroed(4096)), 0);
        turn(&mut ring, &mut queue, 1);
        queue.poll(0, &mut done);
        assert_eq!(done.len(), 2);
        assert_eq!(done[1].tag, 8);
        assert!(
            matches!(done[1].outcome, PathOutcome::Path(_)),
            "{:?}",
            done[1].outcome
        );
    }

    /// A queue dropped while the kernel holds its I/O retires its slot of
    /// the table (a late completion is never another queue's); one dropped
    /// with nothing held gives it back; a queue finding no slot left gets
    /// a ring of its own, which its thread polls.
    #[test]
    fn a_shared_rings_slots_are_retired_while_the_kernel_holds_io() {
        let (mut ring, share) = lent_ring(2);
        let (read_end, _write_end) = pipe();
        let path = Arc::new(FilePath::over(read_end, 1 << 20));
        let mut held = FileQueue::new(Arc::clone(&path), 4, Some(share.clone()));
        held.submit(PathIo::read(1, 0, Buffer::zeroed(4096)), 0);
        turn(&mut ring, &mut held, 0);
        assert_eq!(held.in_kernel, 1, "the read waits in the kernel");
        drop(held);
        let idle = FileQueue::new(Arc::clone(&path), 4, Some(share.clone()));
        assert!(matches!(idle.ring, Ok(QueueRing::Shared(_))));
        let mut own = FileQueue::new(Arc::clone(&path), 4, Some(share.clone()));
        assert!(
            matches!(own.ring, Ok(QueueRing::Own(_))),
            "the held queue's slot was handed out again"
        );
        assert_eq!(own.rest(), Rest::Poll, "a ring of its own is polled");
        drop(idle);
        let again = FileQueue::new(path, 4, Some(share));
        assert!(
            matches!(again.ring, Ok(QueueRing::Shared(_))),
            "an idle queue's slot came back"
        );
    }
}
