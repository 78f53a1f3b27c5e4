//! The per-thread I/O queue: route, dispatch, complete, fail over.
//!
//! Each I/O thread owns one [`Queue`] per map (blk-mq's hardware context,
//! SPDK's I/O channel), holding its own transport queue per path. An I/O
//! is submitted once and completes exactly once, whatever its paths do:
//!
//! - a path error (transport error, timeout, connection lost, unknown)
//!   fails the path and retries the I/O on another usable path;
//! - a target error goes back to the caller unchanged;
//! - with no usable path, the I/O waits (`queue_if_no_path`, bounded by
//!   [`MapOptions::no_path_timeout_ns`]) or fails with [`IoError::NoPath`];
//! - a write, write-zeroes, discard or flush its path may still apply is
//!   never retried elsewhere: an attempt past its I/O timeout that the
//!   transport cannot take back waits for the path to be fenced (see
//!   [`PathQueue`]), and past [`MapOptions::fence_timeout_ns`] it fails
//!   with [`IoError::Unfenced`] (EIO); a read so held is retried;
//! - a path busy without progress gets no new I/O, and a read held past
//!   its path's hedge delay goes down another path (`crate::stall`).
//!
//! # Design of the fence
//! The transport says only what it knows: a path error through `poll`
//! means "fenced, it cannot land any more", `abort` gives back what never
//! reached the storage, `abandon` lets go of what may still land. The
//! decision to retry or fail stays here, in one place, where the
//! simulator's canary (`--cfg mpio_canary_unfenced`) can break it and be
//! caught. The fence deadline needs no state per I/O: it is the attempt's
//! start plus the I/O and fence timeouts, checked by the timeout scan.
//!
//! # Concurrency
//! A queue is used by one thread. Submit and completion touch no lock that
//! another thread takes, and write nothing another thread reads per I/O:
//! routing reads the snapshot this queue holds and one atomic (the map's
//! generation); selectors read this queue's own [`PathLoad`] records and
//! selector state. The map's control lock is taken only
//! to fail a path, once per path failure, or to fetch a new snapshot after
//! a change.
//!
//! # Allocation
//! None per I/O: slots, free list, waiting list and completion lists are
//! sized to the queue depth when the queue is built, and buffers travel
//! with their I/Os.
//!
//! [`MapOptions::no_path_timeout_ns`]: crate::map::MapOptions::no_path_timeout_ns
//! [`MapOptions::fence_timeout_ns`]: crate::map::MapOptions::fence_timeout_ns

use crate::io::{Buffer, Completion, Io, IoError, Op, PathError, PathOutcome};
use crate::load::PathLoad;
use crate::map::Map;
use crate::selector::{Pick, SelectorThreadState};
use crate::snapshot::{Route, Snapshot};
use crate::stall::Stalls;
use crate::sync::Arc;
use std::collections::VecDeque;

mod timers;

/// Largest queue depth (I/Os in flight on one queue).
pub const MAX_QUEUE_DEPTH: usize = 1 << 16;

/// How often a queue looks for attempts past the I/O timeout `timeout_ns`:
/// a sixteenth of it (so an I/O is failed at most 1/16 late), and not more
/// often than every 100 µs.
pub fn timeout_scan_period_ns(timeout_ns: u64) -> u64 {
    (timeout_ns / 16).max(100_000)
}

/// An I/O moving from one map's queue to the next after a reload, with
/// what it already went through there.
#[derive(Debug)]
pub(crate) struct Handover {
    io: Io,
    attempts: u32,
    first_wait_ns: Option<u64>,
}

/// One attempt of an I/O, as a transport receives it.
#[derive(Debug)]
pub struct PathIo {
    /// Opaque tag; the transport returns it in the completion.
    pub tag: u64,
    /// What to do.
    pub op: Op,
    /// Byte offset on the device.
    pub offset: u64,
    /// Byte length.
    pub len: u32,
    /// Data for writes, space for reads.
    pub buf: Buffer,
    /// Force unit access (see [`Io::fua`]): the transport completes the
    /// write only once it is durable, natively or by flushing after it.
    pub fua: bool,
}

