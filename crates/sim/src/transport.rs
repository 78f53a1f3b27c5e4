//! The simulated paths: a [`PathQueue`] per (queue, path) over one shared
//! [`World`] that holds the ground truth — the disk, each path's fault
//! mode, the storage's target faults — and records what the invariants need
//! (attempts outstanding per path, path errors reported, aborts).
//!
//! # Semantics (the transport's side of the fault model)
//! - An attempt takes effect (a write lands, a read copies the disk) when
//!   the path completes it, never before; an attempt given back by
//!   [`PathQueue::abort`] never takes effect.
//! - `Healthy`: completes after the path's base latency; `Slow`: after
//!   base × factor.
//! - `Error`: completes after the base latency with a path error; a write
//!   so ended landed with the seed's landing probability (the reply was
//!   lost, not the data).
//! - `Hang`: attempts due (and sent) while it lasts are held; when it ends
//!   they complete by the mode of that moment.
//! - `Disconnected`: entering it ends every attempt in flight with
//!   `ConnectionLost` (writes landed or not, as for `Error`); attempts sent
//!   while it lasts end the same way.
//! - A target fault on a block range ends every attempt touching it, on
//!   every path, with that target error and no effect.
//! - Each attempt is drawn abortable or not at submission (a command
//!   already on the wire cannot be taken back); `abort` gives back exactly
//!   the abortable ones still outstanding.
//! - A refused `abort` *severs* the queue's connection from the client's
//!   side, as the NBD transport half-closes it: the reads then on it end
//!   at the next poll with `ConnectionLost` (a read has no effect to
//!   fence); everything else on it stays held, as a paused server holds
//!   it, until it is answered (the path's mode lets it complete: it lands
//!   then) or the server's side closes (`Disconnected`: the fence). A path
//!   error is reported for a write only then, when it can no longer land.
//! - `abandon` (the core's last resort past its fence timeout) gives back
//!   an attempt the queue still holds but leaves a *ghost* of a write
//!   behind: the held copy, which lands when the path would have
//!   completed it (after a hang, once due), unless the server's side
//!   closes first. Each landing ghost is recorded for the reference
//!   disk's landing check ([`World::take_ghost_landings`]): a write may
//!   land late only if the caller was never told it ended (it is in
//!   flight, or failed as unfenced).
//!
//! # Probes
//! The path checker's probes ([`SimPathQueue::probe`]) go through the
//! same fault model, on queues of their own owned by queue index
//! `PROBE_QUEUE` (`owner.rs`; `checker` in the trace). They are not I/O:
//! they are left out of [`World::outstanding`] and [`World::completed_ok`], and a
//! path error or an attempt given back on them lets the map fail the
//! path (the checker fails it) but does not oblige it to
//! ([`Evidence::must_fail`]): a late probe of a stalled path is no
//! verdict.
//!
//! # Determinism
//! One thread; every random draw comes from the world's own [`Rng`] in
//! call order; no hash-map iteration anywhere.

use crate::data::{Disk, BLOCK_BYTES};
use crate::owner::PROBE_QUEUE;
use crate::rng::Rng;
use crate::trace::{outcome_word, Trace, TraceEvent};
use mpio_core::io::{Op, PathError, PathOutcome, TargetError};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use std::cell::RefCell;
use std::rc::Rc;

/// What a path did, since the runner last looked, that bears on whether
/// the map may or must fail it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Evidence {
    /// A path error, an attempt given back, or an attempt past the I/O
    /// timeout: the map may fail the path.
    pub may_fail: bool,
    /// A path error reported to a queue: the map must fail the path.
    pub must_fail: bool,
}

/// The ground-truth state of one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Serves I/O after its base latency.
    Healthy,
    /// Serves I/O after `factor` times its base latency.
    Slow {
        /// Latency multiplier.
        factor: u64,
    },
    /// Ends every attempt with this path error.
    Error(PathError),
    /// Holds every attempt until the mode changes.
    Hang,
    /// The connection is down: attempts end with `ConnectionLost`.
    Disconnected,
}

