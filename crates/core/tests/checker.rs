//! The checker's decisions over scripted probe paths, on a test clock:
//! what a busy answer, a target error and a timeout mean; a probe the
//! transport hands back against one it keeps (a stall); the probe's size;
//! a reload that keeps, adds and removes path words. The checker over real
//! transports (memory ports, files, NBD servers), failback and marginal
//! paths are tested in `crates/transport/tests/checker*.rs`.
#![cfg(not(loom))]

mod support {
    pub mod scripted_path;
}

use mpio_core::checker::{Checker, CheckerOptions, ProbeState};
use mpio_core::failback::Failback;
use mpio_core::io::{PathError, PathOutcome, TargetError};
use mpio_core::map::Map;
use mpio_core::message::Message;
use mpio_core::status::PathState;
use mpio_core::MapSlot;
use std::sync::Arc;
use support::scripted_path::{map, ScriptedPath};

const INTERVAL: u64 = 1_000_000_000;
const TIMEOUT: u64 = 100_000_000;

fn options() -> CheckerOptions {
    CheckerOptions {
        interval_ns: INTERVAL,
        probe_timeout_ns: TIMEOUT,
        failback: Failback::Manual,
        fail_active_paths: true,
        marginal: None,
    }
}

/// The checker over scripted paths.
type ScriptedChecker = Checker<Arc<MapSlot<Vec<ScriptedPath>>>>;

/// A checker over two scripted paths `a` and `b`.
fn two_paths() -> (Arc<Map>, [ScriptedPath; 2], ScriptedChecker) {
    let map = map(&["a", "b"], 2048);
    let paths = [ScriptedPath::new(), ScriptedPath::new()];
    let checker = Checker::new(Arc::clone(&map), paths.to_vec(), options());
    (map, paths, checker)
}

fn state(map: &Map, path: usize) -> PathState {
    map.status().groups[0].paths[path].state
}

#[test]
fn a_busy_answer_leaves_the_verdict_as_it_was() {
    let (map, [a, _], mut checker) = two_paths();
    a.script().outcome = PathOutcome::Busy;
    checker.poll(0);
    let check = checker.path_checks()[0];
    assert_eq!((check.state, check.probes), (ProbeState::Pending, 1));
    assert_eq!(check.last_outcome, Some(PathOutcome::Busy));
    assert_eq!(check.failed_probes, 0);
    assert_eq!(state(&map, 0), PathState::Active, "not failed");

    a.script().outcome = PathOutcome::Path(PathError::Transport);
    checker.poll(INTERVAL);
    assert_eq!(state(&map, 0), PathState::Failed);
    a.script().outcome = PathOutcome::Busy;
    checker.poll(2 * INTERVAL);
    let check = checker.path_checks()[0];
    assert_eq!(check.state, ProbeState::Down, "still down");
    assert_eq!(check.reinstated, 0);
    assert_eq!(state(&map, 0), PathState::Failed, "not reinstated");
}

#[test]
fn a_target_error_counts_as_up_and_reinstates_a_path_failed_by_message() {
    let (map, [a, _], mut checker) = two_paths();
    map.message(&Message::FailPath("a".into())).unwrap();
    a.script().outcome = PathOutcome::Target(TargetError::Medium);
    checker.poll(0);
    let check = checker.path_checks()[0];
    assert_eq!((check.state, check.reinstated), (ProbeState::Up, 1));
    assert_eq!(state(&map, 0), PathState::Active);
}

#[test]
fn a_failing_probe_without_fail_active_paths_marks_the_path_down_only() {
    let map = map(&["a"], 2048);
    let a = ScriptedPath::new();
    let options = CheckerOptions {
        fail_active_paths: false,
        ..options()
    };
    let mut checker = Checker::new(Arc::clone(&map), vec![a.clone()], options);
    a.script().outcome = PathOutcome::Path(PathError::ConnectionLost);
    checker.poll(0);
    assert_eq!(checker.path_checks()[0].state, ProbeState::Down);
    assert_eq!(state(&map, 0), PathState::Active, "left to I/O");
}

#[test]
fn a_timed_out_probe_given_back_opens_a_fresh_queue_for_the_next() {
    let (map, [a, _], mut checker) = two_paths();
    a.script().hangs = true;
    assert_eq!(checker.poll(0), TIMEOUT, "woken at the probe's timeout");
    checker.poll(TIMEOUT - 1);
    assert_eq!(state(&map, 0), PathState::Active, "not before its timeout");
    assert_eq!(checker.poll(TIMEOUT), INTERVAL, "next at the next round");
    let check = checker.path_checks()[0];
    assert_eq!(
        check.last_outcome,
        Some(PathOutcome::Path(PathError::Timeout))
    );
    assert!(!check.stalled && !checker.probing());
    assert_eq!(state(&map, 0), PathState::Failed);
    a.script().hangs = false;
    checker.poll(INTERVAL);
    assert_eq!(state(&map, 0), PathState::Active);
    assert_eq!(a.script().opened, 2, "a fresh queue after the timeout");
    assert_eq!(a.script().sent.len(), 2);
}

