//! One ublk device's queue as one I/O thread serves it: the request
//! descriptors the kernel shares with us (`mmap` of `/dev/ublkcN`), a
//! buffer per tag, and the map's [`DeviceQueue`] for this thread. The
//! only unsafe code of the crate with `control.rs` and `ring.rs`.
//!
//! # A tag's life
//! Each tag has at most one command with the kernel or one I/O at the
//! map. FETCH (or COMMIT_AND_FETCH) waits for the tag's next request;
//! its completion says a request arrived, and the descriptor says what.
//! A read, flush, discard or write-zeroes goes to the map as an [`Io`]
//! at once. A write first comes back as NEED_GET_DATA (the device has
//! [`uapi::F_NEED_GET_DATA`]): the tag's buffer is sized to it and
//! handed over with a NEED_GET_DATA command, whose completion means the
//! kernel copied the data in; then it goes to the map. The [`Io`]
//! carries the buffer to the path and its [`Completion`] brings it back
//! (a read's data in it); COMMIT_AND_FETCH hands the result to the
//! kernel, which copies a read's data out of the buffer, and waits for
//! the tag's next request. A command that completes with an error (the
//! device stopped: [`uapi::IO_RES_ABORT`]) ends the tag; when every tag
//! has ended the queue is dropped, closing its share of the char device.
//!
//! # Zero copy
//! A queue given a [`BufferRange`] serves a device made with
//! [`uapi::F_AUTO_BUF_REG`]: each FETCH and COMMIT_AND_FETCH names the
//! tag's slot of the thread's buffer table (its `addr`), and the kernel
//! registers the tag's next read or write there before completing the
//! fetch. The [`Io`] carries [`Buffer::kernel`] naming the slot instead
//! of a buffer, a write needs no NEED_GET_DATA, and a commit gives no
//! address; the kernel unregisters the slot at the commit, and completes
//! the request once no path I/O still uses its pages. A tag that ends
//! with a request's pages still registered has its slot emptied by the
//! thread ([`ServedQueue::ended_buffers`]).
//!
//! # Release
//! A released queue ([`ServedQueue::release`]) takes no new request: a
//! request that arrives (or a write whose data arrives) stays with the
//! kernel unanswered, and so does one the map had no room for. What is
//! at the map goes on, and its answers are committed. Once nothing is at
//! a path the queue is [`ServedQueue::settled`]: what the map still holds
//! waits for a path and never reached one, so when this server ends the
//! kernel can give every unanswered request to the next one
//! ([`uapi::F_USER_RECOVERY_REISSUE`]) without a stale copy of a write
//! still on its way to the storage.
//!
//! # Memory
//! The kernel is given a buffer's address only for a request of that
//! buffer's size (a write's at NEED_GET_DATA, a read's at its commit),
//! so each tag's buffer grows to the largest request it has served and
//! no further: a queue of 4 KiB requests holds 4 KiB per tag, not the
//! device's largest request. A write pays one more command for that.

#![allow(unsafe_code)]

use crate::buffers::BufferRange;
use crate::uapi::{self, IoCmd, IoDesc};
use io_uring::{opcode, squeue, types};
use mpio_core::io::{Buffer, Completion, Io, Op, SECTOR_SIZE};
use mpio_io_loop::Rest;
use mpio_transport::DeviceQueue;
use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::sync::Arc;

/// A ublk device as its queues share it.
#[derive(Debug)]
pub(crate) struct SharedDevice {
    /// Its number.
    pub id: u32,
    /// `/dev/ublkcN`, open read-write.
    pub file: std::fs::File,
    /// Tags per queue.
    pub depth: u16,
    /// Largest request, bytes.
    pub max_io_bytes: u32,
}

/// What a tag holds between its commands.
#[derive(Debug)]
struct Tag {
    /// Its buffer, while the map does not have it.
    buffer: Option<Buffer>,
    /// Its write waits for the kernel to copy the data in.
    getting_data: bool,
    /// What the tag's next COMMIT reports: a read's or write's byte
    /// count, 0, or a negative errno.
    result: i32,
    /// Still has a command with the kernel or an I/O at the map.
    live: bool,
}

