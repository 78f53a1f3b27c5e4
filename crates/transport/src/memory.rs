//! The `memory` transport: one RAM disk reached through several ports,
//! each port a path with its own run-time fault switches. It is the test
//! bed of failover: data written through one port reads back through any
//! other, and a port can be made to fail, hang, disconnect or slow down
//! while I/O runs.
//!
//! # Semantics of the switches ([`PortControl`])
//! - healthy: I/O takes effect and completes after the port's latency;
//! - `fail(outcome)`: I/O completes with `outcome` and never touches the
//!   disk — also I/O already waiting out its latency;
//! - `hang`: I/O in flight and I/O sent after is held and never completes
//!   until `heal`; a held I/O can be aborted and then never takes effect;
//! - `disconnect`: everything in flight, and everything sent after, ends
//!   with [`PathError::ConnectionLost`] without touching the disk.
//!
//! # Fencing
//! A write takes effect at its completion, so an I/O that did not
//! complete successfully never changed the disk: a held I/O is taken
//! back whole by `abort`, and a disconnect ends what was in flight
//! without effect. Every path error this transport reports is therefore
//! fenced (the core may retry at once), and it never needs
//! [`PathQueue::abandon`]. A RAM disk has no cache to lose, so every
//! completed write is as durable as it gets: FUA
//! ([`mpio_core::queue::PathIo::fua`]) and flush need nothing more. I/Os complete in the
//! order they were submitted; a latency change applies to I/O submitted
//! after it.
//!
//! # Memory
//! A disk is sparse, as nbdkit's memory plugin is: a chunk of
//! [`CHUNK_SIZE`] bytes takes memory when first written, reads of a chunk
//! never written return zeroes, and a discard or write-zeroes that covers
//! a whole chunk gives its memory back. What stays allocated is an index
//! of one empty slot per chunk (24 bytes per 64 KiB). The registry refuses
//! a disk larger than the host's memory ([`crate::host::memory_bytes`]);
//! a write whose chunk cannot be allocated fails with
//! [`TargetError::NoSpace`] instead of aborting the process.
//!
//! # Concurrency
//! The disk is split in chunks, each behind its own mutex, so threads
//! working on different chunks do not contend; an I/O locks its chunks one
//! at a time in ascending order. A port's switches are atomics read once
//! per submission and poll.

use mpio_core::io::{Op, PathError, PathOutcome, TargetError};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes per lock-protected chunk of a memory disk, and the unit in
/// which it takes memory.
pub const CHUNK_SIZE: usize = 64 * 1024;

/// One chunk: its bytes once written, `None` while it reads as zeroes.
type Chunk = Option<Box<[u8]>>;

/// A sparse RAM disk shared by every port and thread.
#[derive(Debug)]
pub struct MemoryDisk {
    size_bytes: u64,
    chunks: Box<[Mutex<Chunk>]>,
}

impl MemoryDisk {
    /// A disk of `size_bytes` that reads as zeroes and holds no data yet
    /// (only its index of chunks; the caller bounds the size by the
    /// host's memory).
    pub fn new(size_bytes: u64) -> Self {
        let chunk_count = (size_bytes as usize).div_ceil(CHUNK_SIZE);
        MemoryDisk {
            size_bytes,
            chunks: (0..chunk_count).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// Bytes of data the disk holds in memory now: its written chunks.
    pub fn allocated_bytes(&self) -> u64 {
        let written = self
            .chunks
            .iter()
            .filter(|chunk| crate::lock(chunk).is_some())
            .count();
        (written * CHUNK_SIZE) as u64
    }

    /// Reads `buf.len()` bytes at `offset` (caller checked the range).
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        self.for_each_chunk(offset, buf.len(), |chunk, range, done| {
            let target = &mut buf[done..done + range.len()];
            match chunk {
                Some(bytes) => target.copy_from_slice(&bytes[range]),
                None => target.fill(0),
            }
            Ok(())
        })
        .unwrap_or_else(|never: std::convert::Infallible| match never {});
    }

    /// Writes `data` at `offset` (caller checked the range).
    ///
    /// # Errors
    /// [`TargetError::NoSpace`] if a chunk written for the first time
    /// cannot be allocated; the disk's data is unchanged then (a write
    /// over several chunks first allocates those it lacks, which still
    /// read as zeroes, then copies; one within a chunk does both under
    /// one lock).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), TargetError> {
        let within_one_chunk = (offset as usize % CHUNK_SIZE) + data.len() <= CHUNK_SIZE;
        if !within_one_chunk {
            self.for_each_chunk(offset, data.len(), |chunk, _, _| {
                if chunk.is_none() {
                    *chunk = Some(zeroed_chunk()?);
                }
                Ok(())
            })?;
        }
        self.for_each_chunk(offset, data.len(), |chunk, range, done| {
            let source = &data[done..done + range.len()];
            let bytes = match chunk {
                Some(bytes) => bytes,
                None => chunk.insert(zeroed_chunk()?),
            };
            bytes[range].copy_from_slice(source);
            Ok(())
        })
    }

