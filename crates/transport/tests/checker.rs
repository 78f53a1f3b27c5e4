//! The path checker over this crate's transports: memory ports (and one
//! file path) carry its probes, so paths that fail and heal are failed and
//! reinstated, a path that stays down stays failed, and I/O uses a
//! reinstated path again; the checker follows a `Transports::reload`; the
//! `CheckerPool` runs every map's checker on one thread. Driven by a test
//! clock, so every step is deterministic, except the pool's tests, which
//! run on the real clock, bounded by event waits. The checker's decisions
//! (timeouts, stalls, failback, marginal paths, logs) are tested over
//! scripted probe paths in `crates/core/tests/checker*.rs`.

mod file_common;

use mpio_core::checker::{CheckerOptions, ProbeState};
use mpio_core::failback::Failback;
use mpio_core::io::{Buffer, Io, PathError, PathOutcome};
use mpio_core::map::MapOptions;
use mpio_core::status::PathState;
use mpio_core::table::Table;
use mpio_test_support::wait_until;
use mpio_transport::probe::{CheckerPool, SlotChecker};
use mpio_transport::PortControl;
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
    device.map.status().paths().nth(path).unwrap().state
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
    wait_until("the first round", || {
        checker
            .path_checks()
            .iter()
            .all(|(_, check)| check.state == ProbeState::Up)
    });
    port(&transports, "a").fail(PathOutcome::Path(PathError::Transport));
    wait_until("path a failed", || state(&device, 0) == PathState::Failed);
    assert_eq!(current_group(&device), Some(2));
    port(&transports, "a").heal();
    wait_until("path a reinstated and failed back", || {
        state(&device, 0) == PathState::Active && current_group(&device) == Some(1)
    });
    wait_until("the record published", || {
        checker.path_checks()[0] == ("memory:disk#a".to_string(), checker.path_checks()[0].1)
            && checker.path_checks()[0].1.reinstated == 1
    });
    checker.stop();
}

/// The words of a pooled checker's paths, as last recorded.
fn recorded_words(checker: &mpio_transport::probe::PooledChecker) -> Vec<String> {
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
    wait_until("three rounds of every map", || {
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
    let checker = pool.add(SlotChecker::on_slot(Arc::clone(&slot), hourly));
    wait_until("the first round", || recorded_words(&checker).len() == 2);
    transports.reload(&slot, &table(&[&["c", "a"]])).unwrap();
    checker.wake();
    wait_until("the reload followed", || {
        recorded_words(&checker) == ["memory:disk#c", "memory:disk#a"]
    });
    assert!(Arc::strong_count(&slot) > 1, "the checker holds the slot");
    checker.stop();
    assert_eq!(Arc::strong_count(&slot), 1, "the stopped checker is gone");

    let (_, _, first) = &maps[0];
    let probes = first.path_checks()[0].1.probes;
    wait_until("rounds go on after a stop", || {
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
    let round = |checker: &mut SlotChecker, now_ns: u64| {
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

#[test]
fn the_checker_follows_a_reload() {
    let transports = Transports::new();
    let slot = build(&transports, &[&["a", "b"]]).into_slot();
    let mut checker = SlotChecker::on_slot(Arc::clone(&slot), options(Failback::Manual));
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
