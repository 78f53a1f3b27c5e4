//! A clean shutdown: requests in flight when it starts all get their
//! replies (slow paths; hung paths that heal), new connections are
//! refused from its first moment (unix and TCP), a connection still in
//! its handshake is closed, a FLUSH reaches the paths after the last
//! write, and past the deadline the report says what was abandoned.

mod support;

use mpio_core::io::{IoError, PathError, PathOutcome};
use mpio_nbd::consts::CMD_WRITE;
use mpio_server::{FlushOutcome, Server, ServerConfig, ShutdownReport};
use mpio_transport::PortControl;
use mpio_transport::{DeviceSlot, Transports};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;
use support::*;

const BLOCK: usize = 4096;
const PORTS: [&str; 3] = ["a", "b", "c"];

fn server() -> TestServer {
    TestServer::start(ServerConfig {
        loops: 2,
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    })
}

/// Successful I/Os over every port of the test map (a flush included).
fn completed(transports: &Transports) -> u64 {
    PORTS
        .iter()
        .map(|port| transports.port("disk", port).completed())
        .sum()
}

/// Runs `each` on every port of the test map.
fn ports(transports: &Transports, each: impl Fn(&PortControl)) {
    for port in PORTS {
        each(&transports.port("disk", port));
    }
}

/// Sends `count` pipelined 4 KiB writes (cookies 0..count), reading no
/// reply.
fn send_writes(client: &mut RawClient, count: u64) {
    for cookie in 0..count {
        let data = vec![cookie as u8; BLOCK];
        client.request(
            CMD_WRITE,
            cookie,
            cookie * BLOCK as u64,
            BLOCK as u32,
            &data,
        );
    }
}

/// Reads `count` replies; panics unless every cookie 0..count succeeded
/// exactly once.
fn expect_replies(client: &mut RawClient, count: u64) {
    let mut seen = vec![false; count as usize];
    for _ in 0..count {
        let (error, cookie, _) = client.simple_reply(0);
        assert_eq!(error, 0, "request {cookie} failed");
        assert!(!std::mem::replace(&mut seen[cookie as usize], true));
    }
}

/// Runs `Server::shutdown(deadline)` on a thread.
fn shut_down(server: Server, deadline: Duration) -> std::thread::JoinHandle<ShutdownReport> {
    std::thread::spawn(move || server.shutdown(deadline))
}

/// Waits until `count` requests reached the map's paths.
fn wait_until_read(device: &DeviceSlot, count: usize) {
    wait_until(&format!("{count} requests reach the map"), || {
        let map = device.map();
        let in_flight: usize = (0..map.paths().len())
            .map(|path| map.path_load(path).in_flight() as usize)
            .sum();
        in_flight >= count
    });
}

/// Waits until the shutdown began: its first step removes the unix
/// socket file, after closing the listeners.
fn wait_until_not_accepting(socket: &Path) {
    wait_until("the shutdown removes the socket file", || !socket.exists());
}

#[test]
fn requests_in_flight_on_slow_paths_are_answered_and_flushed() {
    let TestServer {
        server,
        transports,
        device,
        dir: _dir,
        ..
    } = server();
    ports(&transports, |port| port.set_latency_ns(1_000_000_000));
    let socket = server.unix_socket().unwrap().to_path_buf();
    let tcp = server.tcp_address().unwrap();
    let mut client = RawClient::ready(&socket);
    send_writes(&mut client, 32);
    wait_until_read(&device, 32);
    let before = completed(&transports);
    let shutdown = shut_down(server, HANG_BOUND);
    wait_until_not_accepting(&socket);
    assert!(
        UnixStream::connect(&socket).is_err(),
        "unix connect accepted"
    );
    assert!(TcpStream::connect(tcp).is_err(), "TCP connect accepted");
    // The drain waited on the slow paths: every write is answered, and
    // the flush came after them (below). Whether it was still waiting at
    // the refusals above depends on the machine's speed;
    // `requests_on_hung_paths_that_heal_are_answered` checks them while
    // it must be.
    expect_replies(&mut client, 32);
    let report = shutdown.join().unwrap();
    eprintln!("{report}");
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.flush, FlushOutcome::Done);
    assert!(report.requests_completed >= 32, "{report}");
    assert_eq!(report.connections_closed, 1, "{report}");
    // The 32 writes, then the flush, reached the paths.
    assert_eq!(completed(&transports) - before, 33);
    assert!(client.closed_by_server());
}

#[test]
fn requests_on_hung_paths_that_heal_are_answered() {
    let TestServer {
        server,
        transports,
        device,
        dir: _dir,
        ..
    } = server();
    let socket = server.unix_socket().unwrap().to_path_buf();
    let tcp = server.tcp_address().unwrap();
    let mut client = RawClient::ready(&socket);
    // A client still in its handshake when the shutdown starts.
    let mut lingering = RawClient::connect(&socket);
    lingering.greet();
    ports(&transports, PortControl::hang);
    send_writes(&mut client, 16);
    wait_until_read(&device, 16);
    let before = completed(&transports);
    let shutdown = shut_down(server, HANG_BOUND);
    // The handshaking client is closed at once, and new connections are
    // refused, while the drain waits on the hung paths.
    assert!(lingering.closed_by_server());
    wait_until_not_accepting(&socket);
    assert!(
        UnixStream::connect(&socket).is_err(),
        "unix connect accepted"
    );
    assert!(TcpStream::connect(tcp).is_err(), "TCP connect accepted");
    assert!(
        !shutdown.is_finished(),
        "the drain did not wait for the paths"
    );
    ports(&transports, PortControl::heal);
    expect_replies(&mut client, 16);
    let report = shutdown.join().unwrap();
    assert!(report.is_clean(), "{report}");
    assert_eq!(completed(&transports) - before, 17, "16 writes and a flush");
}

#[test]
fn past_the_deadline_the_report_names_what_was_abandoned() {
    let TestServer {
        server,
        transports,
        device,
        dir: _dir,
        ..
    } = server();
    let mut client = RawClient::ready(server.unix_socket().unwrap());
    ports(&transports, PortControl::hang);
    send_writes(&mut client, 8);
    wait_until_read(&device, 8);
    // The paths never answer: a shutdown that waited for them past its
    // deadline would not return before the bound below.
    let shutdown = shut_down(server, Duration::from_millis(300));
    wait_until("the shutdown gives up at its deadline", || {
        shutdown.is_finished()
    });
    let report = shutdown.join().unwrap();
    eprintln!("{report}");
    assert!(!report.drained, "{report}");
    assert!(!report.is_clean());
    assert_eq!(report.flush, FlushOutcome::NotSent);
    assert_eq!(report.requests_unanswered, 8, "{report}");
    assert_eq!(report.io_left_at_map, 8, "{report}");
    assert!(
        report.to_string().contains("8 requests unanswered"),
        "{report}"
    );
    assert!(client.closed_by_server());
    ports(&transports, PortControl::heal);
}

#[test]
fn a_flush_that_finds_no_path_is_reported() {
    let TestServer {
        server,
        transports,
        map,
        dir: _dir,
        ..
    } = server();
    ports(&transports, |port| {
        port.fail(PathOutcome::Path(PathError::Transport))
    });
    for path in 0..PORTS.len() {
        map.fail_path(path, PathError::Transport);
    }
    let report = server.shutdown(Duration::from_secs(5));
    assert!(report.drained, "{report}");
    assert_eq!(
        report.flush,
        FlushOutcome::Failed(IoError::NoPath),
        "{report}"
    );
}
