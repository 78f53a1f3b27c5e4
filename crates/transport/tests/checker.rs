//! The path checker over memory ports (and one file path): paths that fail
//! and heal are failed and reinstated by its probes, a path that stays
//! down stays failed, a hung probe times out, and each failback policy
//! switches groups back as multipathd would; flapping paths are held out
//! as marginal; the checker follows reloads and logs what it does. Driven
//! by a test clock, so every step is deterministic; one test runs the
//! checker thread on the real clock, bounded by event waits.

#[path = "../../core/tests/support/capture.rs"]
mod capture;
mod file_common;

use mpio_core::failback::Failback;
use mpio_core::io::{Buffer, Io, PathError, PathOutcome};
use mpio_core::map::MapOptions;
use mpio_core::marginal::MarginalPolicy;
use mpio_core::message::Message;
use mpio_core::status::PathState;
use mpio_core::table::Table;
use mpio_transport::checker::{Checker, CheckerOptions, CheckerPool, ProbeState};
use mpio_transport::memory::PortControl;
use mpio_transport::{Device, Transports};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SECOND: u64 = 1_000_000_000;
const INTERVAL: u64 = SECOND;
const TIMEOUT: u64 = SECOND / 2;

/// A map over memory disk `disk`, one round-robin group per entry.
fn build(transports: &Transports, groups: &[&[&str]]) -> Device {
    transports
        .build(&table(groups), MapOptions::default())
        .unwrap()
}

/// The table of [`build`].
fn table(groups: &[&[&str]]) -> Table {
    let mut text = format!("0 2048 multipath 0 0 {} 1", groups.len());
    for ports in groups {
        text.push_str(&format!(" round-robin 0 {} 0", ports.len()));
        for port in *ports {
            text.push_str(&format!(" memory:disk#{port}"));
        }
    }
    Table::parse(&text).unwrap()
}

fn options(failback: Failback) -> CheckerOptions {
    CheckerOptions {
        interval_ns: INTERVAL,
        probe_timeout_ns: TIMEOUT,
        failback,
        fail_active_paths: true,
        marginal: None,
    }
}

fn state(device: &Device, path: usize) -> PathState {
    let status = device.map.status();
    status
        .groups
        .iter()
        .flat_map(|group| &group.paths)
        .nth(path)
        .unwrap()
        .state
}

fn current_group(device: &Device) -> Option<usize> {
    device.map.status().current_group
}

fn port(transports: &Transports, name: &str) -> Arc<PortControl> {
    transports.port("disk", name)
}

#[test]
fn a_failing_path_is_failed_kept_failed_and_reinstated_when_it_heals() {
    let transports = Transports::new();
    let device = build(&transports, &[&["a", "b"]]);
    let mut checker = device.checker(options(Failback::Manual));
    assert_eq!(checker.path_checks()[0].state, ProbeState::Pending);
    port(&transports, "a").fail(PathOutcome::Path(PathError::Transport));

    assert_eq!(checker.poll(0), INTERVAL, "next round after one interval");
    assert_eq!(state(&device, 0), PathState::Failed, "failed by its probe");
    assert_eq!(state(&device, 1), PathState::Active);
    let check = checker.path_checks()[0];
    assert_eq!(check.state, ProbeState::Down);
    assert_eq!(
        check.last_outcome,
        Some(PathOutcome::Path(PathError::Transport))
    );
    assert_eq!(checker.path_checks()[1].state, ProbeState::Up);

    // Still failing: stays failed, round after round.
    for round in 1..4 {
        checker.poll(round * INTERVAL);
        assert_eq!(state(&device, 0), PathState::Failed);
    }
    assert_eq!(checker.path_checks()[0].failed_probes, 4);
    assert_eq!(checker.path_checks()[0].reinstated, 0);

    port(&transports, "a").heal();
    checker.poll(4 * INTERVAL - 1);
    assert_eq!(
        state(&device, 0),
        PathState::Failed,
        "nothing between rounds"
    );
    checker.poll(4 * INTERVAL);
    assert_eq!(
        state(&device, 0),
        PathState::Active,
        "reinstated by its probe"
    );
    let check = checker.path_checks()[0];
    assert_eq!((check.state, check.reinstated), (ProbeState::Up, 1));
    assert_eq!(check.last_probe_ns, Some(4 * INTERVAL));

    // I/O uses the path again.
    let mut queue = device.queue(8, 0);
    for user_data in 0..8 {
        let io = Io::read(user_data, 0, Buffer::zeroed(512));
        queue.submit(io, 5 * INTERVAL).unwrap();
    }
    let mut done = 0;
    queue.poll(5 * INTERVAL, &mut |completion| {
        assert_eq!(completion.result, Ok(()));
        done += 1;
    });
    assert_eq!(done, 8);
    assert!(queue.path_loads()[0].dispatched() > 0);
}

