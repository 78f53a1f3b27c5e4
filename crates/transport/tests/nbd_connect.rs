//! Connecting never blocks the I/O thread: against a server whose kernel
//! accepts connections but whose process never answers (hung, stopped,
//! overloaded), submissions return at once, wait for the one background
//! connect, fail with `ConnectionLost` when it times out, and later
//! submissions fail at once until the backoff has passed on the clock the
//! caller passes (here a fixed one: the failure at 0, the backoff's end
//! exactly at `FIRST_BACKOFF`).

use mpio_core::io::{Buffer, PathError, PathOutcome};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use mpio_transport::nbd::address::{Address, Socket};
use mpio_transport::nbd::queue::FIRST_BACKOFF;
use mpio_transport::nbd::{NbdQueue, NbdTarget};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn read(tag: u64) -> PathIo {
    PathIo::read(tag, 0, Buffer::zeroed(4096))
}

/// Connections the listener's backlog holds (it never accepts them for
/// the client: the client sees a server that does not answer).
fn connections(listener: &TcpListener) -> usize {
    listener.set_nonblocking(true).unwrap();
    std::iter::from_fn(|| listener.accept().ok()).count()
}

fn poll_until(queue: &mut NbdQueue, count: usize) -> Vec<PathCompletion> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut done = Vec::new();
    while done.len() < count {
        queue.poll(0, &mut done);
        assert!(
            Instant::now() < deadline,
            "{} of {count} I/Os back",
            done.len()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    done
}

#[test]
fn submissions_to_an_unresponsive_server_never_wait_and_fail_fast_after_a_failed_connect() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let target = Arc::new(
        NbdTarget::new(
            Address {
                socket: Socket::Tcp {
                    host: "127.0.0.1".into(),
                    port,
                },
                export: String::new(),
            },
            1 << 20,
        )
        .with_connect_timeout(Duration::from_secs(2)),
    );
    let mut queue = NbdQueue::open(target, 32);
    let mut worst = Duration::ZERO;
    for tag in 0..4 {
        let started = Instant::now();
        queue.submit(read(tag), 0);
        worst = worst.max(started.elapsed());
    }
    // Generous for a loaded machine; a blocking handshake would take the
    // whole connect timeout for each submission.
    assert!(worst < Duration::from_secs(1), "a submit took {worst:?}");
    let done = poll_until(&mut queue, 4);
    assert!(done
        .iter()
        .all(|completion| completion.outcome == PathOutcome::Path(PathError::ConnectionLost)));
    let why = queue.last_error().unwrap_or_default().to_string();
    assert!(why.contains("connect timeout"), "{why}");
    assert_eq!(connections(&listener), 1, "one connect for all four");

    // Within the backoff: failed at once, no new connect.
    let backoff_ns = FIRST_BACKOFF.as_nanos() as u64;
    queue.submit(read(9), backoff_ns - 1);
    assert!(!queue.is_connecting());
    let done = poll_until(&mut queue, 1);
    assert_eq!(
        done[0].outcome,
        PathOutcome::Path(PathError::ConnectionLost)
    );
    assert_eq!(connections(&listener), 0, "no connect within the backoff");

    // After it: a new attempt.
    queue.submit(read(10), backoff_ns);
    assert!(queue.is_connecting(), "a new connect after the backoff");
    poll_until(&mut queue, 1);
}
