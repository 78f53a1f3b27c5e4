//! A queue whose connect failed while its server was down waits out a
//! backoff before it tries again, unless another queue (the checker's
//! probe) connected since that attempt started: then the server is up and
//! the next submission connects at once. The count is the one from when
//! the failed attempt started, not from when its failure was read (a
//! queue polled late once recorded the probe's connection as already
//! seen, and failed I/O on a path the checker had just reinstated).

mod support;

use mpio_core::io::{Buffer, PathOutcome};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use mpio_test_support::HANG_BOUND;
use mpio_transport::{NbdAddress as Address, NbdSocket as Socket};
use mpio_transport::{NbdQueue, NbdTarget};
use std::sync::Arc;
use std::time::Instant;
use support::{Server, TempDir};

const SIZE: u64 = 1 << 20;

fn read(tag: u64) -> PathIo {
    PathIo::read(tag, 0, Buffer::zeroed(4096))
}

/// Polls `queue` (at clock 0: within any backoff) until it completed one
/// I/O.
fn one_completion(queue: &mut NbdQueue) -> PathCompletion {
    let deadline = Instant::now() + HANG_BOUND;
    let mut done = Vec::new();
    while done.is_empty() {
        queue.poll(0, &mut done);
        assert!(Instant::now() < deadline, "no completion");
        std::thread::yield_now();
    }
    done.remove(0)
}

#[test]
fn a_connection_made_elsewhere_after_a_failed_attempt_started_ends_its_backoff() {
    let dir = TempDir::new("nbd-reconnect");
    let socket = dir.join("s.sock");
    let target = Arc::new(NbdTarget::new(
        Address {
            socket: Socket::Unix(socket.clone()),
            export: String::new(),
        },
        SIZE,
    ));
    // The I/O thread's queue opens while the server is down: its connect
    // fails (seen in the target's reason), and nobody polls the queue.
    let mut queue = NbdQueue::open(Arc::clone(&target), 8);
    let deadline = Instant::now() + HANG_BOUND;
    while !target
        .unready()
        .is_some_and(|why| why.contains("connecting to"))
    {
        assert!(Instant::now() < deadline, "the connect did not fail");
        std::thread::yield_now();
    }
    // The server comes up and the checker's probe connects.
    let disk = dir.join("disk.img");
    std::fs::File::create(&disk).unwrap().set_len(SIZE).unwrap();
    let _server = Server::nbdkit(&socket, &["file", disk.to_str().unwrap()]);
    let mut probe = NbdQueue::open(Arc::clone(&target), 1);
    probe.submit(read(1), 0);
    assert_eq!(one_completion(&mut probe).outcome, PathOutcome::Ok);
    // The queue reads its failed connect only now, then gets I/O within
    // its backoff: the probe's connection since the attempt started says
    // the server is up, so it connects instead of failing the I/O.
    queue.poll(0, &mut Vec::new());
    queue.submit(read(2), 0);
    assert_eq!(one_completion(&mut queue).outcome, PathOutcome::Ok);
}