#[test]
fn a_hung_probe_times_out_and_fails_the_path() {
    let transports = Transports::new();
    let device = build(&transports, &[&["a", "b"]]);
    let mut checker = device.checker(options(Failback::Manual));
    port(&transports, "a").hang();
    assert_eq!(checker.poll(0), TIMEOUT, "woken at the probe's timeout");
    assert!(checker.probing());
    assert_eq!(state(&device, 0), PathState::Active);
    checker.poll(TIMEOUT - 1);
    assert_eq!(
        state(&device, 0),
        PathState::Active,
        "not before its timeout"
    );
    checker.poll(TIMEOUT);
    assert!(!checker.probing());
    assert_eq!(state(&device, 0), PathState::Failed);
    assert_eq!(
        checker.path_checks()[0].last_outcome,
        Some(PathOutcome::Path(PathError::Timeout))
    );
    port(&transports, "a").heal();
    checker.poll(INTERVAL);
    assert_eq!(state(&device, 0), PathState::Active);
}

/// Fails group 1's only path through the checker, so the map fails over
/// to group 2, then heals it and runs the round that reinstates it.
/// Returns the time of that round.
fn fail_over_and_heal(transports: &Transports, device: &Device, checker: &mut Checker) -> u64 {
    assert_eq!(current_group(device), Some(1));
    port(transports, "a").fail(PathOutcome::Path(PathError::ConnectionLost));
    checker.poll(0);
    assert_eq!(state(device, 0), PathState::Failed);
    assert_eq!(current_group(device), Some(2), "failed over");
    port(transports, "a").heal();
    checker.poll(INTERVAL);
    assert_eq!(state(device, 0), PathState::Active, "reinstated");
    INTERVAL
}

#[test]
fn immediate_failback_switches_back_in_the_round_the_group_returns() {
    let transports = Transports::new();
    let device = build(&transports, &[&["a"], &["b"]]);
    let mut checker = device.checker(options(Failback::Immediate));
    let now = fail_over_and_heal(&transports, &device, &mut checker);
    assert_eq!(current_group(&device), Some(1));
    assert_eq!(checker.failbacks(), 1);
    // An admin's switch to group 2 is undone at the next round.
    device.map.message(&Message::SwitchGroup(2)).unwrap();
    assert_eq!(current_group(&device), Some(2));
    checker.poll(now + INTERVAL);
    assert_eq!(current_group(&device), Some(1));
}

#[test]
fn manual_failback_leaves_the_map_on_the_group_it_failed_over_to() {
    let transports = Transports::new();
    let device = build(&transports, &[&["a"], &["b"]]);
    let mut checker = device.checker(options(Failback::Manual));
    let now = fail_over_and_heal(&transports, &device, &mut checker);
    for round in 1..5 {
        checker.poll(now + round * INTERVAL);
        assert_eq!(current_group(&device), Some(2));
    }
    assert_eq!(checker.failbacks(), 0);
    device.map.message(&Message::SwitchGroup(1)).unwrap();
    assert_eq!(current_group(&device), Some(1), "the admin fails back");
}

#[test]
fn followover_fails_back_when_the_group_returns_but_follows_a_requested_switch() {
    let transports = Transports::new();
    let device = build(&transports, &[&["a"], &["b"]]);
    let mut checker = device.checker(options(Failback::Followover));
    let now = fail_over_and_heal(&transports, &device, &mut checker);
    assert_eq!(
        current_group(&device),
        Some(1),
        "group 1 came back from down"
    );
    // Someone else moves I/O to group 2 while group 1 is healthy: followed.
    device.map.message(&Message::SwitchGroup(2)).unwrap();
    for round in 1..4 {
        checker.poll(now + round * INTERVAL);
        assert_eq!(current_group(&device), Some(2));
    }
    assert_eq!(checker.failbacks(), 1);
}

#[test]
fn deferred_failback_waits_its_seconds_from_the_return() {
    let transports = Transports::new();
    let device = build(&transports, &[&["a"], &["b"]]);
    let mut checker = device.checker(options(Failback::Deferred { seconds: 10 }));
    let now = fail_over_and_heal(&transports, &device, &mut checker);
    assert_eq!(current_group(&device), Some(2), "not yet");
    let due = now + 10 * SECOND;
    assert_eq!(checker.failback().deadline_ns(), Some(due));
    let mut at = now;
    while at + INTERVAL < due {
        at += INTERVAL;
        assert!(
            checker.poll(at) <= due,
            "woken by the deadline at the latest"
        );
        assert_eq!(current_group(&device), Some(2));
    }
    checker.poll(due - 1);
    assert_eq!(current_group(&device), Some(2));
    checker.poll(due);
    assert_eq!(current_group(&device), Some(1), "failed back after 10 s");
    assert_eq!(checker.failback().deadline_ns(), None);
}

