//! What the whole server holds under hostile clients, measured as the
//! process's resident memory: each test here measures alone (one lock),
//! and no other test shares this binary, so nothing else grows the
//! process meanwhile.

mod support;

use mpio_nbd::consts::*;
use mpio_server::ServerConfig;
use std::sync::Mutex;
use support::*;

/// Held by each test while it measures.
static MEASURING: Mutex<()> = Mutex::new(());

/// The process's resident memory in bytes.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// 128 connections pipelining large reads whose replies they never read
/// once made the server hold 64 MiB each. With a budget of 64 MiB the
/// server holds at most that beyond each connection's first small
/// request, and a client that waits for each reply keeps working.
#[test]
fn hostile_connections_stay_within_the_budget_beside_a_working_client() {
    const BUDGET: usize = 64 << 20;
    const READ: u32 = 4 << 20;
    let _alone = MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let server = TestServer::start(ServerConfig {
        loops: 2,
        max_connections: 200,
        max_buffered_bytes: BUDGET,
        ..ServerConfig::default()
    });
    let before = resident_bytes();
    let mut hostile: Vec<RawClient> = (0..128)
        .map(|_| RawClient::ready(server.socket()))
        .collect();
    for client in &mut hostile {
        for cookie in 0..4 {
            client.request(CMD_READ, cookie, cookie * u64::from(READ), READ, &[]);
        }
    }
    // The budget fills (16 reads of 4 MiB) and the other 496 wait.
    wait_until("the budget fills", || {
        server.server.buffered_bytes() >= BUDGET
    });
    let mut honest = RawClient::ready(server.socket());
    let data = vec![0x6b; 4096];
    for round in 0..50u64 {
        honest.request(CMD_WRITE, round, round * 4096, 4096, &data);
        assert_eq!(honest.simple_reply(0).0, 0, "write {round}");
        honest.request(CMD_READ, round, round * 4096, 4096, &[]);
        let (error, _, read) = honest.simple_reply(4096);
        assert_eq!((error, read), (0, data.clone()), "read {round}");
        assert!(server.server.buffered_bytes() <= BUDGET);
    }
    let grown = resident_bytes().saturating_sub(before);
    // The budget, the first requests (4 MiB reads are not small: none),
    // spare buffers and socket buffers; without the budget these clients
    // would have their 2 GiB of reads buffered.
    assert!(
        grown < 512 << 20,
        "the server grew by {grown} bytes under a {BUDGET}-byte budget"
    );
    drop(hostile);
    wait_until("the budget is given back", || {
        server.server.buffered_bytes() == 0
    });
}

/// A 32 MiB WRITE header alone commits no zeroed 32 MiB buffer: the
/// buffer grows with the payload as it arrives.
#[test]
fn a_write_header_alone_commits_no_large_buffer() {
    const LENGTH: u32 = 32 << 20;
    const CLIENTS: usize = 16;
    let _alone = MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let server = TestServer::start(ServerConfig {
        loops: 1,
        max_buffered_bytes: 1 << 30,
        ..ServerConfig::default()
    });
    let mut clients: Vec<RawClient> = (0..CLIENTS)
        .map(|_| RawClient::ready(server.socket()))
        .collect();
    let before = resident_bytes();
    for client in &mut clients {
        // The header and one byte of its payload.
        client.request(CMD_WRITE, 1, 0, LENGTH, &[0x11]);
    }
    wait_until("the headers are read", || {
        server.server.buffered_bytes() >= CLIENTS * LENGTH as usize
    });
    let grown = resident_bytes().saturating_sub(before);
    assert!(
        grown < 128 << 20,
        "{CLIENTS} write headers of {LENGTH} bytes made the server grow by {grown} bytes"
    );
    // The payload still lands whole.
    let payload = vec![0x11; LENGTH as usize - 1];
    clients[0].send(&payload);
    assert_eq!(clients[0].simple_reply(0), (0, 1, Vec::new()));
    clients[0].request(CMD_READ, 2, u64::from(LENGTH) - 4096, 4096, &[]);
    assert_eq!(clients[0].simple_reply(4096).2, vec![0x11; 4096]);
}
