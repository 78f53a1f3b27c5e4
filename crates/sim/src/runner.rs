//! One seed's run: build the drawn map over simulated paths, drive several
//! queues (simulated I/O threads) interleaved by the seeded scheduler on
//! one OS thread, play the fault schedule, and check every promise as it
//! goes. The per-completion checks are `Sim`'s methods in
//! [`crate::completion`], which builds on this module (never the reverse).
//!
//! # Phases
//! 1. *Faults*: the workload runs while the schedule's faults and
//!    messages play, and the path checker (the core's, see
//!    [`crate::path_checker`]) probes at the scenario's interval, if it
//!    has one.
//! 2. *Liveness*: faults stop (every path healthy, every access state
//!    optimized, every group enabled, no target fault), the workload
//!    stops, the path checker runs (and reinstates the failed paths by
//!    their probes), and every I/O still outstanding must finish within
//!    [`Sim::liveness_bound_ns`].
//! 3. *Verification* (the checker no longer runs): for each path in
//!    turn, every other path is failed by message and every block is read
//!    through that one path; each read must succeed, be served by that
//!    path, and agree with the reference disk (so all paths agree with
//!    each other).
//! 4. *Drained*: every counter is back to zero.
//!
//! # Clock and scheduling
//! Simulated time advances by a random step (1µs to the scenario's
//! `step_max_ns`) per round; in each round due events are applied, then
//! every queue, in a freshly shuffled order, may submit a burst of I/O and
//! is polled.

use crate::data::{decode, fill, BLOCK_BYTES};
use crate::invariants::{Failure, Invariant};
use crate::model::ReferenceDisk;
use crate::path_checker::{self, SimChecker, SimPaths};
use crate::rng::Rng;
use crate::scenario::Scenario;
use crate::schedule::{Event, Schedule};
use crate::trace::{Trace, TraceEvent};
use crate::transport::{SimPathQueue, TargetFault, World, WorldSetup};
use mpio_core::io::{Buffer, Completion, Io, Op};
use mpio_core::map::Map;
use mpio_core::message::Message;
use mpio_core::path::AccessState;
use mpio_core::queue::timeout_scan_period_ns;
use mpio_core::table::Table;
use mpio_core::{MapSlot, ReloadingQueue};
use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;
use std::sync::Arc;

/// Chance (per mille) that a submitted I/O is deliberately out of range.
const INVALID_PER_MILLE: u32 = 30;

/// One I/O the simulator submitted.
#[derive(Clone, Debug)]
pub(crate) struct IoRecord {
    pub(crate) queue: usize,
    pub(crate) op: Op,
    pub(crate) blocks: Range<u64>,
    pub(crate) submit_ns: u64,
    pub(crate) submit_seq: u64,
    pub(crate) done: bool,
    /// Deliberately out of range: must complete with `IoError::Invalid`.
    pub(crate) invalid: bool,
    /// Part of the verification pass: must succeed.
    pub(crate) verifying: bool,
}

/// What the simulator tracks per queue.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QueueTrack {
    /// I/Os submitted and not yet completed to the simulator.
    pub(crate) outstanding: usize,
    /// True if, after some call on this queue since its last poll, the
    /// map had no route and did not queue: a `NoPath` completion needs it.
    pub(crate) no_path_seen: bool,
    /// `RetryLimit` completions so far.
    pub(crate) retry_limited: u64,
}

/// The map's route as a call left it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallView {
    /// No path of the map is usable.
    pub(crate) no_route: bool,
    /// No path is usable and the map fails I/O rather than queue it.
    pub(crate) fails_for_no_path: bool,
}

/// Opens a simulated queue's path queues for one of its maps.
type SimOpener = Box<dyn FnMut(&Arc<Map>, &()) -> Vec<SimPathQueue>>;

/// A simulated I/O thread's queue: it follows the device across reloads.
pub(crate) type SimQueue = ReloadingQueue<SimPathQueue, (), SimOpener>;