impl PathIo {
    /// A read of `buf.len()` bytes at `offset` into `buf`, tagged `tag`
    /// (for transports' own callers: probes and tests).
    ///
    /// # Panics
    /// If the buffer is 4 GiB or more.
    pub fn read(tag: u64, offset: u64, buf: Buffer) -> PathIo {
        let io = Io::read(tag, offset, buf);
        PathIo {
            tag,
            op: io.op,
            offset: io.offset,
            len: io.len,
            buf: io.buf,
            fua: false,
        }
    }
}

/// How one attempt ended, as a transport reports it.
#[derive(Debug)]
pub struct PathCompletion {
    /// The tag of the [`PathIo`].
    pub tag: u64,
    /// The buffer, given back (filled for a successful read).
    pub buf: Buffer,
    /// Success, path error or target error.
    pub outcome: PathOutcome,
}

/// One thread's queue to one path: what a transport implements.
///
/// # Contract
/// - `submit` accepts every I/O: the [`Queue`] never has more than its
///   depth in flight, and a transport queues internally what it cannot
///   send at once.
/// - Every submitted I/O comes back exactly once, through `poll` or
///   `abort`.
/// - `abort` gives back an I/O that has not completed, if the transport
///   can guarantee it will never take effect (never reach the disk) nor
///   complete later; otherwise it returns `None`, starts fencing the path
///   (making sure the I/O can no longer take effect), and the I/O
///   completes through `poll` in time.
/// - **Fencing.** A path error reported through `poll` for a write,
///   write-zeroes, discard or flush promises that the attempt can no
///   longer take effect: its path is *fenced* for it (the kernel handed
///   the request back, the server's side of the connection is seen
///   closed, the server is known gone). A transport that cut a connection
///   on which such an attempt may still be held (a paused server) keeps
///   the attempt until the fence, and completes it normally if its reply
///   comes first. The queue retries a write elsewhere only on that
///   promise: a retry racing a held copy could let the stale copy land
///   after newer acknowledged data. Reads carry no such hazard.
/// - `abandon` is the last resort, past the map's fence timeout: it
///   gives back an I/O the transport still holds, which may yet take
///   effect, and forgets it (its reply, if it ever comes, is dropped).
///   The queue then fails a write with [`IoError::Unfenced`] and never
///   retries it. A transport that cannot let go of the buffer (the kernel
///   holds it) returns `None`, as the default does.
pub trait PathQueue {
    /// Starts `io`. `now_ns` is the caller's clock.
    fn submit(&mut self, io: PathIo, now_ns: u64);
    /// Appends finished I/Os to `completions`.
    fn poll(&mut self, now_ns: u64, completions: &mut Vec<PathCompletion>);
    /// Takes back I/O `tag` if it can; see the trait docs.
    fn abort(&mut self, tag: u64) -> Option<PathIo>;
    /// Gives back I/O `tag`, which may still take effect; see the trait
    /// docs.
    fn abandon(&mut self, tag: u64) -> Option<PathIo> {
        let _ = tag;
        None
    }
}

/// What one queue counted over all paths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Attempts re-dispatched after a path error or a resource shortage.
    pub retries: u64,
    /// Attempts that met a resource shortage ([`PathOutcome::Busy`]) and
    /// were re-dispatched without failing their path.
    pub busy: u64,
    /// I/Os that waited for a path to come back.
    pub queued_for_path: u64,
    /// Completions whose tag matched no I/O in flight (ignored).
    pub stray_completions: u64,
    /// Reads taken back from a path past its hedge delay and sent down
    /// another (`crate::stall`).
    pub hedged_reads: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    Free,
    /// Held by the queue between submission and routing.
    Accepted,
    /// On path `path` (index in `Map::paths`); `timed_out` once its
    /// timeout fired and the transport could not hand it back.
    OnPath {
        path: u32,
        timed_out: bool,
    },
    /// Waiting for a usable path since `since_ns`.
    Waiting {
        since_ns: u64,
    },
}

#[derive(Debug)]
struct Slot {
    /// Bumped on every reuse, so a late completion cannot hit a new I/O.
    generation: u32,
    state: SlotState,
    user_data: u64,
    op: Op,
    offset: u64,
    len: u32,
    /// The I/O's buffer while no path holds it (waiting, between a path
    /// error and the retry, finishing); empty while an attempt is out.
    buf: Buffer,
    fua: bool,
    start_ns: u64,
    attempts: u32,
    /// Group of the path the current attempt went to.
    group: u32,
    /// When the I/O first waited for a path, if it ever did.
    first_wait_ns: Option<u64>,
    /// A read once taken back from a slow path (`crate::stall`): it is
    /// never taken back again.
    hedged: bool,
}

