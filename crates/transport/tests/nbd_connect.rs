//! Connecting never blocks the I/O thread: against a server whose kernel
//! accepts connections but whose process never answers (hung, stopped,
//! overloaded), submissions return while the one background connect is
//! pending, wait for it, fail with `ConnectionLost` when it times out, and later
//! submissions fail at once until the backoff has passed on the clock the
//! caller passes (here a fixed one: the failure at 0, the backoff's end
//! exactly at `FIRST_BACKOFF`).

use mpio_core::io::{Buffer, PathError, PathOutcome};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use mpio_test_support::HANG_BOUND;
use mpio_transport::NBD_FIRST_BACKOFF as FIRST_BACKOFF;
use mpio_transport::{NbdAddress as Address, NbdSocket as Socket};
use mpio_transport::{NbdQueue, NbdTarget};
use std::net::TcpListener;
use std::sync::{mpsc, Arc};
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
    let deadline = Instant::now() + HANG_BOUND;
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

/// A target at `listener`'s port whose connects give up after
/// `connect_timeout`.
fn target(listener: &TcpListener, connect_timeout: Duration) -> Arc<NbdTarget> {
    let port = listener.local_addr().unwrap().port();
    Arc::new(
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
        .with_connect_timeout(connect_timeout),
    )
}

/// Submits return while the connect they wait for is pending: with a
/// server that never answers and a connect timeout of an hour, a submit
/// that waited on the handshake would not return before the hour, and
/// only that reaches [`HANG_BOUND`]. No speed is asserted.
#[test]
fn submissions_return_while_the_connect_is_pending() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut queue = NbdQueue::open(target(&listener, Duration::from_secs(3600)), 32);
    let (done, submitted) = mpsc::channel();
    std::thread::spawn(move || {
        for tag in 0..4 {
            queue.submit(read(tag), 0);
        }
        let _ = done.send(queue);
    });
    let queue = submitted
        .recv_timeout(HANG_BOUND)
        .expect("the submits return while the server does not answer");
    assert!(queue.is_connecting(), "the connect is still pending");
    // Closing the listener resets the pending connect; its thread ends.
    drop(listener);
}

#[test]
fn submissions_to_an_unresponsive_server_fail_fast_after_a_failed_connect() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut queue = NbdQueue::open(target(&listener, Duration::from_secs(2)), 32);
    for tag in 0..4 {
        queue.submit(read(tag), 0);
    }
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