/// A run in progress. See the module docs.
pub(crate) struct Sim {
    pub(crate) scenario: Scenario,
    /// The map the device serves now (the slot's).
    pub(crate) map: Arc<Map>,
    /// The device, which reloads replace the map of.
    slot: Arc<MapSlot<()>>,
    pub(crate) queues: Vec<SimQueue>,
    pub(crate) world: Rc<RefCell<World>>,
    pub(crate) model: ReferenceDisk,
    rng: Rng,
    pub(crate) ios: Vec<IoRecord>,
    pub(crate) now_ns: u64,
    seq: u64,
    next_value: u64,
    pub(crate) tracks: Vec<QueueTrack>,
    fail_counts: Vec<u32>,
    /// Closed intervals with no route, and the start of the open one.
    no_route: Vec<(u64, u64)>,
    no_route_since: Option<u64>,
    scratch: Vec<Completion>,
    pub(crate) blocks_checked: u64,
    /// The path checker, over the device's slot.
    pub(crate) checker: SimChecker,
}

impl Sim {
    /// Sets up `scenario` with a trace; the map is built and every queue
    /// opened.
    pub(crate) fn new(scenario: Scenario, trace: Trace) -> Result<Sim, Failure> {
        let map = Arc::new(
            scenario
                .build_map()
                .map_err(|error| Failure::new(Invariant::Harness, error))?,
        );
        let setup = WorldSetup {
            block_count: scenario.block_count,
            base_latency_ns: scenario.base_latency_ns.clone(),
            queue_count: scenario.queues.len(),
            land_per_mille: scenario.land_per_mille,
            stuck_per_mille: scenario.stuck_per_mille,
            io_timeout_ns: scenario.options.io_timeout_ns.unwrap_or(u64::MAX),
            seed: scenario.seed ^ 0x7472_616e_7370_6f72,
        };
        let world = Rc::new(RefCell::new(World::new(&setup, trace)));
        let slot = Arc::new(MapSlot::new(Arc::clone(&map), Arc::new(())));
        let queues = scenario
            .queues
            .iter()
            .enumerate()
            .map(|(queue, spec)| {
                let world = Rc::clone(&world);
                let mut incarnation = 0;
                let open: SimOpener = Box::new(move |map: &Arc<Map>, _: &()| {
                    let path_queues = (0..map.paths().len())
                        .map(|path| {
                            SimPathQueue::new(Rc::clone(&world), queue, path)
                                .for_incarnation(incarnation)
                        })
                        .collect();
                    incarnation += 1;
                    path_queues
                });
                ReloadingQueue::new(Arc::clone(&slot), open, spec.depth, spec.cpu)
            })
            .collect();
        let fail_counts = map.paths().iter().map(|path| path.fail_count()).collect();
        let checker = SimChecker::on_slot(
            SimPaths {
                slot: Arc::clone(&slot),
                world: Rc::clone(&world),
            },
            path_checker::options(&scenario),
        );
        let mut sim = Sim {
            model: ReferenceDisk::new(scenario.block_count),
            rng: Rng::new(scenario.seed ^ 0x776f_726b_6c6f_6164),
            tracks: vec![QueueTrack::default(); scenario.queues.len()],
            scenario,
            map,
            slot,
            queues,
            world,
            ios: Vec::new(),
            now_ns: 0,
            seq: 0,
            next_value: 1,
            fail_counts,
            no_route: Vec::new(),
            no_route_since: None,
            scratch: Vec::new(),
            blocks_checked: 0,
            checker,
        };
        sim.track_route();
        Ok(sim)
    }

    /// Runs every phase.
    pub(crate) fn run(&mut self) -> Result<(), Failure> {
        let mut schedule = Schedule::draw(
            &self.scenario,
            &mut Rng::new(self.scenario.seed ^ 0x6661_756c_7473),
        );
        self.record(TraceEvent::Phase(format!(
            "faults: {} events scheduled",
            schedule.len()
        )));
        while self.now_ns < self.scenario.fault_phase_ns {
            self.advance();
            while let Some(event) = schedule.next_due(self.now_ns) {
                self.apply_event(event)?;
            }
            if self.scenario.faults.checker_every_ns.is_some() {
                self.poll_checker()?;
            }
            self.round(true)?;
        }
        self.liveness()?;
        self.verify()?;
        self.check_drained()
    }

    pub(crate) fn record(&self, event: TraceEvent) {
        self.world.borrow_mut().trace.record(self.now_ns, event);
    }