#[test]
fn a_timed_out_probe_the_transport_keeps_stalls_the_path_until_it_returns() {
    let (map, [a, b], mut checker) = two_paths();
    {
        let mut script = a.script();
        script.hangs = true;
        script.gives_back = false;
    }
    checker.poll(0);
    checker.poll(TIMEOUT);
    let check = checker.path_checks()[0];
    assert!(check.stalled && !check.probing);
    assert_eq!(check.state, ProbeState::Down);
    assert_eq!(state(&map, 0), PathState::Failed);
    for round in 1..4 {
        checker.poll(round * INTERVAL);
        checker.poll(round * INTERVAL + TIMEOUT);
        assert_eq!(a.script().sent.len(), 1, "round {round}: no second probe");
        assert_eq!(b.script().sent.len(), round as usize + 1, "b goes on");
    }
    // The old probe comes back: the stall ends, it is no verdict, and the
    // next round probes on a fresh queue and reinstates the path.
    a.script().hangs = false;
    checker.poll(4 * INTERVAL - 1);
    let check = checker.path_checks()[0];
    assert!(!check.stalled);
    assert_eq!((check.probes, check.state), (1, ProbeState::Down));
    assert_eq!(state(&map, 0), PathState::Failed);
    checker.poll(4 * INTERVAL);
    assert_eq!(state(&map, 0), PathState::Active);
    assert_eq!(a.script().opened, 2);
}

#[test]
fn the_probe_is_one_block_of_the_largest_minimum_at_most_the_map() {
    let a = ScriptedPath::new();
    let b = ScriptedPath::new();
    b.script().min_block = 3 * 4096;
    let mut checker = Checker::new(map(&["a", "b"], 2048), vec![a.clone(), b], options());
    checker.poll(0);
    assert_eq!(a.script().sent, [(1, 3 * 4096)]);
    let small = ScriptedPath::new();
    let mut checker = Checker::new(map(&["s"], 4), vec![small.clone()], options());
    checker.poll(0);
    assert_eq!(small.script().sent, [(1, 4 * 512)], "the map's size");
}

#[test]
fn a_reload_keeps_known_words_probes_new_ones_at_once_and_holds_a_stalled_removed_one() {
    let a = ScriptedPath::new();
    let b = ScriptedPath::new();
    let slot = Arc::new(MapSlot::new(
        map(&["a", "b"], 2048),
        Arc::new(vec![a.clone(), b.clone()]),
    ));
    let mut checker = Checker::on_slot(Arc::clone(&slot), options());
    a.script().outcome = PathOutcome::Path(PathError::Transport);
    {
        let mut script = b.script();
        script.hangs = true;
        script.gives_back = false;
    }
    checker.poll(0);
    checker.poll(TIMEOUT);
    assert!(checker.path_checks()[1].stalled);

    // b goes, c comes; a stays, second now.
    let c = ScriptedPath::new();
    slot.install(map(&["c", "a"], 2048), Arc::new(vec![c.clone(), a.clone()]));
    checker.poll(TIMEOUT + 1);
    let words: Vec<String> = checker
        .named_path_checks()
        .into_iter()
        .map(|(word, _)| word)
        .collect();
    assert_eq!(words, ["c", "a"]);
    let kept = checker.path_checks()[1];
    // Its record went on: its first failure, and one more in the round
    // the new path started.
    assert_eq!(
        (kept.state, kept.failed_probes),
        (ProbeState::Down, 2),
        "kept"
    );
    assert_eq!(c.script().sent.len(), 1, "c probed at once");
    assert_eq!(checker.path_checks()[0].state, ProbeState::Up);
    assert!(checker.probing(), "b's stalled probe is still held");
    b.script().hangs = false;
    checker.poll(TIMEOUT + 2);
    assert!(!checker.probing(), "b's probe came back and was let go");

    // a heals: reinstated on the new map, by its word's new index.
    a.script().outcome = PathOutcome::Ok;
    checker.poll(INTERVAL + TIMEOUT + 1);
    assert_eq!(
        slot.map().status().groups[0].paths[1].state,
        PathState::Active
    );
    assert_eq!(checker.path_checks()[1].reinstated, 1);
}