impl Slot {
    fn tag(&self, index: u32) -> u64 {
        u64::from(self.generation) << 32 | u64::from(index)
    }

    /// Bytes a selector should account for this I/O.
    fn io_bytes(&self) -> u64 {
        match self.op {
            Op::Read | Op::Write => u64::from(self.len),
            Op::Flush | Op::Discard | Op::WriteZeroes => 0,
        }
    }
}

/// One thread's queue to one map. See the module docs.
#[derive(Debug)]
pub struct Queue<P: PathQueue> {
    map: Arc<Map>,
    snapshot: Arc<Snapshot>,
    path_queues: Box<[P]>,
    selector_states: Box<[SelectorThreadState]>,
    /// This queue's load on each path, registered with the map for status.
    loads: std::sync::Arc<[PathLoad]>,
    slots: Box<[Slot]>,
    free: Vec<u32>,
    waiting: VecDeque<u32>,
    ready: Vec<Completion>,
    scratch: Vec<PathCompletion>,
    stats: QueueStats,
    cpu: u32,
    node: u16,
    next_timeout_scan_ns: u64,
    /// No I/O in `waiting` has waited since before this (`u64::MAX`: none
    /// waits, as far as known). I/O that leaves the list early only makes
    /// it conservative; `expire` scans the list only once the I/O waiting
    /// since then may be past the no-path limit, and sets it again.
    earliest_wait_ns: u64,
    /// The map's size, for checking ranges without going to the map.
    size_bytes: u64,
    /// Set once the queue's map was replaced by a reload: an I/O that finds
    /// no route waits for [`Queue::take_waiting`], whatever this map says.
    hands_over: bool,
    /// Paths holding an attempt far past their usual latency, kept out of
    /// the route this queue dispatches with ([`crate::stall`]).
    stalls: Stalls,
}

impl<P: PathQueue> Queue<P> {
    /// A queue of `depth` I/Os over `map`, with one transport queue per
    /// path of the map (in [`Map::paths`] order), for a thread on `cpu`.
    ///
    /// # Panics
    /// If `path_queues` does not have one queue per path, or `depth` is 0
    /// or above [`MAX_QUEUE_DEPTH`].
    pub fn new(map: Arc<Map>, path_queues: Vec<P>, depth: usize, cpu: u32) -> Self {
        assert_eq!(
            path_queues.len(),
            map.paths().len(),
            "one transport queue per path"
        );
        assert!(
            (1..=MAX_QUEUE_DEPTH).contains(&depth),
            "queue depth {depth} out of range"
        );
        let slots = (0..depth)
            .map(|_| Slot {
                generation: 0,
                state: SlotState::Free,
                user_data: 0,
                op: Op::Read,
                offset: 0,
                len: 0,
                buf: Buffer::empty(),
                fua: false,
                start_ns: 0,
                attempts: 0,
                group: 0,
                first_wait_ns: None,
                hedged: false,
            })
            .collect();
        let selector_states = map
            .groups()
            .iter()
            .map(|group| group.selector.new_thread_state())
            .collect();
        let node = map.options().numa.node_of_cpu(cpu);
        let loads = map.register_queue_loads();
        let largest_group = map
            .groups()
            .iter()
            .map(|group| group.path_range().len())
            .max()
            .unwrap_or(0);
        let stalls = Stalls::new(map.paths().len(), largest_group);
        Queue {
            size_bytes: map.size_bytes(),
            snapshot: map.snapshot(),
            map,
            path_queues: path_queues.into_boxed_slice(),
            selector_states,
            loads,
            slots,
            free: (0..depth as u32).rev().collect(),
            waiting: VecDeque::with_capacity(depth),
            ready: Vec::with_capacity(depth),
            scratch: Vec::with_capacity(depth),
            stats: QueueStats::default(),
            cpu,
            node,
            next_timeout_scan_ns: 0,
            earliest_wait_ns: u64::MAX,
            hands_over: false,
            stalls,
        }
    }

    /// The map this queue feeds.
    pub fn map(&self) -> &Arc<Map> {
        &self.map
    }

