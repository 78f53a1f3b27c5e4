//! The protocol over a raw socket: every command, structured replies,
//! out-of-order completion, and abuse — bad magic, unknown option or
//! command, out-of-range and oversize requests, a truncated packet, a
//! client that vanishes with requests in flight, a flood of connections —
//! each answered with the protocol's error or a clean disconnect, counted,
//! and followed by a server that still serves.

mod support;

use mpio_nbd::consts::*;
use mpio_nbd::reply::{Chunk, ChunkHeader};
use mpio_server::ServerConfig;
use std::io::Read;
use std::net::Shutdown;

use support::*;

#[test]
fn every_command_works_and_write_zeroes_reads_back_zero() {
    let server = TestServer::default_two_loops();
    let mut client = RawClient::ready(server.socket());
    let data = vec![0xc3; 65536];
    // WRITE with FUA: answered once the path made it durable.
    client.send(
        &mpio_nbd::request::Request {
            flags: CMD_FLAG_FUA,
            command: CMD_WRITE,
            cookie: 1,
            offset: 0,
            length: 65536,
        }
        .encode(),
    );
    client.send(&data);
    assert_eq!(client.simple_reply(0), (0, 1, vec![]));
    client.request(CMD_FLUSH, 2, 0, 0, &[]);
    assert_eq!(client.simple_reply(0), (0, 2, vec![]));
    client.request(CMD_WRITE_ZEROES, 3, 4096, 4096, &[]);
    assert_eq!(client.simple_reply(0), (0, 3, vec![]));
    client.request(CMD_TRIM, 4, 32768, 4096, &[]);
    assert_eq!(client.simple_reply(0).0, 0);
    client.request(CMD_READ, 5, 0, 8192, &[]);
    let (error, _, read) = client.simple_reply(8192);
    assert_eq!(error, 0);
    assert_eq!(&read[..4096], &data[..4096]);
    assert!(read[4096..].iter().all(|byte| *byte == 0));
    client.request(CMD_DISC, 6, 0, 0, &[]);
    assert!(client.closed_by_server());
}

/// I/Os the map's three ports completed, and how many of them asked for
/// force unit access.
fn port_completions(server: &TestServer) -> (u64, u64) {
    ["a", "b", "c"]
        .iter()
        .map(|port| server.transports.port("disk", port))
        .fold((0, 0), |(all, fua), port| {
            (all + port.completed(), fua + port.fua_completed())
        })
}

#[test]
fn a_flush_reaches_a_path_and_fua_reaches_the_write() {
    let server = TestServer::default_two_loops();
    let mut writer = RawClient::ready(server.socket());
    let mut flusher = RawClient::ready(server.socket());
    let before = port_completions(&server);
    writer.request(CMD_WRITE, 1, 0, 4096, &[3; 4096]);
    assert_eq!(writer.simple_reply(0).0, 0);
    // Multi-conn: a flush on another connection goes to the storage,
    // which every path (and so every connection's writes) shares.
    flusher.request(CMD_FLUSH, 2, 0, 0, &[]);
    assert_eq!(flusher.simple_reply(0).0, 0);
    let after_flush = port_completions(&server);
    assert_eq!(after_flush.0 - before.0, 2, "a write and a flush");
    assert_eq!(after_flush.1, before.1, "neither asked for FUA");
    writer.send(
        &mpio_nbd::request::Request {
            flags: CMD_FLAG_FUA,
            command: CMD_WRITE,
            cookie: 3,
            offset: 0,
            length: 4096,
        }
        .encode(),
    );
    writer.send(&[4; 4096]);
    assert_eq!(writer.simple_reply(0).0, 0);
    let after_fua = port_completions(&server);
    assert_eq!(
        (after_fua.0 - after_flush.0, after_fua.1 - after_flush.1),
        (1, 1),
        "a FUA write reaches its path as one FUA write"
    );
}