/// One device's queue on one thread.
pub(crate) struct ServedQueue {
    device: Arc<SharedDevice>,
    queue_id: u16,
    /// The kernel's descriptors for this queue, `depth` of them.
    descriptors: *const IoDesc,
    mapped_len: usize,
    tags: Vec<Tag>,
    /// Requests the map's queue refused (full), oldest first.
    backlog: VecDeque<Io>,
    /// Tags answered and not yet committed (at most `depth`).
    finished: Vec<u16>,
    map_queue: DeviceQueue,
    live_tags: usize,
    /// Takes no new request (see Release in the module docs).
    released: bool,
    /// Its slots of the thread's buffer table: the device is zero copy.
    buffers: Option<BufferRange>,
    /// Slots of tags that ended since the thread last asked, to empty.
    ended: Vec<u16>,
}

// SAFETY: the descriptor mapping is owned by this queue alone (it unmaps
// it on drop) and only read; the queue moves to its thread once and is
// used there only.
unsafe impl Send for ServedQueue {}

impl std::fmt::Debug for ServedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedQueue")
            .field("device", &self.device.id)
            .field("queue_id", &self.queue_id)
            .field("live_tags", &self.live_tags)
            .finish_non_exhaustive()
    }
}

/// Packs a served queue's slot on its thread and a tag into a ring
/// entry's user data; the two highest values stay free for the ring's
/// own entries (`ring::WAKER`, `ring::HOSTED`).
pub(crate) fn user_data(slot: usize, tag: u16) -> u64 {
    ((slot as u64) << 16) | u64::from(tag)
}

/// The slot and tag of [`user_data`].
pub(crate) fn slot_and_tag(user_data: u64) -> (usize, u16) {
    ((user_data >> 16) as usize, user_data as u16)
}