impl Mode {
    /// The mode's name, for the trace.
    pub fn describe(self) -> String {
        match self {
            Mode::Healthy => "healthy".into(),
            Mode::Slow { factor } => format!("slow x{factor}"),
            Mode::Error(error) => format!("error ({error})"),
            Mode::Hang => "hung".into(),
            Mode::Disconnected => "disconnected".into(),
        }
    }
}

/// The storage refusing a block range for a while.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TargetFault {
    /// First block.
    pub first_block: u64,
    /// Blocks covered.
    pub blocks: u64,
    /// What the storage answers.
    pub error: TargetError,
    /// Start, simulated ns.
    pub from_ns: u64,
    /// End, simulated ns.
    pub until_ns: u64,
}

#[derive(Debug)]
struct PathTruth {
    mode: Mode,
    base_latency_ns: u64,
    /// Bumped on entering `Disconnected`: attempts sent before are lost.
    connection: u64,
    hang_since_ns: Option<u64>,
    /// Attempts outstanding on the path, over every queue and the
    /// checker's probes: (tag, owner (queue, incarnation), submission
    /// time).
    outstanding: Vec<(u64, (usize, usize), u64)>,
    /// Path errors the path reported plus attempts it gave back, since the
    /// runner last looked.
    failure_evidence: u32,
    /// True if the path reported a path error since the runner last looked.
    reported_path_error: bool,
    /// I/O attempts the path completed successfully, over the run.
    completed_ok: u64,
}

/// The ground truth every simulated path queue shares. See the module docs.
#[derive(Debug)]
pub struct World {
    disk: Disk,
    paths: Vec<PathTruth>,
    rng: Rng,
    target_faults: Vec<TargetFault>,
    land_per_mille: u32,
    stuck_per_mille: u32,
    io_timeout_ns: u64,
    hang_intervals: Vec<(u64, u64)>,
    /// Per queue: path errors reported to it plus attempts given back.
    queue_failure_evidence: Vec<u64>,
    /// A breach of the `PathQueue` contract by the core, if any.
    contract_breach: Option<String>,
    /// Ghost writes that landed, since the runner last looked: (offset,
    /// the bytes written).
    ghost_landings: Vec<(u64, Vec<u8>)>,
    /// The simulated clock: the runner sets it before every call into a
    /// queue (`abort` is not told the time).
    pub now_ns: u64,
    /// The run's trace.
    pub trace: Trace,
}

/// What a [`World`] is built from.
#[derive(Clone, Debug)]
pub struct WorldSetup {
    /// Disk size in blocks.
    pub block_count: u64,
    /// Each path's base latency, ns.
    pub base_latency_ns: Vec<u64>,
    /// Number of queues (simulated I/O threads).
    pub queue_count: usize,
    /// Chance (per mille) that a write ended by a path error landed.
    pub land_per_mille: u32,
    /// Chance (per mille) that an attempt cannot be aborted.
    pub stuck_per_mille: u32,
    /// The map's I/O timeout, to check that aborts come after it.
    pub io_timeout_ns: u64,
    /// Seed of the world's own random stream.
    pub seed: u64,
}

impl World {
    /// A healthy world.
    pub fn new(setup: &WorldSetup, trace: Trace) -> Self {
        World {
            disk: Disk::new(setup.block_count),
            paths: setup
                .base_latency_ns
                .iter()
                .map(|&base_latency_ns| PathTruth {
                    mode: Mode::Healthy,
                    base_latency_ns,
                    connection: 0,
                    hang_since_ns: None,
                    outstanding: Vec::new(),
                    failure_evidence: 0,
                    reported_path_error: false,
                    completed_ok: 0,
                })
                .collect(),
            rng: Rng::new(setup.seed),
            target_faults: Vec::new(),
            land_per_mille: setup.land_per_mille,
            stuck_per_mille: setup.stuck_per_mille,
            io_timeout_ns: setup.io_timeout_ns,
            hang_intervals: Vec::new(),
            queue_failure_evidence: vec![0; setup.queue_count],
            contract_breach: None,
            ghost_landings: Vec::new(),
            now_ns: 0,
            trace,
        }
    }