#[test]
fn structured_replies_carry_data_and_errors_in_chunks() {
    let server = TestServer::default_two_loops();
    let mut client = RawClient::connect(server.socket());
    client.greet();
    client.option(OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(client.option_reply().0, REP_ACK);
    client.go();
    client.request(CMD_WRITE, 1, 4096, 512, &[7; 512]);
    assert_eq!(client.simple_reply(0), (0, 1, vec![]));
    client.request(CMD_READ, 2, 4096, 512, &[]);
    let mut bytes = vec![0; ChunkHeader::LEN + 8 + 512];
    client.stream.read_exact(&mut bytes).unwrap();
    let header = ChunkHeader::decode(&bytes).unwrap();
    assert!(header.is_done());
    assert_eq!(header.cookie, 2);
    assert_eq!(
        Chunk::decode(&header, &bytes[ChunkHeader::LEN..]).unwrap(),
        Chunk::OffsetData {
            offset: 4096,
            data: &[7; 512]
        }
    );
    client.request(CMD_READ, 3, MAP_BYTES, 512, &[]);
    let mut bytes = vec![0; ChunkHeader::LEN + 6];
    client.stream.read_exact(&mut bytes).unwrap();
    let header = ChunkHeader::decode(&bytes).unwrap();
    assert_eq!(
        Chunk::decode(&header, &bytes[ChunkHeader::LEN..]).unwrap(),
        Chunk::Error {
            error: EINVAL,
            message: "",
            offset: None
        }
    );
}

#[test]
fn requests_in_flight_complete_out_of_order() {
    let server = TestServer::start(ServerConfig {
        loops: 1,
        ..ServerConfig::default()
    });
    // Round-robin alternates a slow and a fast port: replies overtake.
    server
        .transports
        .port("disk", "a")
        .set_latency_ns(20_000_000);
    let mut client = RawClient::ready(server.socket());
    let count = 64;
    for cookie in 0..count {
        client.request(CMD_READ, cookie, cookie * 4096, 4096, &[]);
    }
    let cookies: Vec<u64> = (0..count).map(|_| client.simple_reply(4096).1).collect();
    let mut sorted = cookies.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..count).collect::<Vec<_>>(), "every reply once");
    assert_ne!(cookies, sorted, "replies came back in request order");
}

#[test]
fn bad_handshakes_are_refused_and_the_server_serves_on() {
    let server = TestServer::default_two_loops();
    // Unknown option: ERR_UNSUP, and the session goes on.
    let mut client = RawClient::connect(server.socket());
    client.greet();
    client.option(4242, b"payload");
    assert_eq!(client.option_reply().0, REP_ERR_UNSUP);
    client.go();
    client.request(CMD_READ, 1, 0, 512, &[]);
    assert_eq!(client.simple_reply(512).0, 0);
    // Wrong option magic: closed.
    let mut client = RawClient::connect(server.socket());
    client.greet();
    client.send(&[0xff; 16]);
    assert!(client.closed_by_server());
    // Client flags without fixed newstyle: closed.
    let mut client = RawClient::connect(server.socket());
    let mut greeting = [0; 18];
    client.stream.read_exact(&mut greeting).unwrap();
    client.send(&0u32.to_be_bytes());
    assert!(client.closed_by_server());
    // EXPORT_NAME of an unknown export: closed.
    let mut client = RawClient::connect(server.socket());
    client.greet();
    client.option(OPT_EXPORT_NAME, b"nope");
    assert!(client.closed_by_server());
    // ABORT: acknowledged, then closed.
    let mut client = RawClient::connect(server.socket());
    client.greet();
    client.option(OPT_ABORT, &[]);
    assert_eq!(client.option_reply().0, REP_ACK);
    assert!(client.closed_by_server());
    wait_until("three protocol errors", || {
        server.server.stats().protocol_errors == 3
    });
    still_serves(server.socket());
}

