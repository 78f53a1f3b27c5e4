//! A hung NBD server (`nbdkit --filter=pause`, paused through its control
//! socket) is failed after the map's I/O timeout; its I/O comes back when
//! the client severs the connection and completes on the other path; the
//! path serves again (on a new connection) once resumed and reinstated.

mod support;

use mpio_core::io::{Op, PathError};
use mpio_core::map::MapOptions;
use mpio_core::status::PathState;
use std::time::{Duration, Instant};
use support::{block_writes, device, io, run_ok, Server, TempDir};

const BLOCK: u32 = 4096;
const BLOCKS: u64 = 32;
const TIMEOUT: Duration = Duration::from_secs(2);
const BOUND: Duration = Duration::from_secs(60);

#[test]
fn hung_path_is_failed_within_its_timeout_and_its_io_completes_elsewhere() {
    let dir = TempDir::new("nbd-hang");
    let disk = dir.join("disk.img");
    std::fs::File::create(&disk)
        .unwrap()
        .set_len(BLOCKS * u64::from(BLOCK))
        .unwrap();
    let control = dir.join("a.ctl");
    let file = disk.display().to_string();
    // One thread per connection: nbdkit 1.32 aborts (`raw_send_socket:
    // Assertion 'sock >= 0' failed`) when a worker thread replies to a
    // paused request after another thread saw the client close the
    // connection. With one thread, the reply to the resumed request
    // meets a broken pipe and the server lives on.
    let a = Server::nbdkit(
        &dir.join("a.sock"),
        &[
            "--threads=1",
            "--filter=pause",
            "file",
            &file,
            &format!("pause-control={}", control.display()),
        ],
    );
    let b = Server::nbdkit(&dir.join("b.sock"), &["file", &file]);
    // Reads are not hedged here: this test is about the timeout (hedging
    // has its own, nbd_paused_reads.rs).
    let options = MapOptions {
        io_timeout_ns: Some(TIMEOUT.as_nanos() as u64),
        hedge_reads: false,
        ..MapOptions::default()
    };
    let (device, mut queue) = device(BLOCKS * u64::from(BLOCK), &[a.uri(), b.uri()], options);
    let (writes, reference) = block_writes(BLOCKS, BLOCK, 0);
    run_ok(&mut queue, writes, BOUND);

    support::pause_control(&control, b'p');
    let reads = || {
        (0..BLOCKS)
            .map(|block| io(block, Op::Read, block * u64::from(BLOCK), BLOCK, None))
            .collect()
    };
    let dispatched_before = queue.path_loads()[0].dispatched();
    let start = Instant::now();
    let done = run_ok(&mut queue, reads(), BOUND);
    let elapsed = start.elapsed();
    for completion in &done {
        let block = completion.user_data as usize;
        assert!(completion.buf.as_slice() == reference[block].as_slice());
    }
    assert!(
        queue.path_loads()[0].dispatched() > dispatched_before,
        "round-robin sent reads to the paused path"
    );
    // The reads on the paused path waited for the timeout (so it was
    // really hung), and no longer than the timeout and a scan period or
    // two (generous for a loaded machine).
    assert!(elapsed >= TIMEOUT, "completed in {elapsed:?}: not hung?");
    assert!(elapsed < TIMEOUT * 5, "took {elapsed:?}");
    let status = device.map.status();
    assert_eq!(status.groups[0].paths[0].state, PathState::Failed);
    assert_eq!(
        status.groups[0].paths[0].last_error,
        Some(PathError::Timeout)
    );
    assert_eq!(status.groups[0].paths[1].state, PathState::Active);

    support::pause_control(&control, b'r');
    assert!(device.map.reinstate_path(0));
    let dispatched_before = queue.path_loads()[0].dispatched();
    let done = run_ok(&mut queue, reads(), BOUND);
    for completion in &done {
        let block = completion.user_data as usize;
        assert!(completion.buf.as_slice() == reference[block].as_slice());
    }
    assert!(queue.path_loads()[0].dispatched() > dispatched_before);
    assert_eq!(
        device.map.status().groups[0].paths[0].state,
        PathState::Active,
        "the resumed path serves on a new connection: {:?} {:?}",
        device.map.status().groups[0].paths[0],
        match &queue.path_queues_mut()[0] {
            mpio_transport::AnyQueue::Nbd(path) => path.last_error().map(str::to_string),
            _ => None,
        }
    );
}
