//! The NBD client against real servers: nbdkit's memory, pattern and null
//! plugins (with and without structured replies, over a unix socket and
//! TCP), qemu-nbd as a second implementation, and the errors a user sees
//! when an export does not fit the map or does not exist.

mod support;

use mpio_core::io::{IoError, Op, PathError, TargetError};
use mpio_core::map::MapOptions;
use mpio_core::status::PathState;
use mpio_test_support::poll_outcomes;
use mpio_transport::{AnyQueue, Transports};
use std::time::{Duration, Instant};
use support::{
    block_data, block_writes, device, io, run, run_ok, run_with, verify_through, Server, TempDir,
};

const BLOCK: u32 = 4096;
const SIZE: u64 = 1 << 20;
const BOUND: Duration = Duration::from_secs(60);

fn blocks() -> u64 {
    SIZE / u64::from(BLOCK)
}

fn writes(round: u64) -> (Vec<mpio_core::io::Io>, Vec<Vec<u8>>) {
    block_writes(blocks(), BLOCK, round)
}

fn structured(queue: &mut mpio_core::queue::Queue<AnyQueue>, path: usize) -> bool {
    match &queue.path_queues_mut()[path] {
        AnyQueue::Nbd(nbd) => nbd.export().expect("connected").structured_replies,
        other => panic!("not an nbd path: {other:?}"),
    }
}

/// Writes every block, reads it back through the map, then zeroes,
/// trims and flushes, and checks the zeroes read back.
fn exercise(queue: &mut mpio_core::queue::Queue<AnyQueue>) {
    let (ios, reference) = writes(1);
    run_ok(queue, ios, BOUND);
    let reads = (0..blocks())
        .map(|block| io(block, Op::Read, block * u64::from(BLOCK), BLOCK, None))
        .collect();
    for completion in run_ok(queue, reads, BOUND) {
        let block = completion.user_data as usize;
        assert!(completion.buf.as_slice() == reference[block].as_slice());
    }
    let others = vec![
        io(0, Op::WriteZeroes, 0, 2 * BLOCK, None),
        io(1, Op::Discard, 4 * u64::from(BLOCK), BLOCK, None),
        io(2, Op::Flush, 0, 0, None),
    ];
    run_ok(queue, others, BOUND);
    let read = vec![io(0, Op::Read, 0, 3 * BLOCK, None)];
    let done = run_ok(queue, read, BOUND);
    let bytes = done[0].buf.as_slice();
    assert!(bytes[..2 * BLOCK as usize].iter().all(|byte| *byte == 0));
    assert!(bytes[2 * BLOCK as usize..] == reference[2][..]);
}

#[test]
fn nbdkit_memory_with_and_without_structured_replies() {
    let dir = TempDir::new("nbd-sr");
    for no_sr in [false, true] {
        let mut args = vec!["memory", "size=1M"];
        if no_sr {
            args.insert(0, "--no-sr");
        }
        let server = Server::nbdkit(&dir.join("m.sock"), &args);
        // Two paths, two connections to one server (labelled: a path
        // word is in a table once).
        let words = [format!("{}#a", server.uri()), format!("{}#b", server.uri())];
        let (device, mut queue) = device(SIZE, &words, MapOptions::default());
        exercise(&mut queue);
        // Connected in the background, by now.
        assert_eq!(structured(&mut queue, 0), !no_sr);
        assert_eq!(structured(&mut queue, 1), !no_sr);
        let stats = queue.path_loads();
        assert!(stats[0].dispatched() > 0 && stats[1].dispatched() > 0);
        assert_eq!(stats[0].path_errors() + stats[1].path_errors(), 0);
        drop(device);
    }
}

#[test]
fn nbdkit_over_tcp() {
    let server = Server::nbdkit_tcp(&["memory", "size=1M"]);
    assert!(server.uri().starts_with("nbd://127.0.0.1:"));
    let (_device, mut queue) = device(SIZE, &[server.uri()], MapOptions::default());
    exercise(&mut queue);
}