#[test]
fn bad_requests_get_errors_and_the_connection_serves_on() {
    let server = TestServer::default_two_loops();
    let mut client = RawClient::ready(server.socket());
    let before = port_completions(&server);
    let cases = [
        (CMD_READ, MAP_BYTES - 512, 1024, EINVAL),
        (CMD_READ, 0, (32 << 20) + 1, EINVAL),
        (CMD_TRIM, u64::MAX - 1, 4096, ENOSPC),
        (99, 0, 0, EINVAL),
        (CMD_FLUSH, 0, 512, EINVAL),
    ];
    for (cookie, (command, offset, length, error)) in cases.into_iter().enumerate() {
        client.request(command, cookie as u64, offset, length, &[]);
        assert_eq!(client.simple_reply(0), (error, cookie as u64, vec![]));
    }
    // A write beyond the end: its payload is read and dropped, then the
    // next request on the connection is served.
    client.request(CMD_WRITE, 10, MAP_BYTES, 4096, &[1; 4096]);
    assert_eq!(client.simple_reply(0), (ENOSPC, 10, vec![]));
    assert_eq!(
        port_completions(&server),
        before,
        "a refused request reached a path"
    );
    client.request(CMD_READ, 11, 0, 512, &[]);
    assert_eq!(client.simple_reply(512).0, 0);
    assert_eq!(server.server.stats().requests_refused, 6);

    let read_only = TestServer::start(ServerConfig {
        read_only: true,
        loops: 1,
        ..ServerConfig::default()
    });
    let mut client = RawClient::ready(read_only.socket());
    client.request(CMD_WRITE, 1, 0, 4096, &[1; 4096]);
    assert_eq!(client.simple_reply(0), (EPERM, 1, vec![]));
    client.request(CMD_WRITE_ZEROES, 2, 0, 4096, &[]);
    assert_eq!(client.simple_reply(0), (EPERM, 2, vec![]));
    client.request(CMD_READ, 3, 0, 4096, &[]);
    assert_eq!(client.simple_reply(4096).0, 0);
}

#[test]
fn protocol_breaks_in_transmission_close_the_connection() {
    let server = TestServer::default_two_loops();
    // A WRITE above 32 MiB: closed without its payload being read.
    let mut client = RawClient::ready(server.socket());
    client.request(CMD_WRITE, 1, 0, 64 << 20, &[]);
    assert!(client.closed_by_server());
    // A wrong request magic.
    let mut client = RawClient::ready(server.socket());
    client.send(&[0xee; 28]);
    assert!(client.closed_by_server());
    // A truncated request: half a header, then the client's side closes.
    let mut client = RawClient::ready(server.socket());
    client.send(&[0x25, 0x60, 0x95, 0x13, 0, 0, 0, 0, 0, 0]);
    client.stream.shutdown(Shutdown::Write).unwrap();
    assert!(client.closed_by_server());
    // A truncated write payload.
    let mut client = RawClient::ready(server.socket());
    client.request(CMD_WRITE, 2, 0, 4096, &[0; 100]);
    client.stream.shutdown(Shutdown::Write).unwrap();
    assert!(client.closed_by_server());
    wait_until("four protocol errors", || {
        server.server.stats().protocol_errors == 4
    });
    still_serves(server.socket());
}

#[test]
fn a_client_vanishing_mid_request_leaves_the_server_healthy() {
    let server = TestServer::default_two_loops();
    // Hung paths keep the requests in flight when the clients go.
    let ports = ["a", "b"].map(|port| server.transports.port("disk", port));
    ports.iter().for_each(|port| port.hang());
    let in_flight = |path: usize| server.device.map().path_load(path).in_flight();
    for _ in 0..4 {
        let before = [in_flight(0), in_flight(1)];
        let mut client = RawClient::ready(server.socket());
        for cookie in 0..16 {
            client.request(CMD_WRITE, cookie, cookie * 65536, 65536, &[9; 65536]);
            client.request(CMD_READ, cookie, cookie * 65536, 65536, &[]);
        }
        wait_until("the client's requests to reach both paths", || {
            in_flight(0) > before[0] && in_flight(1) > before[1]
        });
        drop(client);
    }
    // Path a answers: each server connection finds its client gone as it
    // writes a reply, and closes with requests still held on path b...
    ports[0].heal();
    wait_until("the vanished clients' connections to close", || {
        server.server.open_connections() == 0
    });
    // ... whose replies, once b answers, have nowhere to go.
    ports[1].heal();
    wait_until("their in-flight replies to be dropped", || {
        server.server.stats().replies_dropped > 0
    });
    still_serves(server.socket());
}

