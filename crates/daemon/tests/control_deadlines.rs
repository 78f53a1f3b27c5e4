//! The control socket promises a client at most CONNECTION_TIMEOUT
//! to send its request; a client that trickles bytes must not hold the
//! single control thread (and with it every other verb, and the shutdown
//! that joins the thread) for longer.

use mpio_daemon::control::client;
use mpio_daemon::control::protocol::{Request, Response};
use mpio_daemon::control::server::{ControlServer, CONNECTION_TIMEOUT};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

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
    let loris_socket = socket.clone();
    let loris = std::thread::spawn(move || {
        let mut stream = UnixStream::connect(&loris_socket).unwrap();
        // One byte a second, never a newline, for 3 connection timeouts.
        let until = Instant::now() + CONNECTION_TIMEOUT * 3;
        while Instant::now() < until {
            if stream.write_all(b" ").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let answer = client::call(&socket, &Request::Status { map: None });
    let waited = started.elapsed();
    assert!(answer.is_ok(), "{answer:?}");
    assert!(
        waited < CONNECTION_TIMEOUT + Duration::from_secs(2),
        "an honest `mpio status` waited {waited:?} behind a client trickling bytes"
    );
    loris.join().unwrap();
    server.stop();
}

#[test]
fn a_trickling_client_cannot_delay_the_shutdown_past_its_deadline() {
    use mpio_daemon::config::DaemonConfig;
    use mpio_daemon::daemon::{Daemon, ServerSettings};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let config = DaemonConfig::parse(
        "[[map]]\nname = 'm'\ntable = '0 2048 multipath 0 0 1 1 round-robin 0 1 1 memory:d#a 1'\n",
    )
    .unwrap();
    let daemon = Daemon::start(config, Some(&socket), ServerSettings::default()).unwrap();
    let loris = std::thread::spawn(move || {
        let mut stream = UnixStream::connect(&socket).unwrap();
        let until = Instant::now() + CONNECTION_TIMEOUT * 3;
        while Instant::now() < until && stream.write_all(b" ").is_ok() {
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    daemon.shutdown(Duration::from_millis(500)); // what SIGTERM runs
    let took = started.elapsed();
    loris.join().unwrap();
    assert!(
        took < Duration::from_secs(3),
        "SIGTERM's shutdown (deadline 500 ms) took {took:?} behind a trickling control client"
    );
}
