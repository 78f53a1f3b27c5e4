//! One thread's io_uring queue to one file path: the file transport's
//! unsafe code, beside one `statx` call in `limits`.
//!
//! # Shape
//! One ring per path queue, with the path's file registered as fixed file
//! 0: no `fget`/`fput` of a file shared by every I/O thread on each
//! request, and a per-queue switch the kernel itself enforces
//! ([`super::FilePath::revoke`]). Buffers are not registered: each I/O
//! brings its caller's [`mpio_core::io::Buffer`], so fixed buffers would
//! mean a copy into a queue-owned pool, which costs more than the page
//! pinning it saves at 4 KiB. Two path queues of one thread are two rings,
//! so a poll enters the kernel once per path with work queued (measured in
//! `docs/BENCHMARKS.md`: twice the enters for two paths, the same
//! throughput); a shared per-thread ring would halve that.
//!
//! `submit` only writes a submission entry; `poll` enters the kernel once
//! to submit what was queued and reaps completions from the shared ring
//! without a system call when it has nothing to submit. Completions are
//! matched to their I/O by `user_data`, the I/O's slot index.
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
//! - A queue whose ring could not be set up completes every I/O with
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
//! from push to completion; its buffer's heap storage does not move when
//! the `PathIo` that owns it does. Dropping the queue cancels what the
//! kernel holds and waits for it (bounded); buffers still held after the
//! bound are leaked, never freed under the kernel.

#![allow(unsafe_code)]

use super::{end_of_file, outcome_of_errno, FilePath};
use io_uring::{opcode, squeue, types, IoUring};
use mpio_core::io::{Op, PathError, PathOutcome, TargetError};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use mpio_io_loop::{Rest, Waker};
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

/// One thread's queue to one file path. See the module docs.
pub struct FileQueue {
    path: Arc<FilePath>,
    /// The ring (boxed: it is large, and `AnyQueue` holds this queue by
    /// value), or why it could not be set up.
    ring: Result<Box<IoUring>, String>,
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
    /// Fixed file 0 is the path's file (not an empty slot).
    file_registered: bool,
    /// The registered file is a block device.
    block_device: bool,
    /// The ring has the waker the queue was opened with: its completions
    /// signal it while the waker is armed.
    signals_waker: bool,
    /// The waker is armed ([`FileQueue::rest`]) and not yet
    /// disarmed by a poll.
    waker_armed: bool,
}

impl std::fmt::Debug for FileQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileQueue")
            .field("path", &self.path.path())
            .field("ring", &self.ring.as_ref().map(|_| "io_uring"))
            .field("in_kernel", &self.in_kernel)
            .field("backlog", &self.backlog.len())
            .finish()
    }
}

impl FileQueue {
    /// A queue to `path` with room for `depth` I/Os in flight; the ring
    /// signals `waker` (`IORING_REGISTER_EVENTFD`) at each completion.
    pub fn new(path: Arc<FilePath>, depth: usize, waker: Option<Waker>) -> Self {
        let entries = depth.clamp(1, MAX_RING_ENTRIES).next_power_of_two() as u32;
        let mut ring = IoUring::builder()
            .build(entries)
            .and_then(|ring| {
                // Fixed file 0 starts empty (-1); `apply_switch` below
                // points it at the file when there is one.
                ring.submitter().register_files(&[-1])?;
                Ok(Box::new(ring))
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
            });
        let max_in_kernel = match &mut ring {
            Ok(ring) => ring.completion().capacity(),
            Err(_) => 0,
        };
        // Without the registration the queue is only polled, as without
        // a waker: slower to notice, never wrong.
        let signals_waker = match (&mut ring, waker) {
            (Ok(ring), Some(Waker(fd))) => {
                // Disarmed until the poller is about to rest on it.
                ring.completion().disable_eventfd();
                ring.submitter().register_eventfd(fd).is_ok()
            }
            _ => false,
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
            signals_waker,
            waker_armed: false,
        };
        queue.apply_switch();
        queue
    }