    /// Sets path `path`'s mode at `now_ns`.
    pub fn set_mode(&mut self, path: usize, mode: Mode, now_ns: u64) {
        let truth = &mut self.paths[path];
        if mode == Mode::Disconnected && truth.mode != Mode::Disconnected {
            truth.connection += 1;
        }
        match (truth.hang_since_ns, mode) {
            (None, Mode::Hang) => truth.hang_since_ns = Some(now_ns),
            (Some(since_ns), mode) if mode != Mode::Hang => {
                self.hang_intervals.push((since_ns, now_ns));
                truth.hang_since_ns = None;
            }
            _ => {}
        }
        truth.mode = mode;
        self.trace.record(
            now_ns,
            TraceEvent::PathMode {
                path,
                mode: mode.describe(),
            },
        );
    }

    /// Path `path`'s mode now.
    pub fn mode(&self, path: usize) -> Mode {
        self.paths[path].mode
    }

    /// Number of paths.
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// Starts a target fault.
    pub(crate) fn add_target_fault(&mut self, fault: TargetFault) {
        self.trace.record(
            fault.from_ns,
            TraceEvent::TargetFault {
                block: fault.first_block,
                blocks: fault.blocks,
                error: outcome_word(PathOutcome::Target(fault.error)),
                duration_ns: fault.until_ns - fault.from_ns,
            },
        );
        self.target_faults.push(fault);
    }

    /// Ends every fault at `now_ns`: every path healthy, no target fault.
    pub(crate) fn heal_all(&mut self, now_ns: u64) {
        for path in 0..self.paths.len() {
            if self.paths[path].mode != Mode::Healthy {
                self.set_mode(path, Mode::Healthy, now_ns);
            }
        }
        for fault in &mut self.target_faults {
            fault.until_ns = fault.until_ns.min(now_ns);
        }
    }

    /// True if a target fault answering `error` covered part of `blocks`
    /// at some time in `from_ns..=until_ns`.
    pub(crate) fn target_fault_explains(
        &self,
        error: TargetError,
        blocks: std::ops::Range<u64>,
        from_ns: u64,
        until_ns: u64,
    ) -> bool {
        self.target_faults.iter().any(|fault| {
            fault.error == error
                && fault.first_block < blocks.end
                && blocks.start < fault.first_block + fault.blocks
                && fault.from_ns <= until_ns
                && from_ns <= fault.until_ns
        })
    }

    /// Total time any path spent hung within `from_ns..until_ns`.
    pub(crate) fn hang_overlap_ns(&self, from_ns: u64, until_ns: u64) -> u64 {
        let open = self
            .paths
            .iter()
            .filter_map(|truth| truth.hang_since_ns.map(|since_ns| (since_ns, until_ns)));
        self.hang_intervals
            .iter()
            .copied()
            .chain(open)
            .map(|(start, end)| end.min(until_ns).saturating_sub(start.max(from_ns)))
            .sum()
    }

    /// I/O attempts outstanding on `path`, over every queue (probes left
    /// out).
    pub fn outstanding(&self, path: usize) -> usize {
        self.paths[path]
            .outstanding
            .iter()
            .filter(|&&(_, (queue, _), _)| queue != PROBE_QUEUE)
            .count()
    }

