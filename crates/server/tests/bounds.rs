//! A connection's bounds, as a client that pushes them sees them: every
//! request past the in-flight bounds is still answered once room frees; a
//! client that never reads cannot make the server hold more than the
//! bounds; FUA is accepted on every command (proto.md); the unix socket
//! gets its mode, not the umask's; idle clients at the connection cap
//! make room for a new one; a request waiting for room in the shared
//! budget keeps its connection. (What the whole server holds is measured
//! in `memory_bounds.rs`.)

mod support;

use mpio_nbd::consts::*;
use mpio_nbd::request::Request;
use mpio_server::ServerConfig;
use mpio_server::INPUT_LEN;
use std::io::Write;
use std::time::{Duration, Instant};
use support::*;

fn one_loop() -> TestServer {
    TestServer::start(ServerConfig {
        loops: 1,
        ..ServerConfig::default()
    })
}

/// A client that sends a batch bigger than the connection's bound
/// (`MAX_IN_FLIGHT` = 512) and then waits for every reply: the requests
/// past the bound wait in the input buffer, and must be read on when
/// replies free room, not only at a new readable edge (which never comes).
#[test]
fn a_batch_past_the_in_flight_count_bound_is_all_answered() {
    let server = one_loop();
    let mut client = RawClient::ready(server.socket());
    client.stream.set_read_timeout(Some(HANG_BOUND)).unwrap();
    let count = 600u64;
    let mut batch = Vec::new();
    for cookie in 0..count {
        batch.extend_from_slice(
            &Request {
                flags: 0,
                command: CMD_READ,
                cookie,
                offset: 0,
                length: 512,
            }
            .encode(),
        );
    }
    client.send(&batch);
    for answered in 0..count {
        let mut header = [0; 16];
        if let Err(error) = std::io::Read::read_exact(&mut client.stream, &mut header) {
            panic!("only {answered} of {count} replies within {HANG_BOUND:?}: {error}");
        }
        let mut data = [0; 512];
        std::io::Read::read_exact(&mut client.stream, &mut data).unwrap();
    }
}

/// The same with the byte bound (64 MiB): four 24 MiB READs sent at once.
#[test]
fn a_batch_past_the_in_flight_byte_bound_is_all_answered() {
    let server = one_loop();
    let mut client = RawClient::ready(server.socket());
    client.stream.set_read_timeout(Some(HANG_BOUND)).unwrap();
    let length = 24u32 << 20;
    for cookie in 0..4u64 {
        client.send(
            &Request {
                flags: 0,
                command: CMD_READ,
                cookie,
                offset: 0,
                length,
            }
            .encode(),
        );
    }
    let mut data = vec![0; length as usize];
    for answered in 0..4 {
        let mut header = [0; 16];
        if let Err(error) = std::io::Read::read_exact(&mut client.stream, &mut header) {
            panic!("only {answered} of 4 replies within 10 s: {error}");
        }
        std::io::Read::read_exact(&mut client.stream, &mut data).unwrap();
    }
}

/// proto.md, command flags: NBD_CMD_FLAG_FUA "is valid for all commands,
/// provided NBD_FLAG_SEND_FUA has been negotiated, in which case the
/// server MUST accept all commands with this bit set (even by ignoring
/// the bit)". The server advertises SEND_FUA, so READ|FUA and FLUSH|FUA
/// must be served.
#[test]
fn fua_is_accepted_on_every_command() {
    let server = one_loop();
    let mut client = RawClient::ready(server.socket());
    for (cookie, command, length) in [(1u64, CMD_READ, 512u32), (2, CMD_FLUSH, 0)] {
        client.send(
            &Request {
                flags: CMD_FLAG_FUA,
                command,
                cookie,
                offset: 0,
                length,
            }
            .encode(),
        );
        let data_len = if command == CMD_READ { 512 } else { 0 };
        let (error, got, _) = client.simple_reply(data_len);
        assert_eq!(
            (error, got),
            (0, cookie),
            "command {command} with FUA refused"
        );
    }
}