#[test]
fn qemu_nbd_serves_every_command() {
    let dir = TempDir::new("nbd-qemu");
    let disk = dir.join("disk.img");
    std::fs::File::create(&disk).unwrap().set_len(SIZE).unwrap();
    let server = Server::qemu_nbd(&dir.join("q.sock"), &disk, &[]);
    let (_device, mut queue) = device(SIZE, &[server.uri()], MapOptions::default());
    exercise(&mut queue);
    assert!(structured(&mut queue, 0));
    // What the map wrote is in the file.
    let file = std::fs::read(&disk).unwrap();
    let offset = 8 * BLOCK as usize;
    assert!(file[offset..offset + BLOCK as usize] == block_data(8, 1, BLOCK as usize)[..]);
}

#[test]
fn nbdkit_pattern_reads_back_and_refuses_writes_as_a_target_error() {
    let dir = TempDir::new("nbd-pattern");
    let server = Server::nbdkit(&dir.join("p.sock"), &["pattern", "size=1M"]);
    let (device, mut queue) = device(SIZE, &[server.uri()], MapOptions::default());
    // Odd offsets and lengths, so chunks do not line up with blocks.
    let reads: Vec<_> = (0..16u64)
        .map(|index| {
            io(
                index,
                Op::Read,
                index * 61_440,
                512 * (1 + index as u32),
                None,
            )
        })
        .collect();
    for completion in run_ok(&mut queue, reads, BOUND) {
        let offset = completion.user_data * 61_440;
        for (at, word) in completion.buf.as_slice().chunks(8).enumerate() {
            let expected = (offset + at as u64 * 8).to_be_bytes();
            assert_eq!(word, &expected[..word.len()], "at {offset} + {}", at * 8);
        }
    }
    let data = vec![1u8; BLOCK as usize];
    let write = vec![io(0, Op::Write, 0, BLOCK, Some(&data))];
    let done = run(&mut queue, write, BOUND);
    assert_eq!(
        done[0].result,
        Err(IoError::Target(TargetError::NotSupported))
    );
    assert_eq!(
        device.map.status().groups[0].paths[0].state,
        PathState::Active,
        "a target error does not fail the path"
    );
}

#[test]
fn unsupported_write_zeroes_is_a_target_error() {
    let dir = TempDir::new("nbd-nozero");
    let server = Server::nbdkit(
        &dir.join("z.sock"),
        &["--filter=nozero", "memory", "size=1M", "zeromode=none"],
    );
    let (device, mut queue) = device(SIZE, &[server.uri()], MapOptions::default());
    let done = run(
        &mut queue,
        vec![io(0, Op::WriteZeroes, 0, BLOCK, None)],
        BOUND,
    );
    assert_eq!(
        done[0].result,
        Err(IoError::Target(TargetError::NotSupported))
    );
    assert_eq!(
        device.map.status().groups[0].paths[0].state,
        PathState::Active
    );
}

#[test]
fn an_export_smaller_than_the_map_is_a_failed_path_that_says_why() {
    let dir = TempDir::new("nbd-size");
    let server = Server::nbdkit(&dir.join("n.sock"), &["null", "size=1M"]);
    let table = support::one_group_table(2 * SIZE, &[server.uri()], false);
    let device = Transports::new()
        .build(&table, MapOptions::default())
        .unwrap();
    assert!(device.map.paths()[0].is_failed());
    let error = device.paths[0].unready().expect("an export too small");
    assert!(
        error.contains(&server.uri())
            && error.contains("the export holds 1048576 bytes but the map needs 2097152"),
        "{error}"
    );
}

