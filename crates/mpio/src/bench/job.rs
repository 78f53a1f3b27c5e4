//! One bench job: a thread that keeps `iodepth` I/Os in flight against a
//! [`Target`] until its runtime or I/O count is reached.
//!
//! The loop is the same for every target, so the raw baseline and the map
//! pay the same harness costs: one clock read per batch, buffers reused,
//! no allocation per I/O. Latency is measured at batch granularity: from
//! the batch an I/O was submitted in to the batch its completion was seen.

use super::histogram::Histogram;
use mpio_core::io::{Buffer, Completion, Io, IoError, Op, PathOutcome};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue, Queue};
use mpio_transport::{clock, AnyQueue};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The access pattern, as fio's `--rw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    /// Random reads.
    Randread,
    /// Random writes.
    Randwrite,
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads and writes, half each.
    Randrw,
}

/// When a job stops issuing I/O.
#[derive(Clone, Copy, Debug)]
pub enum Limit {
    /// After this many ns.
    Runtime(u64),
    /// After this many I/Os.
    Ios(u64),
}

/// What one job does.
#[derive(Clone, Copy, Debug)]
pub struct JobSpec {
    pub rw: Rw,
    pub block_size: u32,
    pub iodepth: usize,
    pub limit: Limit,
    pub size_bytes: u64,
    pub job_index: u64,
}

/// What one job measured.
#[derive(Clone, Debug, Default)]
pub struct JobResult {
    pub ios: u64,
    pub reads: u64,
    pub writes: u64,
    pub errors: u64,
    pub first_error: Option<IoError>,
    pub elapsed_ns: u64,
    pub latency: Histogram,
    /// Attempts dispatched to each path; empty for raw.
    pub path_dispatched: Vec<u64>,
}

/// Where a job sends its I/O.
pub trait Target {
    /// See [`Queue::submit`].
    fn submit(&mut self, io: Io, now_ns: u64) -> Result<(), Io>;
    /// See [`Queue::poll`].
    fn poll<F: FnMut(Completion)>(&mut self, now_ns: u64, sink: &mut F) -> usize;
    /// Attempts dispatched to each path, if the target has paths.
    fn path_dispatched(&self) -> Vec<u64>;
}

impl Target for Queue<AnyQueue> {
    #[inline]
    fn submit(&mut self, io: Io, now_ns: u64) -> Result<(), Io> {
        Queue::submit(self, io, now_ns)
    }

    #[inline]
    fn poll<F: FnMut(Completion)>(&mut self, now_ns: u64, sink: &mut F) -> usize {
        Queue::poll(self, now_ns, sink)
    }

    fn path_dispatched(&self) -> Vec<u64> {
        dispatched(self)
    }
}

/// Attempts `queue` dispatched to each path of its map.
fn dispatched(queue: &Queue<AnyQueue>) -> Vec<u64> {
    queue
        .path_loads()
        .iter()
        .map(|load| load.dispatched())
        .collect()
}

/// The baseline: one path's transport queue with no map above it.
#[derive(Debug)]
pub struct RawTarget {
    path: AnyQueue,
    scratch: Vec<PathCompletion>,
}

impl RawTarget {
    /// A raw target over `path`, for `iodepth` I/Os.
    pub fn new(path: AnyQueue, iodepth: usize) -> Self {
        RawTarget {
            path,
            scratch: Vec::with_capacity(iodepth),
        }
    }
}

impl Target for RawTarget {
    #[inline]
    fn submit(&mut self, io: Io, now_ns: u64) -> Result<(), Io> {
        let path_io = PathIo {
            tag: io.user_data,
            op: io.op,
            offset: io.offset,
            len: io.len,
            buf: io.buf,
            fua: io.fua,
        };
        self.path.submit(path_io, now_ns);
        Ok(())
    }

    #[inline]
    fn poll<F: FnMut(Completion)>(&mut self, now_ns: u64, sink: &mut F) -> usize {
        self.path.poll(now_ns, &mut self.scratch);
        let handed = self.scratch.len();
        for completion in self.scratch.drain(..) {
            sink(Completion {
                user_data: completion.tag,
                buf: completion.buf,
                result: match completion.outcome {
                    PathOutcome::Ok => Ok(()),
                    PathOutcome::Target(error) => Err(IoError::Target(error)),
                    PathOutcome::Path(_) | PathOutcome::Busy => Err(IoError::NoPath),
                },
            });
        }
        handed
    }

    fn path_dispatched(&self) -> Vec<u64> {
        Vec::new()
    }
}