#[test]
fn deferred_failback_restarts_when_the_group_flaps() {
    let transports = Transports::new();
    let device = build(&transports, &[&["a"], &["b"]]);
    let mut checker = device.checker(options(Failback::Deferred { seconds: 5 }));
    let now = fail_over_and_heal(&transports, &device, &mut checker);
    // Down again at the next round, back at the one after.
    port(&transports, "a").fail(PathOutcome::Path(PathError::Transport));
    checker.poll(now + INTERVAL);
    assert_eq!(
        checker.failback().deadline_ns(),
        None,
        "nothing to fail back to"
    );
    port(&transports, "a").heal();
    checker.poll(now + 2 * INTERVAL);
    let due = now + 2 * INTERVAL + 5 * SECOND;
    assert_eq!(
        checker.failback().deadline_ns(),
        Some(due),
        "counted from the last return"
    );
    checker.poll(due);
    assert_eq!(current_group(&device), Some(1));
}

/// Waits (bounded) until `condition` holds.
fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn the_checker_pool_fails_and_reinstates_on_the_real_clock() {
    let transports = Transports::new();
    let device = build(&transports, &[&["a"], &["b"]]);
    let options = CheckerOptions {
        interval_ns: 10_000_000,
        probe_timeout_ns: 5 * SECOND,
        failback: Failback::Immediate,
        fail_active_paths: true,
        marginal: None,
    };
    let pool = CheckerPool::start(
        Arc::new(mpio_transport::clock::now_ns),
        Duration::from_millis(1),
    )
    .unwrap();
    let checker = pool.add(device.checker(options));
    wait_for("the first round", || {
        checker
            .path_checks()
            .iter()
            .all(|(_, check)| check.state == ProbeState::Up)
    });
    port(&transports, "a").fail(PathOutcome::Path(PathError::Transport));
    wait_for("path a failed", || state(&device, 0) == PathState::Failed);
    assert_eq!(current_group(&device), Some(2));
    port(&transports, "a").heal();
    wait_for("path a reinstated and failed back", || {
        state(&device, 0) == PathState::Active && current_group(&device) == Some(1)
    });
    wait_for("the record published", || {
        checker.path_checks()[0] == ("memory:disk#a".to_string(), checker.path_checks()[0].1)
            && checker.path_checks()[0].1.reinstated == 1
    });
    checker.stop();
}

/// The words of a pooled checker's paths, as last recorded.
fn recorded_words(checker: &mpio_transport::checker::PooledChecker) -> Vec<String> {
    checker
        .path_checks()
        .into_iter()
        .map(|(word, _)| word)
        .collect()
}

/// Two hundred maps' checkers on the pool's one thread: each makes its
/// rounds; a wake makes one follow its reload at once, not at its next
/// round an hour away; a checker stopped is dropped (its slot let go)
/// and the others go on.
#[test]
fn one_pool_thread_runs_every_map_s_checker() {
    let pool = CheckerPool::start(
        Arc::new(mpio_transport::clock::now_ns),
        Duration::from_millis(1),
    )
    .unwrap();
    let often = CheckerOptions {
        interval_ns: 5_000_000,
        ..options(Failback::Manual)
    };
    let maps: Vec<_> = (0..200)
        .map(|map| {
            let transports = Transports::new();
            let word = format!("m{map}");
            let device = build(&transports, &[&[word.as_str()]]);
            let checker = pool.add(device.checker(often));
            (transports, device, checker)
        })
        .collect();
    wait_for("three rounds of every map", || {
        maps.iter().all(|(_, _, checker)| {
            checker
                .path_checks()
                .first()
                .is_some_and(|(_, check)| check.probes >= 3)
        })
    });

    let transports = Transports::new();
    let slot = build(&transports, &[&["a", "b"]]).into_slot();
    let hourly = CheckerOptions {
        interval_ns: 3600 * SECOND,
        ..options(Failback::Manual)
    };
    let checker = pool.add(Checker::on_slot(Arc::clone(&slot), hourly));
    wait_for("the first round", || recorded_words(&checker).len() == 2);
    transports.reload(&slot, &table(&[&["c", "a"]])).unwrap();
    checker.wake();
    wait_for("the reload followed", || {
        recorded_words(&checker) == ["memory:disk#c", "memory:disk#a"]
    });
    assert!(Arc::strong_count(&slot) > 1, "the checker holds the slot");
    checker.stop();
    assert_eq!(Arc::strong_count(&slot), 1, "the stopped checker is gone");

    let (_, _, first) = &maps[0];
    let probes = first.path_checks()[0].1.probes;
    wait_for("rounds go on after a stop", || {
        first.path_checks()[0].1.probes > probes
    });
}

