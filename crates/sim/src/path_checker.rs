//! The path checker in the simulator: the core's own
//! [`mpio_core::checker::Checker`] (multipathd's role), probing the
//! simulated paths through their fault model on the simulated clock. A
//! path the checker reinstates is one whose probe the world answered; a
//! path it fails is one whose probe failed or timed out. This module only
//! fits the simulated paths and the device's slot to the core's checker;
//! the runner polls it and checks what it did (`Sim::poll_checker`).
//!
//! # Options
//! The interval is the scenario's `checker_every_ns` (1 ms in a seed
//! without a checker in its fault phase: the liveness phase always runs
//! one); the probe timeout is the map's I/O timeout (the simulated
//! transport takes an abort earlier as a breach of its contract); the
//! failback policy is the scenario's; active paths whose probe fails are
//! failed; no marginal policy.

use crate::data::BLOCK_BYTES;
use crate::scenario::Scenario;
use crate::transport::{SimPathQueue, World};
use mpio_core::checker::{Checker, CheckerOptions, MapSource, ProbePath};
use mpio_core::map::Map;
use mpio_core::MapSlot;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// The checker's interval in a seed whose fault phase has none, ns.
pub(crate) const DEFAULT_INTERVAL_NS: u64 = 1_000_000;

/// One simulated path, as the checker probes it.
#[derive(Clone, Debug)]
pub(crate) struct SimProbePath {
    world: Rc<RefCell<World>>,
    path: usize,
}

impl ProbePath for SimProbePath {
    type Queue = SimPathQueue;

    fn open_probe(&self) -> SimPathQueue {
        SimPathQueue::probe(Rc::clone(&self.world), self.path)
    }

    fn min_block(&self) -> u32 {
        BLOCK_BYTES as u32
    }
}

/// The device's slot with the simulated paths of whatever map it serves
/// (every map of a run has the same paths in the same order).
#[derive(Debug)]
pub(crate) struct SimPaths {
    pub(crate) slot: Arc<MapSlot<()>>,
    pub(crate) world: Rc<RefCell<World>>,
}

impl MapSource for SimPaths {
    type Path = SimProbePath;

    fn epoch(&self) -> u64 {
        self.slot.epoch()
    }

    fn current(&self) -> (Arc<Map>, Vec<SimProbePath>, u64) {
        let (map, _, epoch) = self.slot.current();
        let paths = (0..map.paths().len())
            .map(|path| SimProbePath {
                world: Rc::clone(&self.world),
                path,
            })
            .collect();
        (map, paths, epoch)
    }
}

/// The checker the simulator drives.
pub(crate) type SimChecker = Checker<SimPaths>;

/// The checker's options for `scenario` (see the module docs).
pub(crate) fn options(scenario: &Scenario) -> CheckerOptions {
    let io_timeout_ns = scenario.options.io_timeout_ns.unwrap_or(u64::MAX / 4);
    CheckerOptions {
        interval_ns: scenario
            .faults
            .checker_every_ns
            .unwrap_or(DEFAULT_INTERVAL_NS),
        probe_timeout_ns: io_timeout_ns,
        failback: scenario.failback,
        fail_active_paths: true,
        marginal: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Trace;
    use crate::transport::{Mode, WorldSetup};
    use mpio_core::checker::ProbeState;
    use mpio_core::failback::Failback;
    use mpio_core::io::{PathError, PathOutcome};
    use mpio_core::map::{MapOptions, PathInfo};
    use mpio_core::message::Message;
    use mpio_core::status::PathState;
    use mpio_core::table::Table;

    const MS: u64 = 1_000_000;

    /// A world of two paths (10 µs base latency, every attempt abortable),
    /// a map over them, and the checker probing every millisecond.
    fn setup() -> (Rc<RefCell<World>>, Arc<Map>, SimChecker) {
        let world = Rc::new(RefCell::new(World::new(
            &WorldSetup {
                block_count: 64,
                base_latency_ns: vec![10_000, 10_000],
                queue_count: 1,
                land_per_mille: 0,
                stuck_per_mille: 0,
                io_timeout_ns: MS,
                seed: 7,
            },
            Trace::new(false),
        )));
        let table = Table::parse("0 64 multipath 0 0 1 1 round-robin 0 2 0 p0 p1").unwrap();
        let infos = [PathInfo::default(), PathInfo::default()];
        let map = Arc::new(Map::new(&table, &infos, MapOptions::default()).unwrap());
        let paths = SimPaths {
            slot: Arc::new(MapSlot::new(Arc::clone(&map), Arc::new(()))),
            world: Rc::clone(&world),
        };
        let options = CheckerOptions {
            interval_ns: MS,
            probe_timeout_ns: MS,
            failback: Failback::Manual,
            fail_active_paths: true,
            marginal: None,
        };
        (world, map, SimChecker::on_slot(paths, options))
    }

    fn poll(world: &Rc<RefCell<World>>, checker: &mut SimChecker, now_ns: u64) {
        world.borrow_mut().now_ns = now_ns;
        checker.poll(now_ns);
    }

    fn state(map: &Map, path: usize) -> PathState {
        map.status().groups[0].paths[path].state
    }

    #[test]
    fn probes_through_the_fault_model_reinstate_a_healed_path_and_not_a_failing_one() {
        let (world, map, mut checker) = setup();
        for word in ["p0", "p1"] {
            map.message(&Message::FailPath(word.into())).unwrap();
        }
        let transport = PathError::Transport;
        world.borrow_mut().set_mode(0, Mode::Error(transport), 0);
        poll(&world, &mut checker, 0);
        assert!(checker.probing(), "the probes take the paths' latency");
        poll(&world, &mut checker, MS / 2);
        assert_eq!(state(&map, 0), PathState::Failed, "p0 still fails");
        assert_eq!(state(&map, 1), PathState::Active, "p1 answered");
        let p0 = checker.path_checks()[0];
        assert_eq!(p0.last_outcome, Some(PathOutcome::Path(transport)));

        world.borrow_mut().set_mode(0, Mode::Healthy, MS / 2);
        poll(&world, &mut checker, MS - 1);
        assert_eq!(state(&map, 0), PathState::Failed, "not between rounds");
        poll(&world, &mut checker, MS);
        poll(&world, &mut checker, MS + MS / 2);
        assert_eq!(state(&map, 0), PathState::Active, "healed, reinstated");
        assert_eq!(checker.path_checks()[0].reinstated, 1);
        // Probes are not I/O: the world's I/O books leave them out.
        let world = world.borrow();
        assert_eq!((world.completed_ok(1), world.outstanding(1)), (0, 0));
    }

    #[test]
    fn a_hung_path_s_probe_times_out_and_fails_it_with_evidence() {
        let (world, map, mut checker) = setup();
        world.borrow_mut().set_mode(0, Mode::Hang, 0);
        poll(&world, &mut checker, 0);
        poll(&world, &mut checker, MS - 1);
        assert_eq!(state(&map, 0), PathState::Active, "not before the timeout");
        poll(&world, &mut checker, MS);
        assert_eq!(state(&map, 0), PathState::Failed);
        let check = checker.path_checks()[0];
        assert_eq!(check.state, ProbeState::Down);
        assert!(!check.stalled, "the probe was given back");
        let evidence = world.borrow_mut().take_failure_evidence(0, MS);
        assert!(evidence.may_fail && !evidence.must_fail);
    }
}