/// The map behind one mutex shared by every job, as dm-mpath was before
/// its lockless fast path: every routing decision and completion pass
/// serialises on it.
#[derive(Debug)]
pub struct LockedTarget {
    pub queue: Queue<AnyQueue>,
    pub lock: Arc<Mutex<()>>,
}

impl Target for LockedTarget {
    #[inline]
    fn submit(&mut self, io: Io, now_ns: u64) -> Result<(), Io> {
        let _guard = self
            .lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.queue.submit(io, now_ns)
    }

    #[inline]
    fn poll<F: FnMut(Completion)>(&mut self, now_ns: u64, sink: &mut F) -> usize {
        let _guard = self
            .lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.queue.poll(now_ns, sink)
    }

    fn path_dispatched(&self) -> Vec<u64> {
        dispatched(&self.queue)
    }
}

/// xorshift64*: a fast deterministic generator for offsets.
struct Random(u64);

impl Random {
    #[inline]
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Runs one job to its limit; `progress` counts its completed I/Os as it
/// goes (updated once per batch).
pub fn run_job<T: Target>(target: &mut T, spec: &JobSpec, progress: &AtomicU64) -> JobResult {
    let block_size = u64::from(spec.block_size);
    let block_count = (spec.size_bytes / block_size).max(1);
    let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ (spec.job_index + 1).wrapping_mul(0x1000_0001));
    let mut sequential_block = spec.job_index * block_count / 8 % block_count;
    let mut buffers: Vec<Buffer> = (0..spec.iodepth)
        .map(|_| Buffer::zeroed(spec.block_size as usize))
        .collect();
    let mut submitted_ns = vec![0u64; spec.iodepth];
    let mut free: Vec<u64> = (0..spec.iodepth as u64).collect();
    let mut result = JobResult::default();
    let mut issued = 0u64;
    let start_ns = clock::now_ns();
    let mut in_flight = 0usize;
    let mut slot_writes = vec![false; spec.iodepth];
    loop {
        let now_ns = clock::now_ns();
        let may_issue = |issued: u64| match spec.limit {
            Limit::Runtime(runtime_ns) => now_ns - start_ns < runtime_ns,
            Limit::Ios(ios) => issued < ios,
        };
        if !may_issue(issued) && in_flight == 0 {
            break;
        }
        while may_issue(issued) {
            let Some(slot) = free.pop() else { break };
            let (op, block) = match spec.rw {
                Rw::Randread => (Op::Read, random.next() % block_count),
                Rw::Randwrite => (Op::Write, random.next() % block_count),
                Rw::Randrw => {
                    let value = random.next();
                    let op = if value >> 63 == 0 {
                        Op::Read
                    } else {
                        Op::Write
                    };
                    (op, value % block_count)
                }
                Rw::Read | Rw::Write => {
                    let block = sequential_block;
                    sequential_block = (sequential_block + 1) % block_count;
                    (
                        if spec.rw == Rw::Read {
                            Op::Read
                        } else {
                            Op::Write
                        },
                        block,
                    )
                }
            };
            let io = Io {
                user_data: slot,
                op,
                offset: block * block_size,
                len: spec.block_size,
                buf: std::mem::replace(&mut buffers[slot as usize], Buffer::empty()),
                fua: false,
            };
            match target.submit(io, now_ns) {
                Ok(()) => {
                    submitted_ns[slot as usize] = now_ns;
                    slot_writes[slot as usize] = op == Op::Write;
                    in_flight += 1;
                    issued += 1;
                }
                Err(io) => {
                    buffers[slot as usize] = io.buf;
                    free.push(slot);
                    break;
                }
            }
        }
        let handed = target.poll(now_ns, &mut |completion: Completion| {
            let slot = completion.user_data as usize;
            result.latency.record(now_ns - submitted_ns[slot]);
            if let Err(error) = completion.result {
                result.errors += 1;
                result.first_error.get_or_insert(error);
            }
            if slot_writes[slot] {
                result.writes += 1;
            } else {
                result.reads += 1;
            }
            buffers[slot] = completion.buf;
            free.push(completion.user_data);
        });
        if handed > 0 {
            in_flight -= handed;
            result.ios += handed as u64;
            // Relaxed: a progress display; nothing is published through it.
            progress.fetch_add(handed as u64, Ordering::Relaxed);
        }
    }
    result.elapsed_ns = clock::now_ns() - start_ns;
    result.path_dispatched = target.path_dispatched();
    result
}