    fn advance(&mut self) {
        self.now_ns += self.rng.range(1_000, self.scenario.step_max_ns);
        self.world.borrow_mut().now_ns = self.now_ns;
    }

    pub(crate) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// One scheduler round: each queue, in random order, maybe submits a
    /// burst, then is polled.
    fn round(&mut self, submitting: bool) -> Result<(), Failure> {
        let mut order: Vec<usize> = (0..self.queues.len()).collect();
        self.rng.shuffle(&mut order);
        for queue in order {
            let room = self.scenario.queues[queue].depth - self.tracks[queue].outstanding;
            if submitting && room > 0 && self.rng.chance(self.scenario.submit_per_mille) {
                for _ in 0..self.rng.range(1, room.min(4) as u64) {
                    self.submit_random(queue)?;
                }
            }
            self.poll(queue)?;
        }
        Ok(())
    }

    fn submit_random(&mut self, queue: usize) -> Result<(), Failure> {
        let block_count = self.scenario.block_count;
        if self.rng.chance(INVALID_PER_MILLE) {
            let op = self.rng.pick(&[Op::Read, Op::Write, Op::WriteZeroes]);
            let first = block_count - 1 + self.rng.below(2);
            return self.submit(queue, op, first..first + 2, true, false);
        }
        let op = match self.rng.below(100) {
            0..45 => Op::Read,
            45..85 => Op::Write,
            85..93 => Op::WriteZeroes,
            _ => Op::Flush,
        };
        if op == Op::Flush {
            return self.submit(queue, op, 0..0, false, false);
        }
        let first = self.rng.below(block_count);
        let count = self
            .rng
            .range(1, self.scenario.max_io_blocks)
            .min(block_count - first);
        self.submit(queue, op, first..first + count, false, false)
    }

    /// Submits one I/O of `op` over `blocks` on `queue`.
    pub(crate) fn submit(
        &mut self,
        queue: usize,
        op: Op,
        blocks: Range<u64>,
        invalid: bool,
        verifying: bool,
    ) -> Result<(), Failure> {
        let id = self.ios.len() as u64;
        let len = (blocks.end - blocks.start) as usize * BLOCK_BYTES;
        let value = match op {
            Op::Write => {
                self.next_value += 1;
                self.next_value - 1
            }
            _ => 0,
        };
        let buf = match op {
            Op::Read => Buffer::zeroed(len),
            Op::Write => {
                let mut buf = Buffer::zeroed(len);
                for (block, bytes) in blocks
                    .clone()
                    .zip(buf.as_mut_slice().chunks_exact_mut(BLOCK_BYTES))
                {
                    fill(bytes, value, block);
                }
                buf
            }
            _ => Buffer::empty(),
        };
        let io = Io {
            user_data: id,
            op,
            offset: blocks.start * BLOCK_BYTES as u64,
            len: len as u32,
            buf,
            fua: false,
        };
        let seq = self.next_seq();
        if op.is_write() && !invalid {
            self.model.write_submitted(id, blocks.clone(), value, seq);
        }
        self.record(TraceEvent::Submit {
            queue,
            io: id,
            op,
            block: blocks.start,
            blocks: blocks.end - blocks.start,
        });
        self.ios.push(IoRecord {
            queue,
            op,
            blocks,
            submit_ns: self.now_ns,
            submit_seq: seq,
            done: false,
            invalid,
            verifying,
        });
        self.tracks[queue].outstanding += 1;
        if self.queues[queue].submit(io, self.now_ns).is_err() {
            return Err(Failure::new(
                Invariant::Counters,
                format!(
                    "queue {queue} refused io{id} with {} of its depth {} outstanding",
                    self.tracks[queue].outstanding - 1,
                    self.scenario.queues[queue].depth
                ),
            ));
        }
        let view = self.after_call(queue, None)?;
        self.tracks[queue].no_path_seen |= view.fails_for_no_path;
        Ok(())
    }