    /// Takes what `path` did since the last call that bears on its
    /// health: whether it may be failed (it reported a path error, gave
    /// back an attempt, or holds an attempt older than the I/O timeout) and
    /// whether it must be (it reported a path error).
    pub(crate) fn take_failure_evidence(&mut self, path: usize, now_ns: u64) -> Evidence {
        let truth = &mut self.paths[path];
        let reported = std::mem::take(&mut truth.failure_evidence) > 0;
        let overdue = truth
            .outstanding
            .iter()
            .any(|&(_, _, submit_ns)| now_ns - submit_ns >= self.io_timeout_ns);
        Evidence {
            may_fail: reported || overdue,
            must_fail: std::mem::take(&mut truth.reported_path_error),
        }
    }

    /// Path errors reported to queue `queue` plus attempts it got back.
    pub(crate) fn queue_failure_evidence(&self, queue: usize) -> u64 {
        self.queue_failure_evidence[queue]
    }

    /// I/O attempts path `path` completed successfully so far (probes
    /// left out).
    pub(crate) fn completed_ok(&self, path: usize) -> u64 {
        self.paths[path].completed_ok
    }

    /// The first breach of the `PathQueue` contract the core made, if any.
    pub(crate) fn contract_breach(&self) -> Option<&str> {
        self.contract_breach.as_deref()
    }

    /// Takes the ghost writes that landed since the last call: (offset,
    /// bytes) of each, for the reference disk's landing check.
    pub(crate) fn take_ghost_landings(&mut self) -> Vec<(u64, Vec<u8>)> {
        std::mem::take(&mut self.ghost_landings)
    }

    /// Lands ghost write `io` (see the module docs) now.
    fn land_ghost(&mut self, path: usize, mut io: PathIo, now_ns: u64) {
        if self.target_error(&io, now_ns).is_some() {
            return;
        }
        self.apply(&mut io);
        self.trace
            .record(now_ns, TraceEvent::GhostLanded { path, tag: io.tag });
        self.ghost_landings
            .push((io.offset, io.buf.as_slice().to_vec()));
    }

    fn attempt_ended(&mut self, path: usize, owner: (usize, usize), tag: u64) {
        let outstanding = &mut self.paths[path].outstanding;
        if let Some(position) = outstanding
            .iter()
            .position(|&(known, known_owner, _)| known == tag && known_owner == owner)
        {
            outstanding.remove(position);
        }
    }

    /// Ends attempt `io` of `owner` (queue, incarnation) on `path` with the outcome the
    /// path and the storage give now; `lost` if the connection it went out
    /// on is gone.
    fn complete(
        &mut self,
        owner: (usize, usize),
        path: usize,
        mut io: PathIo,
        lost: bool,
        now_ns: u64,
    ) -> PathCompletion {
        let path_error = match self.paths[path].mode {
            _ if lost => Some(PathError::ConnectionLost),
            Mode::Error(error) => Some(error),
            Mode::Disconnected => Some(PathError::ConnectionLost),
            Mode::Healthy | Mode::Slow { .. } | Mode::Hang => None,
        };
        let (outcome, landed) = match path_error {
            Some(error) => {
                let landed = io.op.is_write() && self.rng.chance(self.land_per_mille);
                if landed {
                    self.apply(&mut io);
                }
                (PathOutcome::Path(error), landed)
            }
            None => match self.target_error(&io, now_ns) {
                Some(error) => (PathOutcome::Target(error), false),
                None => {
                    self.apply(&mut io);
                    if owner.0 != PROBE_QUEUE {
                        self.paths[path].completed_ok += 1;
                    }
                    (PathOutcome::Ok, io.op.is_write())
                }
            },
        };
        if let PathOutcome::Path(_) = outcome {
            self.paths[path].failure_evidence += 1;
            if owner.0 != PROBE_QUEUE {
                self.paths[path].reported_path_error = true;
                self.queue_failure_evidence[owner.0] += 1;
            }
        }
        self.attempt_ended(path, owner, io.tag);
        self.trace.record(
            now_ns,
            TraceEvent::AttemptEnd {
                queue: owner.0,
                path,
                tag: io.tag,
                outcome: outcome_word(outcome),
                landed,
            },
        );
        PathCompletion {
            tag: io.tag,
            buf: io.buf,
            outcome,
        }
    }