#[test]
fn a_file_path_is_probed_through_io_uring() {
    use file_common::*;
    let dir = direct_dir();
    let file = pattern_file(dir.path(), "lun", 1 << 20);
    let word = format!("file:{}", file.display());
    let device = Transports::new()
        .build(
            &table(1 << 20, &[format!("{word}#a"), format!("{word}#b")]),
            MapOptions::default(),
        )
        .unwrap();
    let mut checker = device.checker(options(Failback::Manual));
    // Polls on the test clock until the round's probes ended (the kernel
    // answers in real time).
    let round = |checker: &mut Checker, now_ns: u64| {
        let start = Instant::now();
        checker.poll(now_ns);
        while checker.probing() {
            assert!(start.elapsed() < DEADLINE, "probe did not end");
            std::thread::yield_now();
            checker.poll(now_ns);
        }
    };
    file_of(&device.paths[0]).revoke();
    round(&mut checker, 0);
    assert_eq!(state(&device, 0), PathState::Failed);
    assert_eq!(
        checker.path_checks()[0].last_outcome,
        Some(PathOutcome::Path(PathError::ConnectionLost))
    );
    assert_eq!(state(&device, 1), PathState::Active);
    file_of(&device.paths[0]).restore();
    round(&mut checker, INTERVAL);
    assert_eq!(state(&device, 0), PathState::Active);
    assert_eq!(checker.path_checks()[0].reinstated, 1);
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

/// Path 0 fails its probe at round `round` (the port fails, then heals
/// after the poll).
fn probe_fails(transports: &Transports, checker: &mut Checker, round: u64) {
    port(transports, "a").fail(PathOutcome::Path(PathError::Transport));
    checker.poll(round * INTERVAL);
    port(transports, "a").heal();
}

#[test]
fn a_flapping_path_is_held_out_as_marginal_until_it_stays_healthy() {
    let transports = Transports::new();
    let device = build(&transports, &[&["a", "b"]]);
    let mut checker = device.checker(marginal_options());
    probe_fails(&transports, &mut checker, 0);
    assert_eq!(state(&device, 0), PathState::Failed);
    assert!(!checker.path_checks()[0].marginal, "one failure");
    checker.poll(INTERVAL);
    assert_eq!(state(&device, 0), PathState::Active, "reinstated");
    probe_fails(&transports, &mut checker, 2);
    let check = checker.path_checks()[0];
    assert!(check.marginal, "two failures within 10 s");
    assert_eq!(check.returns_at_ns, None, "no good probe yet");

    checker.poll(3 * INTERVAL);
    assert_eq!(state(&device, 0), PathState::Failed, "held out");
    assert_eq!(checker.path_checks()[0].state, ProbeState::Up);
    assert_eq!(checker.path_checks()[0].returns_at_ns, Some(8 * INTERVAL));
    checker.poll(4 * INTERVAL);
    // A failed probe restarts the wait.
    probe_fails(&transports, &mut checker, 5);
    assert_eq!(checker.path_checks()[0].returns_at_ns, None);
    for round in 6..11 {
        checker.poll(round * INTERVAL);
        assert_eq!(state(&device, 0), PathState::Failed, "round {round}");
    }
    assert_eq!(checker.path_checks()[0].returns_at_ns, Some(11 * INTERVAL));
    checker.poll(11 * INTERVAL);
    assert_eq!(state(&device, 0), PathState::Active, "recovered");
    let check = checker.path_checks()[0];
    assert!(!check.marginal);
    assert_eq!(check.reinstated, 2);
    // Its history starts afresh: one failure is not enough.
    probe_fails(&transports, &mut checker, 12);
    assert!(!checker.path_checks()[0].marginal);
    checker.poll(13 * INTERVAL);
    assert_eq!(state(&device, 0), PathState::Active);
}

#[test]
fn io_failures_count_and_fail_path_messages_do_not() {
    let transports = Transports::new();
    let device = build(&transports, &[&["a", "b"]]);
    let mut checker = device.checker(marginal_options());
    // An admin takes the path out again and again: not marginal.
    for round in 0..4 {
        device
            .map
            .message(&Message::FailPath("memory:disk#a".into()))
            .unwrap();
        checker.poll(round * INTERVAL);
        assert_eq!(state(&device, 0), PathState::Active, "round {round}");
        assert!(!checker.path_checks()[0].marginal);
    }
    // I/O fails it twice (read from the map's counts at the next poll).
    device.map.fail_path(0, PathError::ConnectionLost);
    checker.poll(4 * INTERVAL);
    assert_eq!(state(&device, 0), PathState::Active);
    device.map.fail_path(0, PathError::Timeout);
    checker.poll(5 * INTERVAL);
    assert!(checker.path_checks()[0].marginal);
    assert_eq!(state(&device, 0), PathState::Failed, "held out");
}

#[test]
fn an_admin_reinstate_ends_marginal() {
    let transports = Transports::new();
    let device = build(&transports, &[&["a", "b"]]);
    let mut checker = device.checker(marginal_options());
    probe_fails(&transports, &mut checker, 0);
    checker.poll(INTERVAL);
    probe_fails(&transports, &mut checker, 2);
    assert!(checker.path_checks()[0].marginal);
    let capture = capture::Capture::default();
    capture.during(|| {
        device
            .map
            .message(&Message::ReinstatePath("memory:disk#a".into()))
            .unwrap();
        checker.poll(3 * INTERVAL);
    });
    assert!(!checker.path_checks()[0].marginal);
    assert_eq!(state(&device, 0), PathState::Active);
    let events = capture.take();
    assert!(
        events
            .iter()
            .any(|event| event.message == "path recovered" && event.field("cause") == "message"),
        "{events:?}"
    );
    // A new failure is the first of a fresh history.
    probe_fails(&transports, &mut checker, 4);
    assert!(!checker.path_checks()[0].marginal);
}

#[test]
fn the_checker_logs_probe_failures_marginal_paths_and_recoveries() {
    let transports = Transports::new();
    let device = build(&transports, &[&["a"], &["b"]]);
    let options = CheckerOptions {
        failback: Failback::Immediate,
        ..marginal_options()
    };
    let mut checker = device.checker(options);
    let capture = capture::Capture::default();
    capture.during(|| {
        probe_fails(&transports, &mut checker, 0);
        checker.poll(INTERVAL);
        port(&transports, "a").fail(PathOutcome::Path(PathError::Transport));
        checker.poll(2 * INTERVAL);
        checker.poll(3 * INTERVAL); // still failing: no second "probe failed"
        port(&transports, "a").heal();
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
    assert_eq!(current_group(&device), Some(1));
}

#[test]
fn the_checker_follows_a_reload() {
    let transports = Transports::new();
    let slot = build(&transports, &[&["a", "b"]]).into_slot();
    let mut checker = Checker::on_slot(Arc::clone(&slot), options(Failback::Manual));
    port(&transports, "a").fail(PathOutcome::Path(PathError::Transport));
    checker.poll(0);
    assert_eq!(
        slot.map().status().groups[0].paths[0].state,
        PathState::Failed
    );
    // b's probe is in flight (hung) when the reload removes it.
    port(&transports, "b").hang();
    checker.poll(INTERVAL);
    assert!(checker.path_checks()[1].probing);
    transports.reload(&slot, &table(&[&["c", "a"]])).unwrap();
    port(&transports, "b").heal();
    checker.poll(INTERVAL + 1);
    let words: Vec<String> = checker
        .named_path_checks()
        .into_iter()
        .map(|(word, _)| word)
        .collect();
    assert_eq!(words, ["memory:disk#c", "memory:disk#a"]);
    let a = checker.path_checks()[1];
    assert_eq!((a.state, a.failed_probes), (ProbeState::Down, 2), "kept");
    assert_eq!(checker.path_checks()[0].state, ProbeState::Pending, "fresh");
    assert!(!checker.probing(), "b's probe was dropped with b");
    // The next round probes c, and a still fails on the new map.
    checker.poll(2 * INTERVAL);
    let status = slot.map().status();
    assert_eq!(status.groups[0].paths[0].state, PathState::Active);
    assert_eq!(status.groups[0].paths[1].state, PathState::Failed);
    assert_eq!(checker.path_checks()[0].state, ProbeState::Up);
    port(&transports, "a").heal();
    checker.poll(3 * INTERVAL);
    let status = slot.map().status();
    assert_eq!(
        status.groups[0].paths[1].state,
        PathState::Active,
        "reinstated on the new map"
    );
    assert_eq!(checker.path_checks()[1].reinstated, 1);
}