/// A client that sends READs and never reads its socket: a request counts
/// against the connection's bounds until its reply has gone out, so the
/// server stops reading it at the bound instead of piling every completed
/// READ's buffer up in the connection's output queue.
#[test]
fn a_client_that_never_reads_cannot_pin_unbounded_memory() {
    let server = one_loop();
    let mut client = RawClient::ready(server.socket());
    let count = 256u64;
    // One request at a time (each arrival is a new readable edge, so the
    // stall of the batch tests above does not hide this one).
    for cookie in 0..count {
        let request = Request {
            flags: 0,
            command: CMD_READ,
            cookie,
            offset: (cookie % 64) << 20,
            length: 1 << 20,
        };
        client.stream.write_all(&request.encode()).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    // Wait until the server stops completing (it reaches the bound), at
    // most 10 s.
    let started = Instant::now();
    let mut completed = server.server.stats().requests_completed;
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = server.server.stats().requests_completed;
        if now == completed || started.elapsed() > Duration::from_secs(10) {
            completed = now;
            break;
        }
        completed = now;
    }
    // 64 MiB of replies may wait for the client; the rest of its requests
    // must not even be read.
    let bound = (64u64 << 20) / (1 << 20);
    assert!(
        completed <= bound,
        "a client that never reads got {completed} READs of 1 MiB completed (bound {bound})"
    );
}

/// Whoever can connect to an export can write the disk: its unix socket
/// gets mode 0600 whatever the umask (it once got the umask's 0755, or
/// 0777 under umask 0), or the mode and group configured.
#[test]
fn the_unix_socket_gets_its_mode_not_the_umask() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let server = one_loop();
    let metadata = std::fs::metadata(server.socket()).unwrap();
    assert_eq!(metadata.permissions().mode() & 0o777, 0o600);
    let our_group = metadata.gid();
    let shared = TestServer::start(ServerConfig {
        loops: 1,
        socket_mode: 0o660,
        socket_group: Some(our_group),
        ..ServerConfig::default()
    });
    let metadata = std::fs::metadata(shared.socket()).unwrap();
    assert_eq!(metadata.permissions().mode() & 0o777, 0o660);
    assert_eq!(metadata.gid(), our_group);
    still_serves(shared.socket());
}

/// Clients that finish the handshake and then say nothing must not fill
/// the connection cap and lock out every new client: at the cap a new
/// client takes the place of the connection idle the longest; idle
/// clients stay while there is room, and a client whose request is in
/// flight is never taken for idle.
#[test]
fn idle_clients_at_the_cap_make_room_for_a_new_one() {
    let server = TestServer::start(ServerConfig {
        loops: 1,
        max_connections: 3,
        ..ServerConfig::default()
    });
    let mut oldest = RawClient::ready(server.socket());
    std::thread::sleep(Duration::from_millis(50));
    let mut idle: Vec<RawClient> = (0..2).map(|_| RawClient::ready(server.socket())).collect();
    // Under the cap nobody is closed, however long idle.
    let evict_after = Duration::from_millis(ServerConfig::default().evict_idle_ms);
    std::thread::sleep(evict_after + Duration::from_millis(200));
    assert_eq!(server.server.stats().connections_evicted, 0);
    // At the cap: the new client is served...
    let mut newcomer = RawClient::ready(server.socket());
    newcomer.request(CMD_READ, 7, 0, 4096, &[]);
    let (error, cookie, _) = newcomer.simple_reply(4096);
    assert_eq!((error, cookie), (0, 7));
    // ...in place of the connection idle the longest.
    assert!(oldest.closed_by_server(), "the longest-idle client stays");
    assert_eq!(server.server.stats().connections_evicted, 1);
    // The others still work.
    for (cookie, client) in idle.iter_mut().enumerate() {
        client.request(CMD_READ, cookie as u64, 0, 4096, &[]);
        assert_eq!(client.simple_reply(4096).0, 0);
    }
    // Each of the three now has a request in flight (the paths hang), so
    // none is idle however long this takes: the next client is refused.
    let ports = ["a", "b", "c"].map(|port| server.transports.port("disk", port));
    ports.iter().for_each(|port| port.hang());
    for client in idle.iter_mut().chain([&mut newcomer]) {
        client.request(CMD_READ, 9, 0, 4096, &[]);
    }
    wait_until("the three requests reach the map", || {
        let map = server.device.map();
        let in_flight: u32 = (0..map.paths().len())
            .map(|path| map.path_load(path).in_flight())
            .sum();
        in_flight == 3
    });
    let mut refused = RawClient::connect(server.socket());
    assert!(refused.closed_by_server());
    assert_eq!(server.server.stats().connections_refused, 1);
    assert_eq!(server.server.stats().connections_evicted, 1);
    ports.iter().for_each(|port| port.heal());
    for client in idle.iter_mut().chain([&mut newcomer]) {
        assert_eq!(client.simple_reply(4096), (0, 9, vec![0; 4096]));
    }
}

