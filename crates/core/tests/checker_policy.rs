//! The checker's policies over scripted probe paths, on a test clock:
//! each failback policy switches groups back as multipathd would; flapping
//! paths are held out as marginal (I/O failures count, `fail_path`
//! messages do not, a `reinstate_path` message ends it); and what the
//! checker and the map log along the way.
#![cfg(not(loom))]

mod support {
    pub mod capture;
    pub mod scripted_path;
}

use mpio_core::checker::{Checker, CheckerOptions, ProbeState};
use mpio_core::failback::Failback;
use mpio_core::io::PathError;
use mpio_core::map::Map;
use mpio_core::marginal::MarginalPolicy;
use mpio_core::message::Message;
use mpio_core::status::PathState;
use mpio_core::MapSlot;
use std::sync::Arc;
use support::capture::Capture;
use support::scripted_path::{groups_map, ScriptedPath};

const SECOND: u64 = 1_000_000_000;
const INTERVAL: u64 = SECOND;
const TIMEOUT: u64 = SECOND / 2;

type ScriptedChecker = Checker<Arc<MapSlot<Vec<ScriptedPath>>>>;

fn options(failback: Failback) -> CheckerOptions {
    CheckerOptions {
        interval_ns: INTERVAL,
        probe_timeout_ns: TIMEOUT,
        failback,
        fail_active_paths: true,
        marginal: None,
    }
}

/// A map of one group per entry of `groups`, its paths scripted in
/// table order, and a checker over them.
fn setup(
    groups: &[&[&str]],
    options: CheckerOptions,
) -> (Arc<Map>, Vec<ScriptedPath>, ScriptedChecker) {
    let map = groups_map(groups, 2048);
    let paths: Vec<ScriptedPath> = (0..map.paths().len())
        .map(|_| ScriptedPath::new())
        .collect();
    let checker = Checker::new(Arc::clone(&map), paths.clone(), options);
    (map, paths, checker)
}

fn state(map: &Map, path: usize) -> PathState {
    map.status().paths().nth(path).unwrap().state
}

fn current_group(map: &Map) -> Option<usize> {
    map.status().current_group
}

/// Fails group 1's only path through the checker, so the map fails over
/// to group 2, then heals it and runs the round that reinstates it.
/// Returns the time of that round.
fn fail_over_and_heal(map: &Map, a: &ScriptedPath, checker: &mut ScriptedChecker) -> u64 {
    assert_eq!(current_group(map), Some(1));
    a.fail();
    checker.poll(0);
    assert_eq!(state(map, 0), PathState::Failed);
    assert_eq!(current_group(map), Some(2), "failed over");
    a.heal();
    checker.poll(INTERVAL);
    assert_eq!(state(map, 0), PathState::Active, "reinstated");
    INTERVAL
}

#[test]
fn immediate_failback_switches_back_in_the_round_the_group_returns() {
    let (map, paths, mut checker) = setup(&[&["a"], &["b"]], options(Failback::Immediate));
    let now = fail_over_and_heal(&map, &paths[0], &mut checker);
    assert_eq!(current_group(&map), Some(1));
    assert_eq!(checker.failbacks(), 1);
    // An admin's switch to group 2 is undone at the next round.
    map.message(&Message::SwitchGroup(2)).unwrap();
    assert_eq!(current_group(&map), Some(2));
    checker.poll(now + INTERVAL);
    assert_eq!(current_group(&map), Some(1));
}

#[test]
fn manual_failback_leaves_the_map_on_the_group_it_failed_over_to() {
    let (map, paths, mut checker) = setup(&[&["a"], &["b"]], options(Failback::Manual));
    let now = fail_over_and_heal(&map, &paths[0], &mut checker);
    for round in 1..5 {
        checker.poll(now + round * INTERVAL);
        assert_eq!(current_group(&map), Some(2));
    }
    assert_eq!(checker.failbacks(), 0);
    map.message(&Message::SwitchGroup(1)).unwrap();
    assert_eq!(current_group(&map), Some(1), "the admin fails back");
}