    /// [`Rest::OnWaker`] when the waker is all a poller needs to watch:
    /// the ring has it, all the queue holds is submitted (nothing waits in
    /// the submission ring, the backlog, or `done`) and no completion
    /// waits to be reaped; the waker is then armed, and from here to the
    /// next poll every completion signals it. [`Rest::Ready`] when a poll
    /// has something to do at once; [`Rest::Poll`] without a waker.
    ///
    /// The waker is disarmed while the poller is awake
    /// (`IORING_CQ_EVENTFD_DISABLED`, set again by each poll): a completion
    /// the poll reaps itself would otherwise wake the poller once more for
    /// nothing, an extra kernel entry per request at low queue depth.
    /// Arming stores the flag and then reads the completion tail, the
    /// kernel stores the tail and then reads the flag, each with a full
    /// barrier between (our fence; the kernel's `wq_has_sleeper` before
    /// its eventfd signal): one of the two sees the other, so a completion
    /// posted meanwhile either signals the waker or is seen here.
    pub fn rest(&mut self) -> Rest {
        let Ok(ring) = &mut self.ring else {
            return Rest::Poll;
        };
        if !self.signals_waker {
            return Rest::Poll;
        }
        // A backlog the kernel has no room for (as many entries out as
        // the completion ring holds) waits for completions like the rest.
        let backlog_fits = !self.backlog.is_empty() && self.in_kernel < self.max_in_kernel;
        if !self.done.is_empty() || backlog_fits || !ring.submission().is_empty() {
            return Rest::Ready;
        }
        if !self.waker_armed {
            ring.completion().enable_eventfd();
            self.waker_armed = true;
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        if ring.completion().is_empty() {
            Rest::OnWaker
        } else {
            Rest::Ready
        }
    }

    /// Points the ring's fixed file at the path's file, or at nothing while
    /// the path is revoked or not open.
    fn apply_switch(&mut self) {
        let (switches, file) = self.path.switch_state();
        if self.switches_seen == Some(switches) {
            return;
        }
        let Ok(ring) = &self.ring else {
            return;
        };
        let fd = file.map_or(-1, |opened| opened.file.as_raw_fd());
        // Only an unchanged count is skipped next time: a failed update is
        // tried again at the next submit or poll.
        if ring.submitter().register_files_update(0, &[fd]).is_ok() {
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

    /// Pushes waiting slots into the submission ring while it has room.
    fn push_backlog(&mut self) {
        let Ok(ring) = &mut self.ring else {
            return;
        };
        let mut submission = ring.submission();
        while self.in_kernel < self.max_in_kernel {
            let Some(&index) = self.backlog.front() else {
                break;
            };
            let Some(in_flight) = self.slots[index as usize].as_mut() else {
                self.backlog.pop_front();
                continue;
            };
            let entry = entry_for(index, in_flight, self.block_device);
            // SAFETY: the entry points into `in_flight.io.buf`, which stays
            // in `slots`, unmoved and untouched, until this entry's
            // completion is reaped (see the module's Safety section).
            // Fixed file 0 is the path's file, or (revoked, not open) an
            // empty slot, for which the kernel fails the request with EBADF: it
            // never names another file.
            if unsafe { submission.push(&entry) }.is_err() {
                break;
            }
            self.backlog.pop_front();
            self.in_kernel += 1;
        }
    }

    /// Submits what is queued in the ring and reaps what completed.
    fn enter_and_reap(&mut self) {
        let Ok(ring) = &mut self.ring else {
            return;
        };
        if std::mem::take(&mut self.waker_armed) {
            ring.completion().disable_eventfd();
        }
        if !ring.submission().is_empty() {
            // EAGAIN/EBUSY (no room for completions yet) and EINTR leave
            // the entries queued for the next poll; nothing is lost.
            let _ = ring.submit();
        }
        self.reaped.extend(
            ring.completion()
                .map(|entry| (entry.user_data(), entry.result())),
        );
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

/// The submission entry that does (the rest of) `in_flight`'s I/O, on a
/// block device if `block_device`.
fn entry_for(index: u32, in_flight: &mut InFlight, block_device: bool) -> squeue::Entry {
    let file = types::Fixed(0);
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
        Op::Read => {
            let rest = &mut io.buf.as_mut_slice()[done as usize..];
            opcode::Read::new(file, rest.as_mut_ptr(), remaining)
                .offset(offset)
                .build()
        }
        Op::Write => {
            let rest = &io.buf.as_slice()[done as usize..];
            // FUA: the kernel returns once the data is durable (a FUA
            // write to the device under O_DIRECT).
            let flags = if io.fua { libc::RWF_DSYNC } else { 0 };
            opcode::Write::new(file, rest.as_ptr(), remaining)
                .offset(offset)
                .rw_flags(flags)
                .build()
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
    entry.user_data(u64::from(index))
}

impl PathQueue for FileQueue {
    fn submit(&mut self, io: PathIo, _now_ns: u64) {
        self.apply_switch();
        if !self.file_registered {
            // Revoked, or not open: the kernel fails it (EBADF), and a
            // path not open is tried again (`late.rs`).
            self.path.open_later();
        }
        if self.ring.is_err() {
            self.complete_now(io, PathOutcome::Path(PathError::Transport));
            return;
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
    /// Cancels what the kernel holds and reaps it, waiting at most
    /// `DROP_WAIT`: every I/O the kernel gave back is in `done`.
    fn cancel_and_reap(&mut self) {
        if self.in_kernel == 0 {
            return;
        }
        let Ok(ring) = &mut self.ring else {
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
            let Ok(ring) = &mut self.ring else {
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
    use mpio_core::io::Buffer;
    use std::os::fd::FromRawFd;

    /// What a FUA I/O puts in the kernel: a write goes as one write (its
    /// `RWF_DSYNC` is not visible in an entry's Debug form), a discard or
    /// write-zeroes first as itself, then, once it succeeded, as an
    /// `fdatasync` of the same slot.
    #[test]
    fn a_fua_discard_or_write_zeroes_is_synced_after_it() {
        let op_code = |in_flight: &mut InFlight, block_device: bool| {
            let entry = format!("{:?}", entry_for(0, in_flight, block_device));
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

    /// A non-blocking eventfd to use as a waker, and its descriptor.
    fn test_waker() -> (std::os::fd::OwnedFd, std::os::fd::RawFd) {
        // SAFETY: eventfd has no preconditions; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        assert!(raw >= 0, "eventfd: {}", std::io::Error::last_os_error());
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        (unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) }, raw)
    }

    /// The count of eventfd `raw`, which this read resets (0 if unset).
    fn taken_count(raw: std::os::fd::RawFd) -> u64 {
        let mut value = [0u8; 8];
        // SAFETY: `value` is 8 writable bytes; the fd is open.
        let read = unsafe { libc::read(raw, value.as_mut_ptr().cast(), 8) };
        if read == 8 {
            u64::from_ne_bytes(value)
        } else {
            0
        }
    }

    /// A thread sleeping on the waker learns of a completion: the ring
    /// signals it once the read the pipe held completes, not before.
    #[test]
    fn a_queue_opened_with_a_waker_signals_it_at_each_completion() {
        let (waker, raw) = test_waker();
        let count = || taken_count(raw);
        let (read_end, write_end) = pipe();
        let path = Arc::new(FilePath::over(read_end, 1 << 20));
        let mut queue = FileQueue::new(path, 4, Some(Waker(raw)));
        assert_eq!(queue.rest(), Rest::OnWaker, "an empty queue");
        queue.submit(PathIo::read(7, 0, Buffer::zeroed(4096)), 0);
        assert_eq!(queue.rest(), Rest::Ready, "the read is not submitted yet");
        let mut done = Vec::new();
        queue.poll(0, &mut done);
        assert!(done.is_empty());
        assert_eq!(queue.rest(), Rest::OnWaker, "the read is with the kernel");
        assert_eq!(count(), 0, "no completion yet");
        std::io::Write::write_all(&mut &write_end, &[1u8; 4096]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while count() == 0 {
            assert!(Instant::now() < deadline, "the waker never fired");
            std::thread::sleep(Duration::from_millis(1));
        }
        while done.is_empty() {
            assert!(Instant::now() < deadline, "the read never completed");
            queue.poll(0, &mut done);
        }
        assert_eq!(done[0].tag, 7);
        drop(queue);
        drop(waker);
        let mut unwoken = FileQueue::new(Arc::new(FilePath::over(pipe().0, 1)), 1, None);
        assert_eq!(unwoken.rest(), Rest::Poll, "a queue without a waker");
    }

    /// The waker is armed only for a rest: a completion that comes while
    /// the poller is awake does not signal it, and keeps the poller from
    /// resting until it is reaped.
    #[test]
    fn completions_while_awake_leave_the_waker_alone() {
        let (waker, raw) = test_waker();
        let count = || taken_count(raw);
        let (read_end, write_end) = pipe();
        let path = Arc::new(FilePath::over(read_end, 1 << 20));
        let mut queue = FileQueue::new(path, 4, Some(Waker(raw)));
        // Data already there: the read completes within the poll that
        // submits it.
        std::io::Write::write_all(&mut &write_end, &[1u8; 4096]).unwrap();
        queue.submit(PathIo::read(1, 0, Buffer::zeroed(4096)), 0);
        let mut done = Vec::new();
        queue.poll(0, &mut done);
        assert_eq!(done.len(), 1, "the read completed in its poll");
        assert_eq!(count(), 0, "a completion the poll reaped woke the waker");
        // A read the kernel holds, completed while the poller is awake:
        // its completion waits in the ring, unsignalled.
        queue.submit(PathIo::read(2, 0, Buffer::zeroed(4096)), 0);
        queue.poll(0, &mut done);
        assert_eq!(done.len(), 1, "the second read waits for data");
        std::io::Write::write_all(&mut &write_end, &[2u8; 4096]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while queue.ring.as_mut().unwrap().completion().is_empty() {
            assert!(Instant::now() < deadline, "the read never completed");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(count(), 0, "a completion while awake woke the waker");
        assert_eq!(
            queue.rest(),
            Rest::Ready,
            "a completion waits to be reaped: no rest"
        );
        queue.poll(0, &mut done);
        assert_eq!(done.len(), 2);
        assert_eq!(queue.rest(), Rest::OnWaker, "nothing held, nothing waiting");
        drop(queue);
        drop(waker);
    }
}