/// A request the server's buffer budget has no room for waits, and its
/// connection stays open: the server reads nothing more from that client
/// until the request fits, however much the client has sent behind it.
/// (Reading on filled the connection's input buffer; the read into no
/// room that followed returned 0, was taken for the client's end of file
/// and closed the connection as broken: the client's next send failed
/// with a broken pipe.)
#[test]
fn a_request_waiting_for_the_budget_keeps_its_connection() {
    // The smallest budget allowed: one largest request.
    const BUDGET: usize = 32 << 20;
    const READ: u32 = 4 << 20;
    // Above a free first request (1 MiB): it needs the budget.
    const WRITE: usize = 2 << 20;
    let server = TestServer::start(ServerConfig {
        loops: 1,
        max_buffered_bytes: BUDGET,
        ..ServerConfig::default()
    });
    // Eight 4 MiB READs whose replies nobody reads hold the whole budget.
    let mut hog = RawClient::ready(server.socket());
    for cookie in 0..8u64 {
        hog.request(CMD_READ, cookie, cookie * u64::from(READ), READ, &[]);
    }
    let started = Instant::now();
    while server.server.buffered_bytes() < BUDGET {
        assert!(started.elapsed() < TIMEOUT, "the budget never filled");
        std::thread::sleep(Duration::from_millis(1));
    }
    // A WRITE's header and more of its payload than the input buffer
    // holds; the server cannot take the WRITE yet.
    let data: Vec<u8> = (0..WRITE).map(|index| (index % 251) as u8).collect();
    let mut writer = RawClient::ready(server.socket());
    writer.request(CMD_WRITE, 1, 0, WRITE as u32, &data[..INPUT_LEN]);
    // A third client's reply is sent in a turn of the (only) loop that
    // came after those bytes arrived, so the loop has seen them by then.
    let mut probe = RawClient::ready(server.socket());
    probe.request(CMD_READ, 2, 0, 4096, &[]);
    assert_eq!(probe.simple_reply(4096).0, 0);
    let stats = server.server.stats();
    assert_eq!(
        (stats.protocol_errors, stats.connections_closed),
        (0, 0),
        "a connection closed while its request waited for the budget"
    );
    // Room frees as the hog reads its replies; the WRITE goes through.
    for _ in 0..8 {
        assert_eq!(hog.simple_reply(READ as usize).0, 0);
    }
    writer.send(&data[INPUT_LEN..]);
    assert_eq!(writer.simple_reply(0), (0, 1, Vec::new()));
    writer.request(CMD_READ, 3, 0, WRITE as u32, &[]);
    let (error, cookie, read) = writer.simple_reply(WRITE);
    assert_eq!((error, cookie), (0, 3));
    assert!(read == data, "the WRITE that waited reads back wrong");
    assert_eq!(server.server.stats().protocol_errors, 0);
}