#[test]
fn a_flood_of_connections_is_capped() {
    let server = TestServer::start(ServerConfig {
        loops: 2,
        max_connections: 4,
        // The cap alone: the held clients, idle, are never replaced
        // (see `bounds.rs` for that), however slow the machine.
        evict_idle_ms: 600_000,
        ..ServerConfig::default()
    });
    let mut held: Vec<RawClient> = (0..4)
        .map(|_| {
            let mut client = RawClient::connect(server.socket());
            client.greet();
            client
        })
        .collect();
    for _ in 0..6 {
        let mut refused = RawClient::connect(server.socket());
        assert!(refused.closed_by_server(), "a connection past the cap");
    }
    assert_eq!(server.server.stats().connections_refused, 6);
    // The held connections still work.
    held[0].go();
    held[0].request(CMD_READ, 1, 0, 512, &[]);
    assert_eq!(held[0].simple_reply(512).0, 0);
    held.clear();
    wait_until("the held connections to close", || {
        server.server.open_connections() == 0
    });
    still_serves(server.socket());
}

#[test]
fn a_client_idle_in_the_handshake_is_disconnected() {
    // Long enough for any handshake on a busy machine: the test waits
    // it out once.
    let server = TestServer::start(ServerConfig {
        loops: 1,
        handshake_timeout_ms: 10_000,
        ..ServerConfig::default()
    });
    // A client that finishes its handshake in time...
    let mut client = RawClient::ready(server.socket());
    let mut idle = RawClient::connect(server.socket());
    idle.greet();
    // ... while this one never chooses an export: it is closed after the
    // timeout, which by then has passed for the first one too.
    assert!(idle.closed_by_server());
    wait_until("the idle connection to count as an error", || {
        server.server.stats().protocol_errors == 1
    });
    // The first keeps its connection past the timeout.
    client.request(CMD_READ, 1, 0, 512, &[]);
    assert_eq!(client.simple_reply(512).0, 0);
}

#[test]
fn a_grown_map_is_told_to_new_connections_only() {
    let server = TestServer::on_disk(ServerConfig::default(), 2 * MAP_BYTES);
    let mut before = RawClient::ready(server.socket());
    // What a resize does: the larger table installed under the export,
    // which a reload refuses.
    let table = mpio_core::table::Table::parse(&table_text("disk").replacen(
        &(MAP_BYTES / 512).to_string(),
        &(2 * MAP_BYTES / 512).to_string(),
        1,
    ))
    .unwrap();
    assert!(server.server.check_size(&table).is_err());
    server.transports.reload(&server.device, &table).unwrap();
    server.server.notice_reload();
    assert!(server.server.check_size(&table).is_ok());
    let mut after = RawClient::ready(server.socket());
    // Past the old end: the client told the old size is refused, the one
    // told the new size is served.
    before.request(CMD_READ, 1, MAP_BYTES, 4096, &[]);
    assert_eq!(before.simple_reply(0), (EINVAL, 1, vec![]));
    after.request(CMD_READ, 2, MAP_BYTES, 4096, &[]);
    assert_eq!(after.simple_reply(4096), (0, 2, vec![0; 4096]));
    after.request(CMD_READ, 3, 2 * MAP_BYTES, 4096, &[]);
    assert_eq!(after.simple_reply(0), (EINVAL, 3, vec![]));
}