impl ServedQueue {
    /// Maps queue `queue_id`'s descriptors of `device` and gives each tag
    /// a buffer, or with `buffers` its slot of the thread's buffer table
    /// (zero copy); `map_queue` is this thread's queue on the map.
    ///
    /// # Errors
    /// The mapping failed.
    pub(crate) fn new(
        device: Arc<SharedDevice>,
        queue_id: u16,
        map_queue: DeviceQueue,
        buffers: Option<BufferRange>,
    ) -> std::io::Result<ServedQueue> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let depth = usize::from(device.depth);
        let mapped_len = uapi::descriptors_len(depth, page);
        // SAFETY: a fresh read-only shared mapping of the kernel's
        // descriptor pages for this queue; the kernel checks the offset
        // and length, and nothing else refers to the new range.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped_len,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                device.file.as_raw_fd(),
                uapi::descriptors_offset(queue_id, page),
            )
        };
        if address == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let tags = (0..depth)
            .map(|_| Tag {
                buffer: Some(Buffer::empty()),
                getting_data: false,
                result: 0,
                live: true,
            })
            .collect();
        Ok(ServedQueue {
            queue_id,
            descriptors: address.cast::<IoDesc>().cast_const(),
            mapped_len,
            tags,
            backlog: VecDeque::with_capacity(depth),
            finished: Vec::with_capacity(depth),
            map_queue,
            live_tags: depth,
            released: false,
            buffers,
            ended: Vec::new(),
            device,
        })
    }

    /// The FETCH command of every tag, to be pushed at start. A fetch
    /// gives no buffer: the kernel asks for a write's, and takes a read's
    /// at its commit.
    pub(crate) fn fetches(&self, slot: usize) -> impl Iterator<Item = squeue::Entry> + '_ {
        (0..self.device.depth).map(move |tag| self.command(slot, tag, uapi::IO_FETCH_REQ, 0, 0))
    }

    /// Command `nr` for `tag`, with `result` (COMMIT) and the buffer
    /// address `addr` (0: none); a zero-copy queue's fetches name the
    /// tag's buffer slot.
    fn command(&self, slot: usize, tag: u16, nr: u8, result: i32, addr: u64) -> squeue::Entry {
        let command = IoCmd {
            q_id: self.queue_id,
            tag,
            result,
            addr,
        };
        let mut bytes = [0u8; 16];
        // SAFETY: IoCmd is repr(C), 16 bytes of plain integers.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&command as *const IoCmd).cast::<u8>(),
                bytes.as_mut_ptr(),
                std::mem::size_of::<IoCmd>(),
            );
        }
        let fetches = matches!(nr, uapi::IO_FETCH_REQ | uapi::IO_COMMIT_AND_FETCH_REQ);
        let registration = match &self.buffers {
            Some(buffers) if fetches => Some(uapi::auto_buf_reg(buffers.slot(tag))),
            _ => None,
        };
        opcode::UringCmd16::new(types::Fd(self.device.file.as_raw_fd()), uapi::io_op(nr))
            .cmd(bytes)
            .addr(registration)
            .build()
            .user_data(user_data(slot, tag))
    }

    /// A command of `tag` completed with `result`: a request to serve
    /// (it goes to the map, or waits if the map's queue is full; a write
    /// first asks for its data through `push`), or the end of the tag.
    pub(crate) fn command_done(
        &mut self,
        slot: usize,
        tag: u16,
        result: i32,
        now_ns: u64,
        push: &mut impl FnMut(squeue::Entry),
    ) {
        let index = usize::from(tag);
        if result != uapi::IO_RES_OK && result != uapi::IO_RES_NEED_GET_DATA {
            if result != uapi::IO_RES_ABORT {
                tracing::debug!(device = self.device.id, tag, result, "ublk command failed");
            }
            if std::mem::replace(&mut self.tags[index].live, false) {
                self.live_tags -= 1;
                if let Some(buffers) = &self.buffers {
                    self.ended.push(buffers.slot(tag));
                }
            }
            return;
        }
        if self.released {
            // The kernel gives the request to the next server.
            return;
        }
        // SAFETY: `index < depth`, inside the mapping; the kernel wrote
        // this tag's descriptor before completing its fetch and does
        // not touch it again until the tag's next fetch.
        let descriptor = unsafe { std::ptr::read_volatile(self.descriptors.add(index)) };
        let op = match (descriptor.op_flags & 0xff) as u8 {
            uapi::IO_OP_READ => Op::Read,
            uapi::IO_OP_WRITE => Op::Write,
            uapi::IO_OP_FLUSH => Op::Flush,
            uapi::IO_OP_DISCARD => Op::Discard,
            uapi::IO_OP_WRITE_ZEROES => Op::WriteZeroes,
            _ => return self.answer_at_once(tag, -libc::EOPNOTSUPP),
        };
        let transfers = matches!(op, Op::Read | Op::Write);
        let len = u64::from(descriptor.nr_sectors) * SECTOR_SIZE;
        let len = match u32::try_from(len) {
            Ok(len) if !transfers || len <= self.device.max_io_bytes => len,
            _ => return self.answer_at_once(tag, -libc::EINVAL),
        };
        let tag_state = &mut self.tags[index];
        // A read or write commits its byte count, anything else 0.
        tag_state.result = if transfers { len as i32 } else { 0 };
        if transfers && self.buffers.is_none() && !tag_state.getting_data {
            let buffer = tag_state.buffer.as_mut().expect("the buffer is home");
            buffer.resize(len as usize);
            if result == uapi::IO_RES_NEED_GET_DATA {
                // The kernel copies the write's data in, then completes
                // this command with OK.
                tag_state.getting_data = true;
                let addr = buffer.as_mut_slice().as_mut_ptr() as u64;
                push(self.command(slot, tag, uapi::IO_NEED_GET_DATA, 0, addr));
                return;
            }
        }
        tag_state.getting_data = false;
        let buf = match &self.buffers {
            _ if !transfers => Buffer::empty(),
            // The request's own pages, registered at the tag's slot.
            Some(buffers) => Buffer::kernel(buffers.slot(tag), len as usize),
            None => tag_state.buffer.take().expect("the buffer is home"),
        };
        let io = Io {
            user_data: u64::from(tag),
            op,
            offset: descriptor.start_sector * SECTOR_SIZE,
            len,
            buf,
            fua: descriptor.op_flags & uapi::IO_F_FUA != 0,
        };
        if let Err(io) = self.map_queue.submit(io, now_ns) {
            self.backlog.push_back(io);
        }
    }

    /// Answers `tag`'s request with `result` at the next poll, without
    /// the map.
    fn answer_at_once(&mut self, tag: u16, result: i32) {
        self.tags[usize::from(tag)].result = result;
        self.finished.push(tag);
    }

    /// Hands its file paths their completions of `path_done` (reaped
    /// from the thread's ring), submits what waited for room at the map,
    /// polls the map, pushes a COMMIT_AND_FETCH for every answered
    /// request through `push`, then the entries its file paths wrote for
    /// the ring; returns how many it answered.
    pub(crate) fn poll(
        &mut self,
        slot: usize,
        now_ns: u64,
        path_done: &mut Vec<(u64, i32)>,
        push: &mut impl FnMut(squeue::Entry),
    ) -> usize {
        if !path_done.is_empty() {
            self.map_queue.deliver(path_done);
        }
        while let Some(io) = self.backlog.pop_front() {
            if let Err(io) = self.map_queue.submit(io, now_ns) {
                self.backlog.push_front(io);
                break;
            }
        }
        let tags = &mut self.tags;
        let finished = &mut self.finished;
        self.map_queue.poll(now_ns, &mut |completion: Completion| {
            let tag = &mut tags[completion.user_data as usize];
            if tag.buffer.is_none() {
                tag.buffer = Some(completion.buf);
            }
            if let Err(error) = completion.result {
                tag.result = -error.errno();
            }
            finished.push(completion.user_data as u16);
        });
        let answered = self.finished.len();
        for index in 0..answered {
            let tag = self.finished[index];
            let tag_state = &mut self.tags[usize::from(tag)];
            let result = tag_state.result;
            // A read's data leaves from the buffer; other commits give
            // none.
            let addr = match tag_state.buffer.as_mut() {
                Some(buffer) if !buffer.is_empty() => buffer.as_mut_slice().as_mut_ptr() as u64,
                _ => 0,
            };
            push(self.command(slot, tag, uapi::IO_COMMIT_AND_FETCH_REQ, result, addr));
        }
        self.finished.clear();
        if self.map_queue.in_flight() > 0 {
            self.map_queue.drain_entries(push);
        }
        answered
    }

    /// Requests are at the map or waiting for room there.
    pub(crate) fn is_busy(&self) -> bool {
        self.map_queue.in_flight() > 0 || !self.backlog.is_empty() || !self.finished.is_empty()
    }

    /// What the thread may do about this queue before its next turn: what
    /// the map's queue says for its paths ([`DeviceQueue::rest`]).
    /// Answers never wait here (each turn's poll commits them all), and
    /// requests the map had no room for wait, as the map's own held I/O
    /// does, for its paths' completions or the thread's bounded rest.
    pub(crate) fn rest(&mut self) -> Rest {
        self.map_queue.rest()
    }

    /// The buffer slots of tags that ended since the last call, which the
    /// thread empties (see Zero copy in the module docs).
    pub(crate) fn ended_buffers(&mut self) -> std::vec::Drain<'_, u16> {
        self.ended.drain(..)
    }

    /// The device this queue serves.
    pub(crate) fn device_id(&self) -> u32 {
        self.device.id
    }

    /// Takes no new request from now on; requests the map had no room
    /// for are left to the kernel (see Release in the module docs).
    pub(crate) fn release(&mut self) {
        self.released = true;
        self.backlog.clear();
    }

    /// Requests at a path (sent, or taken back by a timeout the path has
    /// not answered), and requests the map holds waiting for a path.
    pub(crate) fn at_paths_and_waiting(&self) -> (usize, usize) {
        let waiting = self.map_queue.waiting_for_path();
        (self.map_queue.in_flight() - waiting, waiting)
    }

    /// Released, nothing at a path, and every answer handed to the ring.
    pub(crate) fn settled(&self) -> bool {
        self.released && self.finished.is_empty() && self.at_paths_and_waiting().0 == 0
    }

    /// Every tag has ended and nothing is at the map: the queue can go.
    pub(crate) fn is_finished(&self) -> bool {
        self.live_tags == 0 && !self.is_busy()
    }
}

impl Drop for ServedQueue {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `new` with this length and is
        // unmapped once, here; no reference into it outlives the queue.
        unsafe { libc::munmap(self.descriptors.cast_mut().cast(), self.mapped_len) };
    }
}