    /// I/Os submitted and not yet finished (finished ones wait in the
    /// queue until [`Queue::poll`] hands them over).
    pub fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// True when the queue holds nothing: no I/O in flight and no
    /// completion waiting to be handed over (an I/O finished inside
    /// `submit` waits in `ready` for the next poll). Only an idle queue may
    /// be dropped.
    pub(crate) fn is_idle(&self) -> bool {
        self.in_flight() == 0 && self.ready.is_empty()
    }

    /// The most I/Os the queue holds at once.
    pub fn depth(&self) -> usize {
        self.slots.len()
    }

    /// I/Os waiting for a usable path.
    pub fn waiting_for_path(&self) -> usize {
        self.waiting.len()
    }

    /// This queue's load on each path, in [`Map::paths`] order.
    pub fn path_loads(&self) -> &[PathLoad] {
        &self.loads
    }

    /// What this queue counted over all paths.
    pub fn stats(&self) -> QueueStats {
        self.stats
    }

    /// The transport queues, in [`Map::paths`] order.
    pub fn path_queues(&self) -> &[P] {
        &self.path_queues
    }

    /// The transport queues, in [`Map::paths`] order.
    pub fn path_queues_mut(&mut self) -> &mut [P] {
        &mut self.path_queues
    }

    /// Submits `io`; its completion comes from a later [`Queue::poll`].
    /// A malformed request (range, buffer length) completes with
    /// [`IoError::Invalid`] and reaches no path.
    ///
    /// # Errors
    /// Gives `io` back if the queue already holds its depth of I/Os.
    // Always inlined into the caller's loop: the I/O is then built in
    // place instead of copied into a call, a saving measured per I/O
    // (docs/BENCHMARKS.md, "Instructions per I/O").
    #[inline(always)]
    pub fn submit(&mut self, io: Io, now_ns: u64) -> Result<(), Io> {
        self.accept(io, 0, None, now_ns)
    }

    /// [`Queue::submit`] for an I/O that already made `attempts` attempts
    /// and first waited for a path at `first_wait_ns` (on another map's
    /// queue, before a reload): its attempt limit and wait bound go on
    /// counting from there.
    #[inline(always)]
    fn accept(
        &mut self,
        io: Io,
        attempts: u32,
        first_wait_ns: Option<u64>,
        now_ns: u64,
    ) -> Result<(), Io> {
        let Some(index) = self.free.pop() else {
            return Err(io);
        };
        let invalid = self.validate(&io);
        let slot = &mut self.slots[index as usize];
        debug_assert_eq!(slot.state, SlotState::Free);
        slot.user_data = io.user_data;
        slot.op = io.op;
        slot.offset = io.offset;
        slot.len = io.len;
        slot.fua = io.fua;
        slot.attempts = attempts;
        slot.first_wait_ns = first_wait_ns;
        slot.hedged = false;
        slot.state = SlotState::Accepted;
        if let Some(reason) = invalid {
            slot.buf = io.buf;
            self.finish(index, Err(IoError::Invalid(reason)));
            return Ok(());
        }
        self.refresh(now_ns);
        // The buffer goes straight to the path: a slot holds it only while
        // no path does (waiting, retrying, finishing).
        self.dispatch(index, io.buf, now_ns);
        Ok(())
    }

    /// Takes `handover` (from [`Queue::take_waiting`] on the queue of the
    /// map a reload replaced), keeping its attempts and first wait.
    ///
    /// # Errors
    /// Gives it back if the queue already holds its depth of I/Os.
    pub(crate) fn accept_handover(
        &mut self,
        handover: Handover,
        now_ns: u64,
    ) -> Result<(), Handover> {
        let Handover {
            io,
            attempts,
            first_wait_ns,
        } = handover;
        self.accept(io, attempts, first_wait_ns, now_ns)
            .map_err(|io| Handover {
                io,
                attempts,
                first_wait_ns,
            })
    }