#[test]
fn an_unknown_export_or_a_missing_server_is_a_failed_path_that_says_why() {
    let dir = TempDir::new("nbd-export");
    let disk = dir.join("disk.img");
    std::fs::File::create(&disk).unwrap().set_len(SIZE).unwrap();
    let server = Server::qemu_nbd(&dir.join("q.sock"), &disk, &["--export-name=disk0"]);
    let unready = |word: String| {
        let table = support::one_group_table(SIZE, &[word], false);
        let device = Transports::new()
            .build(&table, MapOptions::default())
            .unwrap();
        assert_eq!(
            device.map.paths()[0].is_failed(),
            device.unready_paths().count() == 1
        );
        device
            .unready_paths()
            .map(|(_, reason)| reason)
            .collect::<Vec<_>>()
    };
    assert!(unready(server.export_uri("disk0")).is_empty());
    let reasons = unready(server.export_uri("nope"));
    assert!(
        reasons[0].contains("server refused GO: ERR_UNKNOWN (no such export)"),
        "{reasons:?}"
    );
    let missing = format!("nbd+unix:///?socket={}", dir.join("none.sock").display());
    let reasons = unready(missing);
    assert!(reasons[0].contains("connecting to nbd+unix"), "{reasons:?}");
}

/// Opens a probe queue to path `path` of `device` (what the checker's
/// probe does) and polls it until its connect, started at opening, ended:
/// connected, or failed with the target's reason updated.
fn attempt_connect(device: &mpio_transport::Device, path: usize) -> AnyQueue {
    let deadline = Instant::now() + BOUND;
    let mut probe = device.paths[path].open(1, None);
    while matches!(&probe, AnyQueue::Nbd(nbd) if nbd.is_connecting()) {
        assert!(Instant::now() < deadline, "a connect hangs");
        poll_outcomes(&mut probe, 0);
        std::thread::yield_now();
    }
    probe
}

/// A map whose second NBD server is down when it is built serves through
/// the first; the second path starts failed with why, connects once its
/// server is up, takes the capabilities the map settled on, and serves
/// the same data. A server that comes up offering less than the map
/// settled on (no write-zeroes here) is refused and its path stays out.
#[test]
fn a_server_down_at_build_joins_the_map_when_it_comes_up() {
    let dir = TempDir::new("nbd-late");
    let disk = dir.join("disk.img");
    std::fs::File::create(&disk).unwrap().set_len(SIZE).unwrap();
    let file = disk.display().to_string();
    let a = Server::nbdkit(&dir.join("a.sock"), &["file", &file]);
    let late_socket = dir.join("b.sock");
    let late_uri = format!("nbd+unix:///?socket={}", late_socket.display());
    let (device, mut queue) = device(SIZE, &[a.uri(), late_uri.clone()], MapOptions::default());
    let reasons: Vec<(&str, String)> = device.unready_paths().collect();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert_eq!(reasons[0].0, late_uri);
    assert!(reasons[0].1.contains("connecting to"), "{reasons:?}");
    let (ios, reference) = writes(3);
    run_ok(&mut queue, ios, BOUND);

    // Up with less than the map settled on: refused, still failed.
    let mut lacking = Server::nbdkit(&late_socket, &["--filter=nozero", "file", &file]);
    let deadline = Instant::now() + BOUND;
    loop {
        attempt_connect(&device, 1);
        let why = device.paths[1].unready().expect("never settled");
        if why.contains("cannot join the map") {
            assert!(why.contains("NBD_FLAG_SEND_WRITE_ZEROES"), "{why}");
            break;
        }
        assert!(Instant::now() < deadline, "never refused: {why}");
    }
    lacking.kill();
    drop(lacking);

    // Up as it should be: it settles and serves the same data.
    let b = Server::nbdkit(&late_socket, &["file", &file]);
    // nbdkit takes connections once its pid file is written, before
    // `Server::nbdkit` returns: the first attempt connects.
    let probe = attempt_connect(&device, 1);
    assert!(
        matches!(&probe, AnyQueue::Nbd(nbd) if nbd.is_connected()),
        "{:?}",
        device.paths[1].unready()
    );
    assert_eq!(device.paths[1].unready(), None);
    assert!(device.map.reinstate_path(1));
    assert!(device.map.fail_path(0, PathError::Transport));
    let reads = (0..blocks())
        .map(|block| io(block, Op::Read, block * u64::from(BLOCK), BLOCK, None))
        .collect();
    for completion in run_ok(&mut queue, reads, BOUND) {
        let block = completion.user_data as usize;
        assert!(completion.buf.as_slice() == reference[block].as_slice());
    }
    verify_through(&b.uri(), BLOCK, &reference);
}