    fn target_error(&self, io: &PathIo, now_ns: u64) -> Option<TargetError> {
        if io.op == Op::Flush {
            return None;
        }
        let first = io.offset / BLOCK_BYTES as u64;
        let end = (io.offset + u64::from(io.len)).div_ceil(BLOCK_BYTES as u64);
        self.target_faults
            .iter()
            .find(|fault| {
                fault.from_ns <= now_ns
                    && now_ns < fault.until_ns
                    && fault.first_block < end
                    && first < fault.first_block + fault.blocks
            })
            .map(|fault| fault.error)
    }

    fn apply(&mut self, io: &mut PathIo) {
        match io.op {
            Op::Read => self.disk.read(io.offset, io.buf.as_mut_slice()),
            Op::Write => self.disk.write(io.offset, io.buf.as_slice()),
            Op::WriteZeroes | Op::Discard => self.disk.zero(io.offset, io.len as usize),
            Op::Flush => {}
        }
    }
}

/// One attempt held by a [`SimPathQueue`].
#[derive(Debug)]
struct Attempt {
    io: PathIo,
    submit_ns: u64,
    due_ns: u64,
    connection: u64,
    abortable: bool,
    /// The queue's connection was severed with this attempt on it (see
    /// the module docs).
    severed: bool,
}

/// A write the core abandoned that the path may still apply.
#[derive(Debug)]
struct Ghost {
    io: PathIo,
    due_ns: u64,
    connection: u64,
}

/// One simulated thread's queue to one simulated path.
#[derive(Debug)]
pub struct SimPathQueue {
    world: Rc<RefCell<World>>,
    queue: usize,
    /// Which of the queue's maps this path queue serves (0, then one more
    /// per reload): attempts of two maps of one queue may carry one tag.
    incarnation: usize,
    path: usize,
    /// Attempts not yet ended, in submission order.
    attempts: Vec<Attempt>,
    /// Writes abandoned by the core that may still land.
    ghosts: Vec<Ghost>,
}

impl SimPathQueue {
    /// Queue `queue`'s path queue to path `path` of `world`.
    pub fn new(world: Rc<RefCell<World>>, queue: usize, path: usize) -> Self {
        SimPathQueue {
            world,
            queue,
            incarnation: 0,
            path,
            attempts: Vec::new(),
            ghosts: Vec::new(),
        }
    }

    /// A queue of the path checker's to path `path` of `world`, for
    /// probes (see the module docs).
    pub fn probe(world: Rc<RefCell<World>>, path: usize) -> Self {
        SimPathQueue::new(world, PROBE_QUEUE, path)
    }

    /// The same, for the queue's `incarnation`-th map (after reloads).
    pub(crate) fn for_incarnation(mut self, incarnation: usize) -> Self {
        self.incarnation = incarnation;
        self
    }

    /// Who owns this queue's attempts in the world's books: the queue and
    /// the map it serves.
    fn owner(&self) -> (usize, usize) {
        (self.queue, self.incarnation)
    }

    /// Attempts this queue holds (not yet ended).
    pub fn held(&self) -> usize {
        self.attempts.len()
    }
}

impl PathQueue for SimPathQueue {
    fn submit(&mut self, io: PathIo, now_ns: u64) {
        let mut world = self.world.borrow_mut();
        let world = &mut *world;
        let truth = &world.paths[self.path];
        let latency_ns = match truth.mode {
            Mode::Slow { factor } => truth.base_latency_ns * factor,
            _ => truth.base_latency_ns,
        };
        let connection = truth.connection;
        let jitter_ns = world.rng.below(truth.base_latency_ns / 2 + 1);
        let abortable = !world.rng.chance(world.stuck_per_mille);
        world.paths[self.path]
            .outstanding
            .push((io.tag, self.owner(), now_ns));
        world.trace.record(
            now_ns,
            TraceEvent::Attempt {
                queue: self.queue,
                path: self.path,
                tag: io.tag,
                abortable,
            },
        );
        self.attempts.push(Attempt {
            io,
            submit_ns: now_ns,
            due_ns: now_ns + latency_ns + jitter_ns,
            connection,
            abortable,
            severed: false,
        });
    }

