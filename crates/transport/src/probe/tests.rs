//! The checker over a file path that hangs in the kernel (a pipe nobody
//! writes): a timed-out probe the transport cannot take back stalls the
//! path, and no new probe starts until it comes back.

use super::*;
use crate::file::{pipe, FilePath};
use mpio_core::checker::ProbeState;
use mpio_core::failback::Failback;
use mpio_core::io::{PathError, PathOutcome, BUFFER_ALIGN};
use mpio_core::map::{Map, MapOptions, PathInfo};
use mpio_core::status::PathState;
use mpio_core::table::Table;
use mpio_test_support::HANG_BOUND;
use std::io::Write;
use std::time::{Duration, Instant};

const INTERVAL: u64 = 1_000_000_000;
const TIMEOUT: u64 = 100_000_000;

/// Polls `checker` at fake time `now_ns` until `condition`, bounded on
/// the real clock (the kernel completes the read asynchronously).
fn poll_until(
    checker: &mut SlotChecker,
    now_ns: u64,
    mut condition: impl FnMut(&SlotChecker) -> bool,
) {
    // A bound only a hang reaches (the probes answer at once).
    let deadline = Instant::now() + HANG_BOUND;
    while !condition(checker) {
        checker.poll(now_ns);
        assert!(
            Instant::now() < deadline,
            "not within {HANG_BOUND:?}: {:?}",
            checker.path_checks()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_probe_the_kernel_keeps_stalls_the_path_until_it_returns() {
    let (read_end, mut write_end) = pipe();
    let table = Table::parse("0 2048 multipath 0 0 1 1 round-robin 0 1 0 hung").unwrap();
    let map = Map::new(&table, &[PathInfo::default()], MapOptions::default()).unwrap();
    let device = Device {
        map: Arc::new(map),
        paths: vec![PathHandle::File(Arc::new(FilePath::over(
            read_end,
            1 << 20,
        )))],
    };
    let mut checker = device.checker(CheckerOptions {
        interval_ns: INTERVAL,
        probe_timeout_ns: TIMEOUT,
        failback: Failback::Manual,
        fail_active_paths: true,
        marginal: None,
    });
    checker.poll(0);
    assert!(checker.probing());
    checker.poll(TIMEOUT);
    let check = checker.path_checks()[0];
    assert_eq!(check.state, ProbeState::Down);
    assert_eq!(
        check.last_outcome,
        Some(PathOutcome::Path(PathError::Timeout))
    );
    assert!(check.stalled, "the kernel still holds the probe");
    assert_eq!(
        device.map.status().groups[0].paths[0].state,
        PathState::Failed
    );

    // Rounds come and go: no new probe while the old one is out. Nobody
    // writes the pipe meanwhile, so a poll that waited on the hung path
    // would never return: the rounds run on a thread, and only that
    // hang reaches the bound.
    let (done, rounds) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for round in 1..4 {
            checker.poll(round * INTERVAL);
            checker.poll(round * INTERVAL + TIMEOUT);
            let check = checker.path_checks()[0];
            assert_eq!(check.probes, 1, "round {round}: no second probe");
            assert!(check.stalled && !check.probing);
        }
        let _ = done.send(checker);
    });
    let mut checker = rounds
        .recv_timeout(HANG_BOUND)
        .expect("the rounds end (a poll that waits on the hung path never does)");

    // The storage answers the old probe (and the next one): the stall
    // ends, and the next round probes afresh and reinstates the path.
    write_end.write_all(&vec![7; 2 * BUFFER_ALIGN]).unwrap();
    let now_ns = 4 * INTERVAL + TIMEOUT;
    poll_until(&mut checker, now_ns, |checker| {
        !checker.path_checks()[0].stalled
    });
    assert_eq!(
        checker.path_checks()[0].probes,
        1,
        "a late probe is no verdict"
    );
    // The round after the one the stall ended in.
    poll_until(&mut checker, 6 * INTERVAL, |checker| {
        checker.path_checks()[0].state == ProbeState::Up
    });
    assert_eq!(checker.path_checks()[0].probes, 2);
    assert_eq!(
        device.map.status().groups[0].paths[0].state,
        PathState::Active
    );
}

/// A reload removes a path whose timed-out probe the kernel still holds:
/// the probe is not dropped with the path but kept, polled until it comes
/// back, and only then let go.
#[test]
fn a_removed_path_s_stalled_probe_is_kept_until_it_returns() {
    let (read_end, mut write_end) = pipe();
    let table = Table::parse("0 2048 multipath 0 0 1 1 round-robin 0 1 0 hung").unwrap();
    let map = Map::new(&table, &[PathInfo::default()], MapOptions::default()).unwrap();
    let hung = PathHandle::File(Arc::new(FilePath::over(read_end, 1 << 20)));
    let slot = Arc::new(DeviceSlot::new(Arc::new(map), Arc::new(vec![hung])));
    let options = CheckerOptions {
        interval_ns: INTERVAL,
        probe_timeout_ns: TIMEOUT,
        ..CheckerOptions::default()
    };
    let mut checker = SlotChecker::on_slot(Arc::clone(&slot), options);
    checker.poll(0);
    checker.poll(TIMEOUT);
    assert!(checker.path_checks()[0].stalled);

    let table = Table::parse("0 2048 multipath 0 0 1 1 round-robin 0 1 0 spare").unwrap();
    let map = Map::new(&table, &[PathInfo::default()], MapOptions::default()).unwrap();
    let spare = PathHandle::Null { latency_ns: 0 };
    slot.install(Arc::new(map), Arc::new(vec![spare]));
    checker.poll(INTERVAL);
    assert_eq!(checker.named_path_checks()[0].0, "spare");
    assert_eq!(checker.path_checks()[0].state, ProbeState::Up);
    assert!(checker.probing(), "the removed path's probe is still held");
    write_end.write_all(&vec![7; BUFFER_ALIGN]).unwrap();
    poll_until(&mut checker, INTERVAL, |checker| !checker.probing());
}