#[test]
fn a_killed_server_fails_its_path_and_nothing_is_lost() {
    let dir = TempDir::new("nbd-kill");
    let disk = dir.join("disk.img");
    std::fs::File::create(&disk).unwrap().set_len(SIZE).unwrap();
    let file = disk.display().to_string();
    // Writes wait 300 ms on a, so they are in flight when it dies.
    let mut a = Server::nbdkit(
        &dir.join("a.sock"),
        &["--filter=delay", "file", &file, "delay-write=300ms"],
    );
    let b = Server::nbdkit(&dir.join("b.sock"), &["file", &file]);
    let (device, mut queue) = device(SIZE, &[a.uri(), b.uri()], MapOptions::default());
    let (ios, reference) = writes(2);
    // Killed as soon as a holds writes on its connection (not after a
    // fixed time: on a loaded machine the connect alone may take longer).
    let mut in_flight_when_killed = None;
    run_with(&mut queue, ios, BOUND, |queue| {
        let AnyQueue::Nbd(path) = &queue.path_queues_mut()[0] else {
            unreachable!("path 0 is an nbd path")
        };
        if in_flight_when_killed.is_none() && path.in_flight() > 0 {
            in_flight_when_killed = Some(path.in_flight());
            a.kill();
        }
    });
    assert!(
        in_flight_when_killed.is_some_and(|in_flight| in_flight > 0),
        "writes in flight on a when it died: {in_flight_when_killed:?}"
    );
    let status = device.map.status();
    assert_eq!(status.groups[0].paths[0].state, PathState::Failed);
    assert_eq!(
        status.groups[0].paths[0].last_error,
        Some(PathError::ConnectionLost)
    );
    verify_through(&b.uri(), BLOCK, &reference);

    // The server comes back on its socket; once reinstated, the path
    // reconnects and serves.
    a.restart();
    // What the checker does before it reinstates: its own probe queue
    // connects to the server that came back, which lets the I/O queue
    // connect at once instead of after the backoff of a connect that
    // failed while a was down (how long that backoff still runs depends
    // on the machine's speed).
    let mut probe = device.paths[0].open(1, None);
    let deadline = Instant::now() + BOUND;
    while !matches!(&probe, AnyQueue::Nbd(path) if path.is_connected()) {
        assert!(Instant::now() < deadline, "no probe connection to a");
        poll_outcomes(&mut probe, 0);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(device.map.reinstate_path(0));
    let reads = (0..blocks())
        .map(|block| io(block, Op::Read, block * u64::from(BLOCK), BLOCK, None))
        .collect();
    let before = queue.path_loads()[0].dispatched();
    for completion in run_ok(&mut queue, reads, BOUND) {
        let block = completion.user_data as usize;
        assert!(completion.buf.as_slice() == reference[block].as_slice());
    }
    assert!(queue.path_loads()[0].dispatched() > before);
    let AnyQueue::Nbd(path) = &queue.path_queues_mut()[0] else {
        unreachable!("path 0 is an nbd path")
    };
    assert_eq!(
        device.map.status().groups[0].paths[0].state,
        PathState::Active,
        "{:?} {:?}",
        device.map.status().groups[0].paths[0],
        path.last_error()
    );
}
