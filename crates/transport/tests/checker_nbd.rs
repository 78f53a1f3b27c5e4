//! The path checker over NBD paths, on the real clock: a server that
//! accepts and never answers does not hold a checker poll (the probe's
//! connect runs in the background and counts against the probe timeout);
//! a killed server's path is failed, and reinstated once it is back; a
//! path whose reads keep needing hedges becomes marginal.

mod support;

use mpio_core::checker::{CheckerOptions, ProbeState};
use mpio_core::failback::Failback;
use mpio_core::io::{Buffer, Io, PathError, PathOutcome};
use mpio_core::map::MapOptions;
use mpio_core::marginal::MarginalPolicy;
use mpio_core::queue::Queue;
use mpio_core::status::PathState;
use mpio_test_support::{wait_until, HANG_BOUND};
use mpio_transport::probe::SlotChecker;
use mpio_transport::{clock, AnyQueue, Device};
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};
use support::{build, Server, TempDir};

const SECOND: u64 = 1_000_000_000;

fn options(probe_timeout_ns: u64) -> CheckerOptions {
    CheckerOptions {
        interval_ns: SECOND / 10,
        probe_timeout_ns,
        failback: Failback::Manual,
        fail_active_paths: true,
        marginal: None,
    }
}

fn state(device: &Device, path: usize) -> PathState {
    device.map.status().groups[0].paths[path].state
}

/// Polls `checker` on the real clock until `condition` holds, bounded
/// by [`HANG_BOUND`].
fn poll_until(
    checker: &mut SlotChecker,
    what: &str,
    mut condition: impl FnMut(&SlotChecker) -> bool,
) {
    let start = Instant::now();
    wait_until(what, || {
        checker.poll(start.elapsed().as_nanos() as u64);
        condition(checker)
    });
}

#[test]
fn a_hung_nbd_server_does_not_stall_the_checker() {
    let dir = TempDir::new("checker-nbd-hung");
    let socket = dir.join("a.sock");
    let mut server = Server::nbdkit(&socket, &["memory", "1M"]);
    let device = build(1 << 20, &[server.uri()], MapOptions::default());
    // The server hangs: its socket still accepts (the kernel does that),
    // nothing answers.
    server.kill();
    let _listener = UnixListener::bind(&socket).unwrap();
    // The checker runs on a clock of the test's: only the polls say when
    // the probe timed out.
    let mut checker = device.checker(options(SECOND));
    checker.poll(0);
    // A poll that waited on the server would have returned only once the
    // connect gave up, the probe over; it returns with the probe out.
    let check = checker.path_checks()[0];
    assert!(check.probing, "the first poll sends a probe: {check:?}");
    assert_eq!(check.probes, 0, "and does not wait for it: {check:?}");
    checker.poll(SECOND / 2);
    assert!(checker.path_checks()[0].probing, "within its timeout");
    checker.poll(SECOND + 1);
    let check = checker.path_checks()[0];
    assert_eq!(check.probes, 1, "{check:?}");
    assert_eq!(check.state, ProbeState::Down);
    assert_eq!(
        check.last_outcome,
        Some(PathOutcome::Path(PathError::Timeout))
    );
    assert_eq!(state(&device, 0), PathState::Failed);
}

#[test]
fn a_killed_server_fails_its_path_and_is_reinstated_when_back() {
    let dir = TempDir::new("checker-nbd");
    let mut a = Server::nbdkit(&dir.join("a.sock"), &["memory", "1M"]);
    let b = Server::nbdkit(&dir.join("b.sock"), &["memory", "1M"]);
    let device = build(1 << 20, &[a.uri(), b.uri()], MapOptions::default());
    let mut checker = device.checker(options(10 * SECOND));
    poll_until(&mut checker, "both paths up", |checker| {
        checker
            .path_checks()
            .iter()
            .all(|check| check.state == ProbeState::Up)
    });
    a.kill();
    poll_until(&mut checker, "a failed", |_| {
        state(&device, 0) == PathState::Failed
    });
    assert_eq!(state(&device, 1), PathState::Active);
    a.restart();
    poll_until(&mut checker, "a reinstated", |_| {
        state(&device, 0) == PathState::Active
    });
    assert!(checker.path_checks()[0].reinstated >= 1);
}

/// Reads through `queue`, 16 at a time, until `done(queue)` holds; then
/// lets the reads in flight finish. Bounded by [`HANG_BOUND`].
fn read_until(queue: &mut Queue<AnyQueue>, mut done: impl FnMut(&Queue<AnyQueue>) -> bool) {
    let start = Instant::now();
    let mut free: Vec<Buffer> = (0..16).map(|_| Buffer::zeroed(4096)).collect();
    let mut in_flight = 0;
    let mut reading = true;
    while reading || in_flight > 0 {
        reading = reading && !done(queue);
        if reading {
            for buf in free.drain(..) {
                queue.submit(Io::read(0, 0, buf), clock::now_ns()).unwrap();
                in_flight += 1;
            }
        }
        queue.poll(clock::now_ns(), &mut |completion| {
            assert_eq!(completion.result, Ok(()));
            free.push(completion.buf);
            in_flight -= 1;
        });
        assert!(start.elapsed() < HANG_BOUND, "the reads hang");
        std::thread::sleep(Duration::from_micros(100));
    }
}

#[test]
fn a_path_whose_reads_keep_needing_hedges_becomes_marginal() {
    let dir = TempDir::new("checker-nbd-hedges");
    let disk = dir.sparse_file("disk.img", 1 << 20);
    let a = Server::nbdkit_pausable(&dir.join("a.sock"), &disk);
    let b = Server::nbdkit_file(&dir.join("b.sock"), &disk);
    let device = build(1 << 20, &[a.uri(), b.uri()], MapOptions::default());
    let mut queue = device.queue(16, 0);
    let marginal = MarginalPolicy {
        failures: 2,
        window_ns: 600 * SECOND,
        recovery_ns: SECOND,
    };
    // Probes that never time out here: only hedges may count.
    let mut checker = device.checker(CheckerOptions {
        marginal: Some(marginal),
        ..options(600 * SECOND)
    });
    let start = Instant::now();
    let poll = |checker: &mut SlotChecker| checker.poll(start.elapsed().as_nanos() as u64);
    poll(&mut checker);
    let sent = |queue: &Queue<AnyQueue>| queue.path_loads()[0].dispatched();
    read_until(&mut queue, |queue| sent(queue) >= 500);
    poll(&mut checker);
    assert!(!checker.path_checks()[0].marginal, "healthy");
    for stall in 1..=2 {
        let hedged = queue.path_loads()[0].hedged_reads();
        a.pause();
        // Until a read held by the paused path was taken back.
        read_until(&mut queue, |queue| {
            queue.path_loads()[0].hedged_reads() > hedged
        });
        a.resume();
        poll(&mut checker);
        assert_eq!(
            checker.path_checks()[0].marginal,
            stall == 2,
            "after {stall} stall(s)"
        );
    }
    assert_eq!(state(&device, 0), PathState::Active, "hedges fail no path");
    assert!(!checker.path_checks()[1].marginal);
}