    fn poll(&mut self, now_ns: u64, completions: &mut Vec<PathCompletion>) {
        if self.attempts.is_empty() && self.ghosts.is_empty() {
            return;
        }
        let mut world = self.world.borrow_mut();
        let truth = &world.paths[self.path];
        let (mode, connection) = (truth.mode, truth.connection);
        let mut index = 0;
        while index < self.ghosts.len() {
            let ghost = &self.ghosts[index];
            let closed = ghost.connection != connection || mode == Mode::Disconnected;
            let due = mode != Mode::Hang && ghost.due_ns <= now_ns;
            if !(closed || due) {
                index += 1;
                continue;
            }
            let ghost = self.ghosts.remove(index);
            if !closed && !matches!(mode, Mode::Error(_)) {
                world.land_ghost(self.path, ghost.io, now_ns);
            }
        }
        let mut index = 0;
        while index < self.attempts.len() {
            let attempt = &self.attempts[index];
            // A severed read ends at once: it can have no effect.
            let lost = attempt.connection != connection
                || mode == Mode::Disconnected
                || (attempt.severed && attempt.io.op == Op::Read);
            let due = lost || (mode != Mode::Hang && attempt.due_ns <= now_ns);
            if !due {
                index += 1;
                continue;
            }
            let attempt = self.attempts.remove(index);
            completions.push(world.complete(self.owner(), self.path, attempt.io, lost, now_ns));
        }
    }

    fn abort(&mut self, tag: u64) -> Option<PathIo> {
        let mut world = self.world.borrow_mut();
        let position = self
            .attempts
            .iter()
            .position(|attempt| attempt.io.tag == tag);
        let given_back = position.is_some_and(|position| self.attempts[position].abortable);
        let now_ns = world.now_ns;
        world.trace.record(
            now_ns,
            TraceEvent::Abort {
                queue: self.queue,
                path: self.path,
                tag,
                given_back,
            },
        );
        if position.is_some() && !given_back {
            // Cut from the client's side, as the NBD transport does.
            for attempt in &mut self.attempts {
                attempt.severed = true;
            }
        }
        let position = position.filter(|_| given_back)?;
        let attempt = self.attempts.remove(position);
        let age_ns = now_ns - attempt.submit_ns;
        if age_ns < world.io_timeout_ns && world.contract_breach.is_none() {
            world.contract_breach = Some(format!(
                "p{} attempt {tag:#x} aborted {age_ns}ns after submission, before the \
                 {}ns I/O timeout",
                self.path, world.io_timeout_ns
            ));
        }
        world.paths[self.path].failure_evidence += 1;
        if self.queue != PROBE_QUEUE {
            world.queue_failure_evidence[self.queue] += 1;
        }
        world.attempt_ended(self.path, self.owner(), tag);
        Some(attempt.io)
    }