    /// Polls `queue` and checks every completion it hands over.
    pub(crate) fn poll(&mut self, queue: usize) -> Result<(), Failure> {
        let mut completions = std::mem::take(&mut self.scratch);
        self.queues[queue].poll(self.now_ns, &mut |completion| completions.push(completion));
        let mut view = self.after_call(queue, Some(completions.len()))?;
        view.fails_for_no_path |= self.tracks[queue].no_path_seen;
        let mut result = Ok(());
        for completion in completions.drain(..) {
            result = result.and_then(|()| self.complete(queue, completion, view));
        }
        self.tracks[queue].no_path_seen = false;
        self.scratch = completions;
        result
    }

    /// Checks taken after every call into a queue (`delivered`: how many
    /// I/Os a poll handed over, `None` after a submit): the transport
    /// contract, every path failure explained and every path error acted
    /// on, in-flight counters against the ground truth, and after a poll
    /// the queue holding exactly the I/O not yet completed and nothing
    /// waiting for a route that exists. Returns the map's route after the
    /// call.
    fn after_call(&mut self, queue: usize, delivered: Option<usize>) -> Result<CallView, Failure> {
        self.check_paths()?;
        let view = self.track_route();
        // A poll hands over every finished I/O, so after it the queue holds
        // exactly the I/O the simulator has not had back.
        let holding = self.queues[queue].in_flight();
        if let Some(delivered) = delivered {
            let expected = self.tracks[queue].outstanding - delivered;
            if holding != expected {
                return Err(Failure::new(
                    Invariant::Counters,
                    format!(
                        "queue {queue} holds {holding} I/Os after a poll that handed over \
                         {delivered}; {expected} remain submitted and not completed"
                    ),
                ));
            }
        }
        // A poll first fetches the newest snapshot and releases waiting
        // I/O if it has a route; within the call the map only loses
        // paths: so a route after a poll means nothing may still wait for
        // one. (Not after a submit: one refused as invalid returns before
        // looking at the map, leaving the release to the next poll.)
        let waiting = self.queues[queue].waiting_for_path();
        if delivered.is_some() && !view.no_route && waiting > 0 {
            return Err(Failure::new(
                Invariant::Liveness,
                format!(
                    "queue {queue} holds {waiting} I/O(s) waiting for a path while the map \
                     has a route"
                ),
            ));
        }
        Ok(view)
    }

    /// Polls the checker at the simulated time, then checks what it did
    /// as after any call into a queue: every path it failed has evidence
    /// (a probe that failed or timed out), the counters hold.
    fn poll_checker(&mut self) -> Result<(), Failure> {
        let reinstated: Vec<u64> = self
            .checker
            .path_checks()
            .iter()
            .map(|check| check.reinstated)
            .collect();
        self.checker.poll(self.now_ns);
        let checks = self.checker.path_checks().to_vec();
        for (path, (check, before)) in checks.iter().zip(reinstated).enumerate() {
            if check.reinstated > before {
                self.record(TraceEvent::Reinstate { path });
            }
        }
        self.check_paths()?;
        self.track_route();
        Ok(())
    }

    /// The checks of [`Sim::after_call`] that concern the paths, also
    /// taken after the path checker's polls.
    fn check_paths(&mut self) -> Result<(), Failure> {
        if let Some(breach) = self.world.borrow().contract_breach() {
            return Err(Failure::new(Invariant::TransportContract, breach));
        }
        self.check_ghost_landings()?;
        for path in 0..self.fail_counts.len() {
            let shared = &self.map.paths()[path];
            let evidence = self
                .world
                .borrow_mut()
                .take_failure_evidence(path, self.now_ns);
            if evidence.must_fail && !shared.is_failed() {
                return Err(Failure::new(
                    Invariant::IgnoredPathError,
                    format!("p{path} reported a path error and the map still uses it"),
                ));
            }
            let count = shared.fail_count();
            if count != self.fail_counts[path] {
                self.fail_counts[path] = count;
                self.record(TraceEvent::PathFailed { path });
                if !evidence.may_fail {
                    return Err(Failure::new(
                        Invariant::SpuriousPathFailure,
                        format!(
                            "the map failed p{path} ({}) but it reported no path error and \
                             held no attempt past the I/O timeout",
                            self.world.borrow().mode(path).describe()
                        ),
                    ));
                }
            }
            let (in_flight, in_flight_bytes) = self.path_load(path);
            let in_flight = in_flight as usize;
            let outstanding = self.world.borrow().outstanding(path);
            if in_flight != 0 && in_flight != outstanding {
                return Err(Failure::new(
                    Invariant::Counters,
                    format!(
                        "p{path} counts {in_flight} I/Os in flight; its transport holds \
                         {outstanding}"
                    ),
                ));
            }
            if in_flight == 0 && in_flight_bytes != 0 {
                return Err(Failure::new(
                    Invariant::Counters,
                    format!("p{path} counts {in_flight_bytes} bytes in flight and no I/O"),
                ));
            }
        }
        Ok(())
    }