    /// Makes `len` bytes at `offset` read as zeroes (caller checked the
    /// range): a whole chunk's memory is given back.
    pub fn zero(&self, offset: u64, len: usize) {
        self.for_each_chunk(offset, len, |chunk, range, _| {
            if range.len() == CHUNK_SIZE {
                *chunk = None;
            } else if let Some(bytes) = chunk {
                bytes[range].fill(0);
            }
            Ok(())
        })
        .unwrap_or_else(|never: std::convert::Infallible| match never {});
    }

    /// Calls `visit(chunk, range_in_chunk, bytes_done_before)` for each
    /// chunk `offset..offset + len` covers, in order, holding its lock;
    /// stops at the first error.
    fn for_each_chunk<E>(
        &self,
        offset: u64,
        len: usize,
        mut visit: impl FnMut(&mut Chunk, std::ops::Range<usize>, usize) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut done = 0;
        while done < len {
            let position = offset as usize + done;
            let chunk_index = position / CHUNK_SIZE;
            let start = position % CHUNK_SIZE;
            let end = (start + (len - done)).min(CHUNK_SIZE);
            let mut chunk = crate::lock(&self.chunks[chunk_index]);
            visit(&mut chunk, start..end, done)?;
            done += end - start;
        }
        Ok(())
    }

    /// Applies `io` to the disk and says how it ended.
    fn apply(&self, io: &mut PathIo) -> PathOutcome {
        let in_range = io
            .offset
            .checked_add(u64::from(io.len))
            .is_some_and(|end| end <= self.size_bytes);
        if !in_range && io.op != Op::Flush {
            return PathOutcome::Target(TargetError::OutOfRange);
        }
        match io.op {
            Op::Read => self.read(io.offset, io.buf.as_mut_slice()),
            Op::Write => {
                if let Err(error) = self.write(io.offset, io.buf.as_slice()) {
                    return PathOutcome::Target(error);
                }
            }
            Op::WriteZeroes | Op::Discard => self.zero(io.offset, io.len as usize),
            Op::Flush => {}
        }
        PathOutcome::Ok
    }
}

/// A chunk of zeroes, or [`TargetError::NoSpace`] if the memory cannot be
/// had (where `vec!` would abort the process).
fn zeroed_chunk() -> Result<Box<[u8]>, TargetError> {
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(CHUNK_SIZE)
        .map_err(|_| TargetError::NoSpace)?;
    bytes.resize(CHUNK_SIZE, 0);
    Ok(bytes.into_boxed_slice())
}

const HEALTHY: u8 = 0;
const FAILING: u8 = 1;
const HANGING: u8 = 2;
const DISCONNECTED: u8 = 3;

/// The run-time switches of one port, shared by the threads using it and
/// whoever injects faults.
#[derive(Debug, Default)]
pub struct PortControl {
    mode: AtomicU8,
    failure: AtomicU8,
    latency_ns: AtomicU64,
    /// Disconnections so far: a thread's queue compares it with the count
    /// it last saw to drop what it had in flight.
    disconnects: AtomicU64,
    completed: AtomicU64,
    fua_completed: AtomicU64,
}

const OUTCOMES: [PathOutcome; 12] = [
    PathOutcome::Path(PathError::Transport),
    PathOutcome::Path(PathError::Timeout),
    PathOutcome::Path(PathError::ConnectionLost),
    PathOutcome::Path(PathError::Unknown),
    PathOutcome::Target(TargetError::OutOfRange),
    PathOutcome::Target(TargetError::NoSpace),
    PathOutcome::Target(TargetError::Medium),
    PathOutcome::Target(TargetError::Protection),
    PathOutcome::Target(TargetError::NotSupported),
    PathOutcome::Target(TargetError::Invalid),
    PathOutcome::Target(TargetError::ReservationConflict),
    PathOutcome::Busy,
];