#[test]
fn followover_fails_back_when_the_group_returns_but_follows_a_requested_switch() {
    let (map, paths, mut checker) = setup(&[&["a"], &["b"]], options(Failback::Followover));
    let now = fail_over_and_heal(&map, &paths[0], &mut checker);
    assert_eq!(current_group(&map), Some(1), "group 1 came back from down");
    // Someone else moves I/O to group 2 while group 1 is healthy: followed.
    map.message(&Message::SwitchGroup(2)).unwrap();
    for round in 1..4 {
        checker.poll(now + round * INTERVAL);
        assert_eq!(current_group(&map), Some(2));
    }
    assert_eq!(checker.failbacks(), 1);
}

#[test]
fn deferred_failback_waits_its_seconds_from_the_return() {
    let options = options(Failback::Deferred { seconds: 10 });
    let (map, paths, mut checker) = setup(&[&["a"], &["b"]], options);
    let now = fail_over_and_heal(&map, &paths[0], &mut checker);
    assert_eq!(current_group(&map), Some(2), "not yet");
    let due = now + 10 * SECOND;
    assert_eq!(checker.failback().deadline_ns(), Some(due));
    let mut at = now;
    while at + INTERVAL < due {
        at += INTERVAL;
        assert!(
            checker.poll(at) <= due,
            "woken by the deadline at the latest"
        );
        assert_eq!(current_group(&map), Some(2));
    }
    checker.poll(due - 1);
    assert_eq!(current_group(&map), Some(2));
    checker.poll(due);
    assert_eq!(current_group(&map), Some(1), "failed back after 10 s");
    assert_eq!(checker.failback().deadline_ns(), None);
}

#[test]
fn deferred_failback_restarts_when_the_group_flaps() {
    let options = options(Failback::Deferred { seconds: 5 });
    let (map, paths, mut checker) = setup(&[&["a"], &["b"]], options);
    let now = fail_over_and_heal(&map, &paths[0], &mut checker);
    // Down again at the next round, back at the one after.
    paths[0].fail();
    checker.poll(now + INTERVAL);
    assert_eq!(
        checker.failback().deadline_ns(),
        None,
        "nothing to fail back to"
    );
    paths[0].heal();
    checker.poll(now + 2 * INTERVAL);
    let due = now + 2 * INTERVAL + 5 * SECOND;
    assert_eq!(
        checker.failback().deadline_ns(),
        Some(due),
        "counted from the last return"
    );
    checker.poll(due);
    assert_eq!(current_group(&map), Some(1));
}

/// Two failures within 10 s make a path marginal; it returns after 5 s of
/// good probes.
fn marginal_options() -> CheckerOptions {
    CheckerOptions {
        marginal: Some(MarginalPolicy {
            failures: 2,
            window_ns: 10 * SECOND,
            recovery_ns: 5 * SECOND,
        }),
        ..options(Failback::Manual)
    }
}

/// `path` fails its probe at round `round` (it fails, then heals after
/// the poll).
fn probe_fails(path: &ScriptedPath, checker: &mut ScriptedChecker, round: u64) {
    path.fail();
    checker.poll(round * INTERVAL);
    path.heal();
}

#[test]
fn a_flapping_path_is_held_out_as_marginal_until_it_stays_healthy() {
    let (map, paths, mut checker) = setup(&[&["a", "b"]], marginal_options());
    let a = &paths[0];
    probe_fails(a, &mut checker, 0);
    assert_eq!(state(&map, 0), PathState::Failed);
    assert!(!checker.path_checks()[0].marginal, "one failure");
    checker.poll(INTERVAL);
    assert_eq!(state(&map, 0), PathState::Active, "reinstated");
    probe_fails(a, &mut checker, 2);
    let check = checker.path_checks()[0];
    assert!(check.marginal, "two failures within 10 s");
    assert_eq!(check.returns_at_ns, None, "no good probe yet");

    checker.poll(3 * INTERVAL);
    assert_eq!(state(&map, 0), PathState::Failed, "held out");
    assert_eq!(checker.path_checks()[0].state, ProbeState::Up);
    assert_eq!(checker.path_checks()[0].returns_at_ns, Some(8 * INTERVAL));
    checker.poll(4 * INTERVAL);
    // A failed probe restarts the wait.
    probe_fails(a, &mut checker, 5);
    assert_eq!(checker.path_checks()[0].returns_at_ns, None);
    for round in 6..11 {
        checker.poll(round * INTERVAL);
        assert_eq!(state(&map, 0), PathState::Failed, "round {round}");
    }
    assert_eq!(checker.path_checks()[0].returns_at_ns, Some(11 * INTERVAL));
    checker.poll(11 * INTERVAL);
    assert_eq!(state(&map, 0), PathState::Active, "recovered");
    let check = checker.path_checks()[0];
    assert!(!check.marginal);
    assert_eq!(check.reinstated, 2);
    // Its history starts afresh: one failure is not enough.
    probe_fails(a, &mut checker, 12);
    assert!(!checker.path_checks()[0].marginal);
    checker.poll(13 * INTERVAL);
    assert_eq!(state(&map, 0), PathState::Active);
}