    /// Checks each held copy of a write that landed late (a ghost, see
    /// `transport.rs`) against the reference disk: its write must not
    /// have completed before.
    fn check_ghost_landings(&mut self) -> Result<(), Failure> {
        let landings = self.world.borrow_mut().take_ghost_landings();
        for (offset, bytes) in landings {
            let seq = self.next_seq();
            let first = offset / BLOCK_BYTES as u64;
            for (block, data) in (first..).zip(bytes.chunks_exact(BLOCK_BYTES)) {
                let Some(value) = decode(data, block) else {
                    continue;
                };
                self.model
                    .check_landing(block, value, seq)
                    .map_err(|detail| Failure::new(Invariant::ReferenceDisk, detail))?;
            }
        }
        Ok(())
    }

    /// Notes whether the map has a route now, for the latency bound and
    /// the no-path checks.
    fn track_route(&mut self) -> CallView {
        let snapshot = self.map.snapshot();
        let no_route = snapshot.route.is_none();
        match (no_route, self.no_route_since) {
            (true, None) => self.no_route_since = Some(self.now_ns),
            (false, Some(since_ns)) => {
                self.no_route.push((since_ns, self.now_ns));
                self.no_route_since = None;
            }
            _ => {}
        }
        CallView {
            no_route,
            fails_for_no_path: no_route && !snapshot.queue_if_no_path,
        }
    }

    /// Time the map had no route within `from_ns..now`.
    pub(crate) fn no_route_overlap_ns(&self, from_ns: u64) -> u64 {
        let open = self.no_route_since.map(|since_ns| (since_ns, self.now_ns));
        self.no_route
            .iter()
            .copied()
            .chain(open)
            .map(|(start, end)| end.saturating_sub(start.max(from_ns)))
            .sum()
    }

    /// The longest one attempt may take before the queue moves on: the
    /// slowest completion, or the I/O timeout plus one timeout scan
    /// period (the core's [`timeout_scan_period_ns`]), plus two steps.
    pub(crate) fn attempt_bound_ns(&self) -> u64 {
        let timeout_ns = self.scenario.options.io_timeout_ns.unwrap_or(u64::MAX / 4);
        let scan_ns = timeout_scan_period_ns(timeout_ns);
        self.scenario.max_latency_ns().max(timeout_ns + scan_ns) + 2 * self.scenario.step_max_ns
    }

    /// After the faults stop, the longest an outstanding I/O may take: an
    /// attempt already sent, a retry after its timeout, the checker's
    /// reinstatement of what timeouts failed, and one more attempt.
    fn liveness_bound_ns(&self) -> u64 {
        3 * self.attempt_bound_ns() + self.reinstate_bound_ns() + 20 * self.scenario.step_max_ns
    }

    /// After the faults stop, the longest before the checker reinstates a
    /// failed path: the round in flight ends (its probes answer or time
    /// out within an attempt bound), a stalled probe comes back and
    /// misses the next round, and the round after probes it (an
    /// interval each, and one more attempt bound).
    fn reinstate_bound_ns(&self) -> u64 {
        let interval_ns = path_checker::options(&self.scenario).interval_ns;
        2 * self.attempt_bound_ns() + 2 * interval_ns
    }

    fn apply_event(&mut self, event: Event) -> Result<(), Failure> {
        match event {
            Event::PathMode { path, mode } => {
                self.world.borrow_mut().set_mode(path, mode, self.now_ns);
            }
            Event::TargetFault {
                first_block,
                blocks,
                error,
                duration_ns,
            } => self.world.borrow_mut().add_target_fault(TargetFault {
                first_block,
                blocks,
                error,
                from_ns: self.now_ns,
                until_ns: self.now_ns + duration_ns,
            }),
            Event::Message(message) => self.message(&message)?,
            Event::Access { path, state } => self.set_access(path, state),
            Event::Reload { table } => self.reload(&table)?,
        }
        Ok(())
    }