impl PortControl {
    // Orderings: Release on every switch and Acquire on every read, so a
    // thread that sees a new mode also sees the failure kind and latency
    // set before it. The switches carry no other data.

    /// Serve I/O again (ends `fail`, `hang` and `disconnect`); held I/O
    /// completes at the next poll.
    pub fn heal(&self) {
        self.mode.store(HEALTHY, Ordering::Release);
    }

    /// Complete every I/O with `outcome` (not [`PathOutcome::Ok`]) without
    /// touching the disk.
    pub fn fail(&self, outcome: PathOutcome) {
        let code = OUTCOMES
            .iter()
            .position(|known| *known == outcome)
            .unwrap_or(0);
        self.failure.store(code as u8, Ordering::Release);
        self.mode.store(FAILING, Ordering::Release);
    }

    /// Hold every new I/O until `heal`.
    pub fn hang(&self) {
        self.mode.store(HANGING, Ordering::Release);
    }

    /// Drop the connection: I/O in flight and after ends with
    /// `ConnectionLost` until `heal`.
    pub fn disconnect(&self) {
        self.disconnects.fetch_add(1, Ordering::Release);
        self.mode.store(DISCONNECTED, Ordering::Release);
    }

    /// Complete each I/O `latency_ns` after its submission.
    pub fn set_latency_ns(&self, latency_ns: u64) {
        self.latency_ns.store(latency_ns, Ordering::Release);
    }

    /// I/Os this port completed successfully, over all threads.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    /// Of those, the ones that asked for force unit access.
    pub fn fua_completed(&self) -> u64 {
        self.fua_completed.load(Ordering::Relaxed)
    }

    fn mode(&self) -> u8 {
        self.mode.load(Ordering::Acquire)
    }

    fn failure(&self) -> PathOutcome {
        OUTCOMES[usize::from(self.failure.load(Ordering::Acquire)) % OUTCOMES.len()]
    }
}

/// One thread's queue to one port of a memory disk.
#[derive(Debug)]
pub struct MemoryQueue {
    disk: Arc<MemoryDisk>,
    control: Arc<PortControl>,
    /// I/Os waiting out their latency, by due time.
    pending: VecDeque<(u64, PathIo)>,
    /// I/Os held by a hang.
    held: VecDeque<PathIo>,
    /// I/Os whose outcome is known, to hand over at the next poll.
    done: Vec<PathCompletion>,
    disconnects_seen: u64,
}

impl MemoryQueue {
    /// A queue to `disk` through the port switched by `control`.
    pub fn new(disk: Arc<MemoryDisk>, control: Arc<PortControl>, depth: usize) -> Self {
        let disconnects_seen = control.disconnects.load(Ordering::Acquire);
        MemoryQueue {
            disk,
            control,
            pending: VecDeque::with_capacity(depth),
            held: VecDeque::new(),
            done: Vec::with_capacity(depth),
            disconnects_seen,
        }
    }