    /// Collects completions from every path, fails over what failed,
    /// times out what hung, and hands finished I/Os to `sink`. Returns how
    /// many it handed.
    #[inline]
    pub fn poll(&mut self, now_ns: u64, sink: &mut impl FnMut(Completion)) -> usize {
        self.refresh(now_ns);
        let mut handed = 0;
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut ready = Vec::new();
        let paths = self.path_queues.len();
        // One pass per path, then one more for the I/O that finished
        // without a path completion (failed over to no path, timed out,
        // invalid), so that `sink` is called from one place only: the
        // compiler inlines a closure called once, not one called twice
        // (an out-of-line sink costs a call per completion; measured in
        // docs/BENCHMARKS.md, "Instructions per I/O").
        for source in 0..=paths {
            if source < paths {
                self.path_queues[source].poll(now_ns, &mut scratch);
            } else {
                self.expire(now_ns);
                if self.map.options().hedge_reads && self.stalls.hedge_scan_due(now_ns) {
                    self.hedge_reads(now_ns);
                }
                let route = route_of(&self.map, &self.snapshot);
                let timeout = self.map.options().io_timeout_ns;
                self.stalls.check(now_ns, &self.loads, timeout, route);
                std::mem::swap(&mut ready, &mut self.ready);
            }
            let finished = scratch
                .drain(..)
                .filter_map(|completion| self.complete_attempt(source, completion, now_ns))
                .chain(ready.drain(..));
            for done in finished {
                sink(done);
                handed += 1;
            }
        }
        self.scratch = scratch;
        // The list that collected nothing in the last pass goes back, with
        // its capacity: nothing pushed to `self.ready` since the swap.
        debug_assert!(self.ready.is_empty());
        self.ready = ready;
        handed
    }

    /// Tells the queue its map was replaced (a reload): from now on an I/O
    /// that finds no route here waits, even where this map would fail it,
    /// for its owner to move it to the new map with
    /// [`Queue::take_waiting`]. The new map's `queue_if_no_path` is the
    /// one that counts. (Path errors need nothing here: the replaced map
    /// passes its failures on to the new one, see
    /// [`Map::carry_over_from`].)
    pub(crate) fn hand_over_waiting(&mut self) {
        self.hands_over = true;
    }

    /// Hands up to `limit` I/Os waiting for a path to `each`, oldest
    /// first, and forgets them: for moving them to the queue of a reloaded
    /// map ([`crate::reload`]). No path ever holds these I/Os.
    pub(crate) fn take_waiting(&mut self, limit: usize, mut each: impl FnMut(Handover)) {
        for _ in 0..limit {
            let Some(index) = self.waiting.pop_front() else {
                break;
            };
            let slot = &mut self.slots[index as usize];
            debug_assert!(matches!(slot.state, SlotState::Waiting { .. }));
            slot.state = SlotState::Free;
            slot.generation = slot.generation.wrapping_add(1);
            let handover = Handover {
                io: Io {
                    user_data: slot.user_data,
                    op: slot.op,
                    offset: slot.offset,
                    len: slot.len,
                    buf: std::mem::replace(&mut slot.buf, Buffer::empty()),
                    fua: slot.fua,
                },
                attempts: slot.attempts,
                first_wait_ns: slot.first_wait_ns,
            };
            self.free.push(index);
            each(handover);
        }
    }