    /// Gives the device a new table, as `mpio reload` does.
    fn reload(&mut self, text: &str) -> Result<(), Failure> {
        self.record(TraceEvent::Message(format!("reload {text}")));
        let harness = |error: String| Failure::new(Invariant::Harness, error);
        let table =
            Table::parse(text).map_err(|error| harness(format!("reload table: {error}")))?;
        let map = Map::new(
            &table,
            &self.scenario.path_infos,
            self.scenario.options.clone(),
        )
        .map_err(|error| harness(format!("reload map: {error}")))?;
        let map = Arc::new(map);
        self.slot.install(Arc::clone(&map), Arc::new(()));
        self.map = map;
        // The new map took over each path's failure count: nothing failed.
        for (path, count) in self.fail_counts.iter_mut().enumerate() {
            *count = self.map.paths()[path].fail_count();
        }
        self.track_route();
        Ok(())
    }

    /// I/Os and bytes in flight on `path`, over every queue of every map
    /// (the maps of one run share their paths' order).
    fn path_load(&self, path: usize) -> (u64, u64) {
        self.queues
            .iter()
            .flat_map(SimQueue::queues)
            .map(|queue| {
                let load = &queue.path_loads()[path];
                (u64::from(load.in_flight()), load.in_flight_bytes())
            })
            .fold((0, 0), |(ios, bytes), (more_ios, more_bytes)| {
                (ios + more_ios, bytes + more_bytes)
            })
    }

    /// Sends a control message to the map.
    fn message(&mut self, message: &Message) -> Result<(), Failure> {
        self.record(TraceEvent::Message(message_text(message)));
        self.map.message(message).map_err(|error| {
            Failure::new(Invariant::Harness, format!("message refused: {error}"))
        })?;
        // A path failed by message needs no other explanation.
        for (path, count) in self.fail_counts.iter_mut().enumerate() {
            *count = self.map.paths()[path].fail_count();
        }
        self.track_route();
        Ok(())
    }

    fn set_access(&mut self, path: usize, state: AccessState) {
        self.record(TraceEvent::Access {
            path,
            state: state.as_str(),
        });
        self.map.set_access_state(path, state);
        self.track_route();
    }

    fn liveness(&mut self) -> Result<(), Failure> {
        self.record(TraceEvent::Phase("liveness: faults stop".into()));
        self.world.borrow_mut().heal_all(self.now_ns);
        for path in 0..self.map.paths().len() {
            self.set_access(path, AccessState::Optimized);
        }
        for group in 1..=self.map.groups().len() as u32 {
            self.message(&Message::EnableGroup(group))?;
        }
        let deadline_ns = self.now_ns + self.liveness_bound_ns();
        self.poll_checker()?;
        while self.tracks.iter().any(|track| track.outstanding > 0) {
            if self.now_ns > deadline_ns {
                return Err(self.liveness_failure());
            }
            self.advance();
            self.poll_checker()?;
            self.round(false)?;
        }
        Ok(())
    }

    fn liveness_failure(&self) -> Failure {
        let stuck: Vec<String> = self
            .ios
            .iter()
            .enumerate()
            .filter(|(_, io)| !io.done)
            .take(8)
            .map(|(id, io)| {
                format!(
                    "io{id} ({:?} on q{}, submitted at {}us)",
                    io.op,
                    io.queue,
                    io.submit_ns / 1_000
                )
            })
            .collect();
        let count = self.ios.iter().filter(|io| !io.done).count();
        Failure::new(
            Invariant::Liveness,
            format!(
                "{count} I/O(s) still outstanding {}us after the faults stopped (bound {}us): {}",
                (self.now_ns - self.scenario.fault_phase_ns) / 1_000,
                self.liveness_bound_ns() / 1_000,
                stuck.join(", ")
            ),
        )
    }