    fn finish(&mut self, mut io: PathIo, failure: Option<PathOutcome>) {
        let outcome = match failure {
            Some(outcome) => outcome,
            None => {
                let outcome = self.disk.apply(&mut io);
                if outcome == PathOutcome::Ok {
                    // Relaxed: statistics for tests and status.
                    self.control.completed.fetch_add(1, Ordering::Relaxed);
                    if io.fua {
                        self.control.fua_completed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                outcome
            }
        };
        self.done.push(PathCompletion {
            tag: io.tag,
            buf: io.buf,
            outcome,
        });
    }

    /// The failure the port imposes now, if any.
    fn imposed_failure(&self) -> Option<PathOutcome> {
        match self.control.mode() {
            FAILING => Some(self.control.failure()),
            DISCONNECTED => Some(PathOutcome::Path(PathError::ConnectionLost)),
            _ => None,
        }
    }
}

impl MemoryQueue {
    /// Brings the queue up to date with the port's switches before any new
    /// I/O is queued, so a switch flipped between two calls affects exactly
    /// the I/O sent before it: a disconnect ends what was in flight (and
    /// nothing sent after a later heal); a hang holds what was waiting; a
    /// heal releases held I/O ahead of anything sent after it.
    fn settle(&mut self, now_ns: u64) {
        let disconnects = self.control.disconnects.load(Ordering::Acquire);
        if disconnects != self.disconnects_seen {
            self.disconnects_seen = disconnects;
            let lost = Some(PathOutcome::Path(PathError::ConnectionLost));
            while let Some(io) = self.held.pop_front() {
                self.finish(io, lost);
            }
            while let Some((_, io)) = self.pending.pop_front() {
                self.finish(io, lost);
            }
        }
        if self.control.mode() == HANGING {
            while let Some((_, io)) = self.pending.pop_front() {
                self.held.push_back(io);
            }
        } else {
            // Held I/O is older than anything in `pending`: settle runs
            // before every submission, so nothing was queued since the heal.
            while let Some(io) = self.held.pop_back() {
                self.pending.push_front((now_ns, io));
            }
        }
    }
}

impl PathQueue for MemoryQueue {
    fn submit(&mut self, io: PathIo, now_ns: u64) {
        self.settle(now_ns);
        match self.control.mode() {
            HANGING => self.held.push_back(io),
            _ => {
                let latency_ns = self.control.latency_ns.load(Ordering::Acquire);
                self.pending
                    .push_back((now_ns.saturating_add(latency_ns), io));
            }
        }
    }

    fn poll(&mut self, now_ns: u64, completions: &mut Vec<PathCompletion>) {
        self.settle(now_ns);
        while self
            .pending
            .front()
            .is_some_and(|(due_ns, _)| *due_ns <= now_ns)
        {
            if let Some((_, io)) = self.pending.pop_front() {
                let failure = self.imposed_failure();
                self.finish(io, failure);
            }
        }
        completions.append(&mut self.done);
    }

    fn abort(&mut self, tag: u64) -> Option<PathIo> {
        if let Some(position) = self.held.iter().position(|io| io.tag == tag) {
            return self.held.remove(position);
        }
        let position = self.pending.iter().position(|(_, io)| io.tag == tag)?;
        self.pending.remove(position).map(|(_, io)| io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpio_core::io::Buffer;

    fn write(tag: u64, fill: u8) -> PathIo {
        let mut buf = Buffer::zeroed(512);
        buf.as_mut_slice().fill(fill);
        PathIo {
            tag,
            op: Op::Write,
            offset: 0,
            len: 512,
            buf,
            fua: false,
        }
    }

    fn setup() -> (Arc<MemoryDisk>, Arc<PortControl>, MemoryQueue) {
        let disk = Arc::new(MemoryDisk::new(4096));
        let control = Arc::new(PortControl::default());
        let queue = MemoryQueue::new(Arc::clone(&disk), Arc::clone(&control), 4);
        (disk, control, queue)
    }

    #[test]
    fn held_writes_land_before_writes_sent_after_the_heal() {
        let (disk, control, mut queue) = setup();
        control.hang();
        queue.submit(write(1, 0xAA), 0);
        control.heal();
        queue.submit(write(2, 0xBB), 0);
        let mut done = Vec::new();
        queue.poll(0, &mut done);
        assert_eq!(done.iter().map(|c| c.tag).collect::<Vec<_>>(), [1, 2]);
        let mut byte = [0u8; 1];
        disk.read(0, &mut byte);
        assert_eq!(byte[0], 0xBB, "the newer write wins");
    }

    #[test]
    fn a_disconnect_ends_only_what_was_sent_before_it() {
        let (_, control, mut queue) = setup();
        queue.submit(write(1, 1), 0);
        control.disconnect();
        control.heal();
        queue.submit(write(2, 2), 0);
        let mut done = Vec::new();
        queue.poll(0, &mut done);
        let outcomes: Vec<_> = done.iter().map(|c| (c.tag, c.outcome)).collect();
        assert_eq!(
            outcomes,
            [
                (1, PathOutcome::Path(PathError::ConnectionLost)),
                (2, PathOutcome::Ok)
            ]
        );
    }

    #[test]
    fn an_aborted_held_write_never_lands() {
        let (disk, control, mut queue) = setup();
        control.hang();
        queue.submit(write(1, 0xCC), 0);
        assert_eq!(queue.abort(1).map(|io| io.tag), Some(1));
        control.heal();
        let mut done = Vec::new();
        queue.poll(0, &mut done);
        assert!(done.is_empty());
        let mut byte = [0u8; 1];
        disk.read(0, &mut byte);
        assert_eq!(byte[0], 0);
    }
}