    /// Gives back any attempt still held; a write's copy stays behind as
    /// a ghost that may still land (see the module docs).
    fn abandon(&mut self, tag: u64) -> Option<PathIo> {
        let position = self
            .attempts
            .iter()
            .position(|attempt| attempt.io.tag == tag)?;
        let attempt = self.attempts.remove(position);
        let mut world = self.world.borrow_mut();
        let now_ns = world.now_ns;
        world.trace.record(
            now_ns,
            TraceEvent::Abandon {
                queue: self.queue,
                path: self.path,
                tag,
            },
        );
        // Given back after a timeout, as an abort is: it counts toward the
        // queue's path-failed attempts (a retried read spends one).
        world.paths[self.path].failure_evidence += 1;
        world.queue_failure_evidence[self.queue] += 1;
        world.attempt_ended(self.path, self.owner(), tag);
        if attempt.io.op != Op::Read {
            self.ghosts.push(Ghost {
                io: PathIo {
                    tag,
                    op: attempt.io.op,
                    offset: attempt.io.offset,
                    len: attempt.io.len,
                    buf: attempt.io.buf.clone(),
                    fua: attempt.io.fua,
                },
                due_ns: attempt.due_ns,
                connection: attempt.connection,
            });
        }
        Some(attempt.io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{decode, fill};
    use mpio_core::io::Buffer;

    fn world(stuck_per_mille: u32) -> Rc<RefCell<World>> {
        let setup = WorldSetup {
            block_count: 4,
            base_latency_ns: vec![1_000, 1_000],
            queue_count: 1,
            land_per_mille: 1000,
            stuck_per_mille,
            io_timeout_ns: 10_000,
            seed: 1,
        };
        Rc::new(RefCell::new(World::new(&setup, Trace::new(false))))
    }

    fn write(tag: u64, value: u64) -> PathIo {
        let mut buf = Buffer::zeroed(BLOCK_BYTES);
        fill(buf.as_mut_slice(), value, 0);
        PathIo {
            tag,
            op: Op::Write,
            offset: 0,
            len: BLOCK_BYTES as u32,
            buf,
            fua: false,
        }
    }

    fn block_zero(world: &Rc<RefCell<World>>) -> Option<u64> {
        let mut bytes = [0u8; BLOCK_BYTES];
        world.borrow().disk.read(0, &mut bytes);
        decode(&bytes, 0)
    }

    use mpio_test_support::poll_outcomes as poll;

    #[test]
    fn an_aborted_write_never_lands() {
        let world = world(0);
        let mut queue = SimPathQueue::new(Rc::clone(&world), 0, 0);
        world.borrow_mut().set_mode(0, Mode::Hang, 0);
        queue.submit(write(1, 5), 0);
        world.borrow_mut().now_ns = 20_000;
        assert_eq!(queue.abort(1).map(|io| io.tag), Some(1));
        world.borrow_mut().set_mode(0, Mode::Healthy, 20_000);
        assert!(poll(&mut queue, 50_000).is_empty());
        assert_eq!(block_zero(&world), Some(0));
        assert!(world.borrow().contract_breach().is_none());
        assert!(world.borrow_mut().take_failure_evidence(0, 50_000).may_fail);
    }

    #[test]
    fn an_unabortable_attempt_waits_out_the_hang_and_an_early_abort_is_a_breach() {
        let world = world(1000);
        let mut queue = SimPathQueue::new(Rc::clone(&world), 0, 0);
        world.borrow_mut().set_mode(0, Mode::Hang, 0);
        queue.submit(write(1, 5), 0);
        assert!(poll(&mut queue, 100_000).is_empty(), "held while hung");
        world.borrow_mut().now_ns = 100_000;
        assert!(queue.abort(1).is_none());
        assert!(
            world
                .borrow_mut()
                .take_failure_evidence(0, 100_000)
                .may_fail
        );
        world.borrow_mut().set_mode(0, Mode::Healthy, 100_000);
        assert_eq!(poll(&mut queue, 100_000), [(1, PathOutcome::Ok)]);
        assert_eq!(block_zero(&world), Some(5));
        assert_eq!(world.borrow().hang_overlap_ns(0, 200_000), 100_000);

        let eager = self::world(0);
        let mut queue = SimPathQueue::new(Rc::clone(&eager), 0, 0);
        queue.submit(write(2, 6), 0);
        eager.borrow_mut().now_ns = 5_000;
        assert!(queue.abort(2).is_some());
        assert!(eager.borrow().contract_breach().is_some());
    }

    #[test]
    fn a_cut_connection_ends_reads_at_once_and_holds_writes_until_fenced() {
        let world = world(1000);
        let mut queue = SimPathQueue::new(Rc::clone(&world), 0, 0);
        world.borrow_mut().set_mode(0, Mode::Hang, 0);
        queue.submit(write(1, 5), 0);
        let mut read = write(2, 0);
        read.op = Op::Read;
        queue.submit(read, 0);
        world.borrow_mut().now_ns = 20_000;
        assert!(queue.abort(1).is_none(), "refused: the connection is cut");
        let lost = PathOutcome::Path(PathError::ConnectionLost);
        assert_eq!(poll(&mut queue, 20_000), [(2, lost)], "the read at once");
        assert_eq!(queue.held(), 1, "the write waits for its fence");
        world.borrow_mut().set_mode(0, Mode::Disconnected, 30_000);
        assert_eq!(poll(&mut queue, 30_000), [(1, lost)], "the server closed");
    }

    #[test]
    fn an_abandoned_write_leaves_a_ghost_that_lands_when_the_hang_ends() {
        let world = world(1000);
        let mut queue = SimPathQueue::new(Rc::clone(&world), 0, 0);
        world.borrow_mut().set_mode(0, Mode::Hang, 0);
        queue.submit(write(1, 5), 0);
        world.borrow_mut().now_ns = 50_000;
        assert_eq!(queue.abandon(1).map(|io| io.tag), Some(1));
        assert_eq!(queue.held(), 0);
        assert!(poll(&mut queue, 60_000).is_empty());
        assert_eq!(block_zero(&world), Some(0), "held while hung");
        world.borrow_mut().set_mode(0, Mode::Healthy, 70_000);
        assert!(poll(&mut queue, 70_000).is_empty(), "no completion");
        assert_eq!(block_zero(&world), Some(5), "the ghost landed");
        let landings = world.borrow_mut().take_ghost_landings();
        assert_eq!(landings.len(), 1);
        assert_eq!(landings[0].0, 0);
    }

    #[test]
    fn a_disconnect_ends_what_was_in_flight_only() {
        let world = world(0);
        let mut queue = SimPathQueue::new(Rc::clone(&world), 0, 0);
        queue.submit(write(1, 5), 0);
        world.borrow_mut().set_mode(0, Mode::Disconnected, 100);
        world.borrow_mut().set_mode(0, Mode::Healthy, 200);
        queue.submit(write(2, 6), 300);
        let lost = PathOutcome::Path(PathError::ConnectionLost);
        assert_eq!(poll(&mut queue, 10_000), [(1, lost), (2, PathOutcome::Ok)]);
        let evidence = world.borrow_mut().take_failure_evidence(0, 10_000);
        assert!(evidence.must_fail && evidence.may_fail);
        assert_eq!(world.borrow().queue_failure_evidence(0), 1);
    }

    #[test]
    fn a_target_fault_refuses_its_blocks_on_every_path_and_changes_nothing() {
        let world = world(0);
        world.borrow_mut().add_target_fault(TargetFault {
            first_block: 0,
            blocks: 1,
            error: TargetError::Medium,
            from_ns: 0,
            until_ns: 5_000,
        });
        for path in 0..2 {
            let mut queue = SimPathQueue::new(Rc::clone(&world), 0, path);
            queue.submit(write(path as u64, 5), 0);
            let medium = PathOutcome::Target(TargetError::Medium);
            assert_eq!(poll(&mut queue, 2_000), [(path as u64, medium)]);
            assert!(
                !world
                    .borrow_mut()
                    .take_failure_evidence(path, 2_000)
                    .may_fail
            );
        }
        assert_eq!(block_zero(&world), Some(0));
        let world = world.borrow();
        assert!(world.target_fault_explains(TargetError::Medium, 0..2, 4_000, 9_000));
        assert!(!world.target_fault_explains(TargetError::Medium, 0..2, 6_000, 9_000));
        assert!(!world.target_fault_explains(TargetError::OutOfRange, 0..2, 0, 9_000));
        assert!(!world.target_fault_explains(TargetError::Medium, 1..2, 0, 9_000));
    }
}