    fn validate(&self, io: &Io) -> Option<&'static str> {
        let size = self.size_bytes;
        match io.op {
            Op::Read | Op::Write if io.buf.len() != io.len as usize => {
                Some("buffer length differs from the request length")
            }
            Op::Flush | Op::Discard | Op::WriteZeroes if !io.buf.is_empty() => {
                Some("a flush, discard or write-zeroes carries no data buffer")
            }
            Op::Flush if io.len != 0 => Some("a flush has no length"),
            Op::Flush => None,
            _ if io
                .offset
                .checked_add(u64::from(io.len))
                .is_none_or(|end| end > size) =>
            {
                Some("range beyond the end of the device")
            }
            _ => None,
        }
    }

    /// Fetches the newest snapshot if the map changed, then releases or
    /// fails the I/Os waiting for a path as it now allows. Per I/O this is
    /// one atomic load and a compare; the rest is out of line.
    #[inline(always)]
    fn refresh(&mut self, now_ns: u64) {
        if self.map.generation() != self.snapshot.generation {
            self.change_snapshot(now_ns);
        }
    }

    /// The slow half of [`Queue::refresh`]: the map did change.
    #[cold]
    #[inline(never)]
    fn change_snapshot(&mut self, now_ns: u64) {
        self.snapshot = self.map.snapshot();
        let route = route_of(&self.map, &self.snapshot);
        self.stalls.rebuild(route);
        if self.waiting.is_empty() {
            return;
        }
        if self.snapshot.route.is_some() {
            while let Some(index) = self.waiting.pop_front() {
                self.redispatch(index, now_ns);
            }
        } else if !self.snapshot.queue_if_no_path && !self.hands_over {
            while let Some(index) = self.waiting.pop_front() {
                self.finish(index, Err(IoError::NoPath));
            }
        }
    }

    /// [`Queue::dispatch`] out of line, for the rare paths (retry, release
    /// of waiting I/O), so that only `submit` carries an inlined copy.
    #[inline(never)]
    fn redispatch(&mut self, index: u32, now_ns: u64) {
        let buf = std::mem::replace(&mut self.slots[index as usize].buf, Buffer::empty());
        self.dispatch(index, buf, now_ns);
    }

    /// Sends slot `index`, with its buffer `buf`, down a path of the
    /// current route, or parks or fails it if there is none.
    #[inline(always)]
    fn dispatch(&mut self, index: u32, buf: Buffer, now_ns: u64) {
        let snapshot = &*self.snapshot;
        let slot = &mut self.slots[index as usize];
        let Some(route) = &snapshot.route else {
            slot.buf = buf;
            if snapshot.queue_if_no_path || self.hands_over {
                // The bound counts from the I/O's first wait, however often
                // a flapping path takes it back out of the waiting list.
                let since_ns = *slot.first_wait_ns.get_or_insert(now_ns);
                slot.state = SlotState::Waiting { since_ns };
                self.stats.queued_for_path += 1;
                self.waiting.push_back(index);
                self.earliest_wait_ns = self.earliest_wait_ns.min(since_ns);
            } else {
                self.finish(index, Err(IoError::NoPath));
            }
            return;
        };
        let group = &self.map.groups()[route.group];
        let bytes = slot.io_bytes();
        let (loads, cpu, node) = (&self.loads, self.cpu, self.node);
        let group_loads = &loads[group.path_range()];
        // Without the paths that stall, when some do (one branch per I/O).
        let (candidates, usable, generation) =
            self.stalls
                .view()
                .unwrap_or((&route.candidates, &route.usable, snapshot.generation));
        let position = usize::from(group.selector.select_and_start(
            &mut self.selector_states[route.group],
            || Pick {
                candidates,
                usable,
                loads: group_loads,
                bytes,
                cpu,
                node,
                now_ns,
                generation,
            },
            |position| {
                assert!(
                    usable[usize::from(position)],
                    "selector picked a path that is not a candidate"
                );
                let load = &group_loads[usize::from(position)];
                load.start_io(bytes);
                load
            },
        ));
        let path = group.first_path + position;
        if self.loads[path].in_flight() == 1 {
            // Idle until now: its wait for progress starts here.
            self.stalls.progress(path, now_ns);
        }
        slot.state = SlotState::OnPath {
            path: path as u32,
            timed_out: false,
        };
        // A fresh tag per attempt: a stray completion of an earlier attempt
        // can never pass for this one.
        slot.generation = slot.generation.wrapping_add(1);
        slot.start_ns = now_ns;
        slot.attempts += 1;
        slot.group = route.group as u32;
        let io = PathIo {
            tag: slot.tag(index),
            op: slot.op,
            offset: slot.offset,
            len: slot.len,
            buf,
            fua: slot.fua,
        };
        self.path_queues[path].submit(io, now_ns);
    }

    /// Handles the end of one attempt reported by the queue of `path`;
    /// returns the I/O's completion if it finished (success or target
    /// error), so the caller hands it over without queueing it.
    #[inline(always)]
    fn complete_attempt(
        &mut self,
        path: usize,
        completion: PathCompletion,
        now_ns: u64,
    ) -> Option<Completion> {
        let index = completion.tag as u32;
        let generation = (completion.tag >> 32) as u32;
        let current = self.slots.get(index as usize).is_some_and(|slot| {
            slot.generation == generation
                && matches!(slot.state, SlotState::OnPath { path: on, .. } if on as usize == path)
        });
        if !current {
            self.stats.stray_completions += 1;
            return None;
        }
        if completion.outcome != PathOutcome::Busy {
            self.stalls.progress(path, now_ns);
        }
        let started_ns = self.slots[index as usize].start_ns;
        self.loads[path].record_latency(now_ns.saturating_sub(started_ns));
        self.end_attempt(index, path, now_ns);
        let result = match completion.outcome {
            PathOutcome::Ok => Ok(()),
            PathOutcome::Target(error) => Err(IoError::Target(error)),
            PathOutcome::Path(error) => {
                self.fail_over(index, path, completion.buf, error, now_ns);
                return None;
            }
            PathOutcome::Busy => {
                self.retry_busy(index, path, completion.buf, now_ns);
                return None;
            }
        };
        Some(self.release(index, completion.buf, result))
    }

    /// The attempt of slot `index` on `path` ended in a path error: fail
    /// the path and retry the I/O elsewhere.
    #[cold]
    #[inline(never)]
    fn fail_over(&mut self, index: u32, path: usize, buf: Buffer, error: PathError, now_ns: u64) {
        self.slots[index as usize].buf = buf;
        self.loads[path].path_error();
        self.map.fail_path(path, error);
        self.retry(index, now_ns);
    }

    /// The attempt of slot `index` on `path` met a resource shortage: the
    /// path stays in the map, but this queue holds it out of its route
    /// until it next answers (as a read hedged away from it,
    /// [`crate::stall`]; for a bounded time), so the retry goes to another
    /// candidate where there is one rather than back into the shortage.
    #[cold]
    #[inline(never)]
    fn retry_busy(&mut self, index: u32, path: usize, buf: Buffer, now_ns: u64) {
        self.slots[index as usize].buf = buf;
        self.stats.busy += 1;
        self.stalls.gave_up(path, now_ns);
        let route = route_of(&self.map, &self.snapshot);
        let timeout = self.map.options().io_timeout_ns;
        self.stalls.check(now_ns, &self.loads, timeout, route);
        self.retry(index, now_ns);
    }

    /// Uncounts the attempt of slot `index` from `path`'s load and tells
    /// the selector that dispatched it. The path's latency is learnt only
    /// from its answers ([`Queue::complete_attempt`]): the wait of an
    /// attempt taken back (hedged, timed out) says how long the queue
    /// waited, not how fast the path answers, and counted it would raise
    /// the path's hedge delay and stall limit (multiples of its p99) at
    /// every hold-out of a path that stays hung.
    #[inline(always)]
    fn end_attempt(&mut self, index: u32, path: usize, now_ns: u64) {
        let slot = &self.slots[index as usize];
        let load = &self.loads[path];
        load.end_io(slot.io_bytes());
        let group = &self.map.groups()[slot.group as usize];
        group.selector.completed(
            || &mut self.selector_states[slot.group as usize],
            path - group.first_path,
            load,
            slot.start_ns,
            now_ns,
        );
    }

    /// Dispatches slot `index` again after a path error or a resource
    /// shortage, within the map's attempt limit.
    fn retry(&mut self, index: u32, now_ns: u64) {
        // The simulator's canary, compiled only under `--cfg mpio_canary`
        // (never in a normal build): a deliberately broken failover that
        // gives up at an I/O's first path error, usable path or not.
        // `crates/sim/tests/canary.rs` proves the simulator catches it.
        #[cfg(mpio_canary)]
        if self.slots[index as usize].attempts == 1 {
            self.finish(index, Err(IoError::NoPath));
            return;
        }
        if self.slots[index as usize].attempts >= self.map.options().max_attempts {
            self.finish(index, Err(IoError::RetryLimit));
            return;
        }
        self.stats.retries += 1;
        self.refresh(now_ns);
        self.redispatch(index, now_ns);
    }

    /// Completes slot `index` with `result`; its completion waits in
    /// `ready` for the next poll.
    fn finish(&mut self, index: u32, result: Result<(), IoError>) {
        let buf = std::mem::replace(&mut self.slots[index as usize].buf, Buffer::empty());
        let completion = self.release(index, buf, result);
        self.ready.push(completion);
    }

    /// Frees slot `index` and makes its completion, with `buf`.
    #[inline]
    fn release(&mut self, index: u32, buf: Buffer, result: Result<(), IoError>) -> Completion {
        let slot = &mut self.slots[index as usize];
        debug_assert!(slot.state != SlotState::Free, "slot finished twice");
        slot.state = SlotState::Free;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index);
        Completion {
            user_data: slot.user_data,
            buf,
            result,
        }
    }
}

/// The route of `snapshot` and the map index of its group's first path.
pub(crate) fn route_of<'a>(map: &Map, snapshot: &'a Snapshot) -> Option<(&'a Route, usize)> {
    let route = snapshot.route.as_ref()?;
    Some((route, map.groups()[route.group].first_path))
}