    /// Reads every block through each path alone.
    fn verify(&mut self) -> Result<(), Failure> {
        let path_count = self.map.paths().len();
        for only in 0..path_count {
            self.record(TraceEvent::Phase(format!("verify through p{only}")));
            for path in 0..path_count {
                let name = Scenario::path_name(path);
                let message = if path == only {
                    Message::ReinstatePath(name)
                } else {
                    Message::FailPath(name)
                };
                self.message(&message)?;
            }
            let served_before = self.world.borrow().completed_ok(only);
            let reads = self.read_every_block()?;
            let served = self.world.borrow().completed_ok(only) - served_before;
            if served != reads {
                return Err(Failure::new(
                    Invariant::Verification,
                    format!("with only p{only} usable, it served {served} of {reads} reads"),
                ));
            }
        }
        for path in 0..path_count {
            self.message(&Message::ReinstatePath(Scenario::path_name(path)))?;
        }
        Ok(())
    }

    /// Reads every block once through queue 0; returns how many reads.
    fn read_every_block(&mut self) -> Result<u64, Failure> {
        let depth = self.scenario.queues[0].depth;
        let mut deadline_ns = self.now_ns + self.liveness_bound_ns();
        let mut next_block = 0;
        let mut reads = 0;
        while next_block < self.scenario.block_count || self.tracks[0].outstanding > 0 {
            while next_block < self.scenario.block_count && self.tracks[0].outstanding < depth {
                self.submit(0, Op::Read, next_block..next_block + 1, false, true)?;
                next_block += 1;
                reads += 1;
            }
            if self.now_ns > deadline_ns {
                return Err(Failure::new(
                    Invariant::Verification,
                    format!(
                        "no verification read completed for {}us",
                        self.liveness_bound_ns() / 1_000
                    ),
                ));
            }
            self.advance();
            let outstanding = self.tracks[0].outstanding;
            self.poll(0)?;
            // The bound is on progress: some read completes within it.
            if self.tracks[0].outstanding < outstanding {
                deadline_ns = self.now_ns + self.liveness_bound_ns();
            }
        }
        Ok(reads)
    }

    /// Every counter back to zero, every I/O completed.
    fn check_drained(&mut self) -> Result<(), Failure> {
        let counters = |detail: String| Err(Failure::new(Invariant::Counters, detail));
        for (index, queue) in self.queues.iter_mut().enumerate() {
            if queue.in_flight() != 0 || queue.waiting_for_path() != 0 {
                return counters(format!(
                    "queue {index} ends with {} in flight, {} waiting",
                    queue.in_flight(),
                    queue.waiting_for_path()
                ));
            }
            // Every simulated attempt ends exactly once, through poll or
            // abort: a completion the queue did not expect means it lost
            // track of an attempt.
            let strays: u64 = queue
                .queues()
                .map(|queue| queue.stats().stray_completions)
                .sum();
            if strays != 0 {
                return counters(format!("queue {index} counted {strays} stray completions"));
            }
            let held: usize = queue
                .queues_mut()
                .flat_map(|queue| queue.path_queues_mut().iter())
                .map(SimPathQueue::held)
                .sum();
            if held != 0 {
                return counters(format!(
                    "queue {index}'s transports still hold {held} attempts"
                ));
            }
        }
        for index in 0..self.map.paths().len() {
            let (ios, bytes) = self.path_load(index);
            if ios != 0 || bytes != 0 {
                return counters(format!(
                    "p{index} ends with {ios} I/Os and {bytes} bytes in flight (over every queue)"
                ));
            }
        }
        if let Some(id) = self.ios.iter().position(|io| !io.done) {
            return Err(Failure::new(
                Invariant::ExactlyOnce,
                format!("io{id} never completed"),
            ));
        }
        Ok(())
    }
}

/// A message in `dmsetup message` words.
pub(crate) fn message_text(message: &Message) -> String {
    match message {
        Message::FailPath(path) => format!("fail_path {path}"),
        Message::ReinstatePath(path) => format!("reinstate_path {path}"),
        Message::SwitchGroup(group) => format!("switch_group {group}"),
        Message::EnableGroup(group) => format!("enable_group {group}"),
        Message::DisableGroup(group) => format!("disable_group {group}"),
        Message::QueueIfNoPath => "queue_if_no_path".into(),
        Message::FailIfNoPath => "fail_if_no_path".into(),
    }
}
