//! What `Transports::build` and every later connection check of an NBD
//! export, against real nbdkit servers: a writable export without
//! `CAN_MULTI_CONN` is a failed path (a flush would not cover the other
//! connections' writes); read-only and writable paths are not mixed in a
//! map; capabilities only some paths have are refused the same way on
//! every path; a server that comes back different stays failed.

mod support;

use mpio_core::io::{IoError, Op, PathError, TargetError};
use mpio_core::map::MapOptions;
use mpio_core::queue::{PathIo, PathQueue};
use mpio_test_support::{wait_until, HANG_BOUND};
use mpio_transport::NbdQueue;
use mpio_transport::{PathHandle, SetupError, Transports};
use std::sync::Arc;
use support::{io, one_group_table, run, run_ok, Server, TempDir};

#[test]
fn a_writable_export_without_multi_conn_is_a_failed_path_that_says_why() {
    let dir = TempDir::new("nbd-multi-conn");
    let server = Server::nbdkit(
        &dir.join("s.sock"),
        &[
            "--filter=multi-conn",
            "memory",
            "1M",
            "multi-conn-mode=disable",
        ],
    );
    let table = one_group_table(1 << 20, &[server.uri()], false);
    let device = Transports::new()
        .build(&table, MapOptions::default())
        .unwrap();
    assert!(device.map.paths()[0].is_failed());
    let text = device.paths[0]
        .unready()
        .expect("a writable export without CAN_MULTI_CONN");
    assert!(text.contains(&server.uri()), "names the path: {text}");
    assert!(
        text.contains("NBD_FLAG_CAN_MULTI_CONN"),
        "names the flag: {text}"
    );
}

#[test]
fn a_read_only_export_without_multi_conn_is_served() {
    let dir = TempDir::new("nbd-multi-conn-ro");
    let server = Server::nbdkit(
        &dir.join("s.sock"),
        &[
            "-r",
            "--filter=multi-conn",
            "pattern",
            "1M",
            "multi-conn-mode=disable",
        ],
    );
    let table = one_group_table(
        1 << 20,
        &[format!("{}#a", server.uri()), format!("{}#b", server.uri())],
        false,
    );
    let device = Transports::new()
        .build(&table, MapOptions::default())
        .expect("read-only exports need no multi-conn");
    let mut queue = device.queue(8, 0);
    let reads = (0..4)
        .map(|n| io(n, Op::Read, n * 4096, 4096, None))
        .collect();
    run_ok(&mut queue, reads, HANG_BOUND);
}

#[test]
fn a_read_only_path_beside_a_writable_one_is_refused_at_setup() {
    let dir = TempDir::new("nbd-flags");
    let writable = Server::nbdkit(&dir.join("rw.sock"), &["memory", "1M"]);
    let read_only = Server::nbdkit(&dir.join("ro.sock"), &["-r", "memory", "1M"]);
    let table = one_group_table(1 << 20, &[writable.uri(), read_only.uri()], false);
    let error = Transports::new()
        .build(&table, MapOptions::default())
        .expect_err("mixed read-only and writable paths");
    assert!(
        matches!(error, SetupError::NbdPathsDiffer { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains(&writable.uri()) && text.contains(&read_only.uri()),
        "names both paths: {text}"
    );
    assert!(
        text.contains("NBD_FLAG_READ_ONLY"),
        "names the flag: {text}"
    );
}

/// One path without `WRITE_ZEROES` (the nozero filter) beside one with
/// it: write-zeroes is refused as not supported whichever path the
/// round-robin selector picks, never an answer that depends on the path.
#[test]
fn a_capability_only_some_paths_have_is_refused_on_every_path() {
    let dir = TempDir::new("nbd-caps");
    let zeroes = Server::nbdkit(&dir.join("z.sock"), &["memory", "1M"]);
    let no_zeroes = Server::nbdkit(
        &dir.join("n.sock"),
        &["--filter=nozero", "memory", "1M", "zeromode=none"],
    );
    let table = one_group_table(1 << 20, &[zeroes.uri(), no_zeroes.uri()], false);
    let device = Transports::new()
        .build(&table, MapOptions::default())
        .unwrap();
    let mut queue = device.queue(8, 0);
    let ios = (0..8)
        .map(|n| io(n, Op::WriteZeroes, n * 4096, 4096, None))
        .collect();
    let done = run(&mut queue, ios, HANG_BOUND);
    assert_eq!(done.len(), 8);
    for completion in &done {
        assert_eq!(
            completion.result,
            Err(IoError::Target(TargetError::NotSupported)),
            "I/O {}",
            completion.user_data
        );
    }
    let stats = queue.path_loads();
    assert!(
        stats[0].dispatched() > 0 && stats[1].dispatched() > 0,
        "both paths were tried: {stats:?}"
    );
}

/// Polls `queue` until its background connect ended.
fn settle(queue: &mut NbdQueue) {
    let mut done = Vec::new();
    wait_until("the connect ends", || {
        queue.poll(0, &mut done);
        !queue.is_connecting()
    });
}

#[test]
fn a_server_that_comes_back_different_is_a_path_error() {
    let dir = TempDir::new("nbd-changed");
    let socket = dir.join("s.sock");
    let mut server = Server::nbdkit(&socket, &["memory", "1M"]);
    let table = one_group_table(1 << 20, &[server.uri()], false);
    let device = Transports::new()
        .build(&table, MapOptions::default())
        .unwrap();
    let PathHandle::Nbd(target) = &device.paths[0] else {
        unreachable!("an nbd path")
    };
    server.kill();
    let _read_only = Server::nbdkit(&socket, &["-r", "memory", "1M"]);
    let mut queue = NbdQueue::open(Arc::clone(target), 4);
    settle(&mut queue);
    assert!(!queue.is_connected());
    let why = queue.last_error().unwrap_or_default().to_string();
    assert!(
        why.contains("changed") && why.contains("NBD_FLAG_READ_ONLY"),
        "{why}"
    );
    queue.submit(PathIo::read(1, 0, mpio_core::io::Buffer::zeroed(4096)), 0);
    let mut done = Vec::new();
    queue.poll(0, &mut done);
    assert_eq!(done.len(), 1);
    assert_eq!(
        done[0].outcome,
        mpio_core::io::PathOutcome::Path(PathError::ConnectionLost)
    );
}