#[test]
fn io_failures_count_and_fail_path_messages_do_not() {
    let (map, _paths, mut checker) = setup(&[&["a", "b"]], marginal_options());
    // An admin takes the path out again and again: not marginal.
    for round in 0..4 {
        map.message(&Message::FailPath("a".into())).unwrap();
        checker.poll(round * INTERVAL);
        assert_eq!(state(&map, 0), PathState::Active, "round {round}");
        assert!(!checker.path_checks()[0].marginal);
    }
    // I/O fails it twice (read from the map's counts at the next poll).
    map.fail_path(0, PathError::ConnectionLost);
    checker.poll(4 * INTERVAL);
    assert_eq!(state(&map, 0), PathState::Active);
    map.fail_path(0, PathError::Timeout);
    checker.poll(5 * INTERVAL);
    assert!(checker.path_checks()[0].marginal);
    assert_eq!(state(&map, 0), PathState::Failed, "held out");
}

#[test]
fn an_admin_reinstate_ends_marginal() {
    let (map, paths, mut checker) = setup(&[&["a", "b"]], marginal_options());
    let a = &paths[0];
    probe_fails(a, &mut checker, 0);
    checker.poll(INTERVAL);
    probe_fails(a, &mut checker, 2);
    assert!(checker.path_checks()[0].marginal);
    let capture = Capture::default();
    capture.during(|| {
        map.message(&Message::ReinstatePath("a".into())).unwrap();
        checker.poll(3 * INTERVAL);
    });
    assert!(!checker.path_checks()[0].marginal);
    assert_eq!(state(&map, 0), PathState::Active);
    let events = capture.take();
    assert!(
        events
            .iter()
            .any(|event| event.message == "path recovered" && event.field("cause") == "message"),
        "{events:?}"
    );
    // A new failure is the first of a fresh history.
    probe_fails(a, &mut checker, 4);
    assert!(!checker.path_checks()[0].marginal);
}

#[test]
fn the_checker_logs_probe_failures_marginal_paths_and_recoveries() {
    let options = CheckerOptions {
        failback: Failback::Immediate,
        ..marginal_options()
    };
    let (map, paths, mut checker) = setup(&[&["a"], &["b"]], options);
    let a = &paths[0];
    let capture = Capture::default();
    capture.during(|| {
        probe_fails(a, &mut checker, 0);
        checker.poll(INTERVAL);
        a.fail();
        checker.poll(2 * INTERVAL);
        checker.poll(3 * INTERVAL); // still failing: no second "probe failed"
        a.heal();
        for round in 4..10 {
            checker.poll(round * INTERVAL);
        }
    });
    let lines: Vec<String> = capture
        .take()
        .iter()
        .map(|event| format!("{} {} {}", event.level, event.message, event.field("cause")))
        .collect();
    assert_eq!(
        lines,
        [
            "WARN probe failed ",
            "WARN path failed path error",
            "INFO group switched current group lost its usable paths",
            "INFO path reinstated checker",
            "INFO group switched failback",
            "WARN probe failed ",
            "WARN path failed path error",
            "INFO group switched current group lost its usable paths",
            "WARN path marginal ",
            "INFO path reinstated checker",
            "INFO path recovered probes",
            "INFO group switched failback",
        ]
    );
    assert_eq!(current_group(&map), Some(1));
}
