//! The control socket promises a client at most CONNECTION_TIMEOUT
//! to send its request; a client that trickles bytes must not hold
//! another client's answer, nor the shutdown that cuts every client, for
//! that long.
//!
//! The tests judge events, not durations: which of two clients was
//! answered first, and whether a trickling client was cut or refused. A
//! run in which a busy machine let the trickler's deadline pass first
//! proves nothing either way and is repeated; only a server that really
//! waits for the trickler never gives a conclusive run, and fails at
//! [`HANG_BOUND`].

use mpio_daemon::control::client;
use mpio_daemon::control::protocol::{Request, Response};
use mpio_daemon::control::server::{ControlServer, CONNECTION_TIMEOUT};
use mpio_test_support::{wait_until, HANG_BOUND};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the trickler sends a byte: far under CONNECTION_TIMEOUT,
/// so a per-read timeout would never end its connection.
const PACE: Duration = Duration::from_millis(100);

/// A client that sends a space every [`PACE`], never a newline, until
/// the server answers or closes the connection.
struct Trickler {
    ended: Arc<AtomicBool>,
    thread: JoinHandle<String>,
}

impl Trickler {
    fn connect(socket: &Path) -> Trickler {
        let mut stream = UnixStream::connect(socket).unwrap();
        stream.write_all(b" ").unwrap();
        let ended = Arc::new(AtomicBool::new(false));
        let thread_ended = Arc::clone(&ended);
        let thread = std::thread::spawn(move || {
            let received = trickle(&mut stream);
            // Release: pairs with the Acquire in `ended`; only the flag
            // itself is published.
            thread_ended.store(true, Ordering::Release);
            received
        });
        Trickler { ended, thread }
    }

    /// The server has answered or closed the connection.
    fn ended(&self) -> bool {
        // Acquire: pairs with the store in `connect`.
        self.ended.load(Ordering::Acquire)
    }

    /// What the server sent before closing: its refusal, or nothing if
    /// it cut the connection.
    fn join(self) -> String {
        self.thread.join().unwrap()
    }
}

/// Trickles bytes until the server answers or closes; returns what it
/// sent.
fn trickle(stream: &mut UnixStream) -> String {
    // The read timeout only paces the loop: each turn sends one byte.
    stream.set_read_timeout(Some(PACE)).unwrap();
    let started = Instant::now();
    let mut received = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        assert!(
            started.elapsed() < HANG_BOUND,
            "the server neither answered nor closed a trickling client within {HANG_BOUND:?}"
        );
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(count) => received.extend_from_slice(&chunk[..count]),
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                // A failed write (the server just closed) is not the end:
                // the next read returns what the server sent, then 0.
                if received.is_empty() {
                    let _ = stream.write_all(b" ");
                }
            }
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&received).into_owned()
}

#[test]
fn a_trickling_client_cannot_hold_the_control_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let server = ControlServer::start(
        &socket,
        Box::new(|_request: Request| Response::Ok {
            text: String::new(),
            json: serde_json::Value::Null,
        }),
    )
    .unwrap();
    let mut trickler = None;
    wait_until(
        "an honest `mpio status` answered while a trickling client waits",
        || {
            let connected = Trickler::connect(&socket);
            let answer = client::call(&socket, &Request::Status { map: None });
            assert!(answer.is_ok(), "{answer:?}");
            // The honest client connected after the trickler: a server
            // that served them in turn would answer it only once the
            // trickler had been refused at its deadline.
            let conclusive = !connected.ended();
            trickler = Some(connected);
            conclusive
        },
    );
    // The deadline covers the whole request, not each read: the
    // trickler, which never stops sending, is refused.
    let refusal = trickler.unwrap().join();
    assert!(
        refusal.contains("no complete request line"),
        "a trickling client got {refusal:?}"
    );
    server.stop();
}

#[test]
fn a_trickling_client_cannot_delay_the_shutdown_past_its_deadline() {
    use mpio_daemon::config::DaemonConfig;
    use mpio_daemon::daemon::{Daemon, ServerSettings};
    wait_until(
        "SIGTERM's shutdown cut a trickling control client before its deadline",
        || {
            let dir = tempfile::tempdir().unwrap();
            let socket = dir.path().join("control.sock");
            let config = DaemonConfig::parse(
                "[[map]]\nname = 'm'\n\
                 table = '0 2048 multipath 0 0 1 1 round-robin 0 1 1 memory:d#a 1'\n",
            )
            .unwrap();
            let daemon = Daemon::start(config, Some(&socket), ServerSettings::default()).unwrap();
            let trickler = Trickler::connect(&socket);
            // Clients are accepted in the order they connect: once one
            // that connected after the trickler is answered, the
            // trickler is being served.
            let answer = client::call(&socket, &Request::Status { map: None });
            assert!(answer.is_ok(), "{answer:?}");
            let (done, shut_down) = mpsc::channel();
            std::thread::spawn(move || {
                daemon.shutdown(Duration::from_millis(500)); // what SIGTERM runs
                let _ = done.send(());
            });
            shut_down
                .recv_timeout(HANG_BOUND)
                .expect("the shutdown returns");
            // Cut, the trickler reads nothing; refused at its deadline,
            // it reads the refusal. A shutdown that waited for the
            // trickler always lets the refusal through; one that cuts it
            // does too only if a busy machine let CONNECTION_TIMEOUT
            // pass first (then the run is repeated).
            let received = trickler.join();
            assert!(
                received.is_empty() || received.contains("no complete request line"),
                "a trickling client got {received:?} (deadline {CONNECTION_TIMEOUT:?})"
            );
            received.is_empty()
        },
    );
}
