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
    let disk = dir.sparse_file("disk.img", BLOCKS * u64::from(BLOCK));
    let a = Server::nbdkit_pausable(&dir.join("a.sock"), &disk);
    let b = Server::nbdkit_file(&dir.join("b.sock"), &disk);
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

    a.pause();
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

    a.resume();
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
