//! The server serves a reloadable device: clients write and verify while
//! the map under them is reloaded hundreds of times, with another
//! selector each time and with paths added and removed, and see no error
//! and no wrong byte (our raw client, and fio with crc32c verification);
//! the reloads reach the loops (the added path carries I/O). A table of
//! another size is refused and the map stays.

mod support;

use mpio_core::table::Table;
use mpio_nbd::consts::{CMD_READ, CMD_WRITE};
use mpio_server::{ReloadError, ServerConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

const BLOCK: usize = 4096;
/// Requests in flight per batch.
const DEPTH: u64 = 32;

/// The tables the reload thread cycles through: another selector each
/// time, path `d` added in the third, `a` and `d` removed in the fourth.
fn tables() -> Vec<Table> {
    let sectors = MAP_BYTES / 512;
    [
        table_text("disk"),
        format!(
            "0 {sectors} multipath 0 0 2 1 queue-length 0 2 1 memory:disk#a 1 memory:disk#b 1 \
             round-robin 0 1 1 memory:disk#c 1"
        ),
        format!(
            "0 {sectors} multipath 0 0 2 1 service-time 0 3 2 memory:disk#a 1 1 memory:disk#b 1 1 \
             memory:disk#d 1 1 round-robin 0 1 1 memory:disk#c 1"
        ),
        format!(
            "0 {sectors} multipath 0 0 2 1 round-robin 0 1 1 memory:disk#b 1 \
             queue-length 0 1 1 memory:disk#c 1"
        ),
    ]
    .iter()
    .map(|text| Table::parse(text).unwrap())
    .collect()
}

/// The byte block `index` holds after round `round`.
fn fill(round: u64, index: u64) -> u8 {
    (round.wrapping_mul(31) ^ index.wrapping_mul(7)) as u8 | 1
}

/// One round: `DEPTH` writes pipelined, their replies, then `DEPTH` reads
/// of the same blocks pipelined and checked. Returns the errors seen.
fn round(client: &mut RawClient, round: u64) -> u64 {
    let blocks = MAP_BYTES / BLOCK as u64;
    let index = |slot: u64| (round * DEPTH + slot) * 97 % blocks;
    let mut errors = 0;
    for slot in 0..DEPTH {
        let data = vec![fill(round, index(slot)); BLOCK];
        client.request(
            CMD_WRITE,
            slot,
            index(slot) * BLOCK as u64,
            BLOCK as u32,
            &data,
        );
    }
    for _ in 0..DEPTH {
        let (error, _, _) = client.simple_reply(0);
        errors += u64::from(error != 0);
    }
    for slot in 0..DEPTH {
        client.request(
            CMD_READ,
            slot,
            index(slot) * BLOCK as u64,
            BLOCK as u32,
            &[],
        );
    }
    for _ in 0..DEPTH {
        let (error, cookie, data) = client.simple_reply(BLOCK);
        if error != 0 {
            errors += 1;
            continue;
        }
        let want = fill(round, index(cookie));
        if let Some(at) = data.iter().position(|byte| *byte != want) {
            panic!(
                "round {round}: block {} byte {at} reads {:#x}, wrote {want:#x}",
                index(cookie),
                data[at]
            );
        }
    }
    errors
}

#[test]
fn a_client_writes_and_verifies_while_the_map_is_reloaded() {
    let server = TestServer::default_two_loops();
    let tables = tables();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..2)
        .map(|client| {
            let socket = server.socket().to_path_buf();
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut raw = RawClient::ready(&socket);
                let (mut rounds, mut errors) = (0u64, 0u64);
                // Relaxed: a flag polled between rounds; no data rides on it.
                while !stop.load(Ordering::Relaxed) {
                    // The clients write disjoint rounds (even and odd).
                    errors += round(&mut raw, rounds * 2 + client);
                    rounds += 1;
                }
                (rounds, errors)
            })
        })
        .collect();
    let started = Instant::now();
    let mut reloads = 0;
    while reloads < 400 || started.elapsed() < Duration::from_secs(2) {
        let table = &tables[(reloads + 1) % tables.len()];
        server.server.reload(&server.transports, table).unwrap();
        reloads += 1;
        std::thread::sleep(Duration::from_micros(500));
        assert!(started.elapsed() < TIMEOUT, "reloads too slow");
    }
    stop.store(true, Ordering::Relaxed);
    let (mut rounds, mut errors) = (0, 0);
    for client in clients {
        let (client_rounds, client_errors) = client.join().unwrap();
        rounds += client_rounds;
        errors += client_errors;
    }
    eprintln!("{reloads} reloads under {rounds} rounds of {DEPTH} writes + {DEPTH} reads");
    assert_eq!(errors, 0, "{errors} I/O errors in {rounds} rounds");
    assert!(rounds >= 10, "only {rounds} rounds ran under the reloads");
    // The path only the third table has carried I/O: the loops followed.
    let added = server.transports.port("disk", "d").completed();
    assert!(added > 0, "path d (added by a reload) carried no I/O");
    still_serves(server.socket());
}

#[test]
fn fio_verifies_while_the_map_is_reloaded() {
    require("fio", "fio");
    let server = TestServer::default_two_loops();
    let tables = tables();
    let uri = server.uri();
    let fio = std::thread::spawn(move || fio_verify(&uri));
    let mut reloads = 0;
    while !fio.is_finished() {
        let table = &tables[(reloads + 1) % tables.len()];
        server.server.reload(&server.transports, table).unwrap();
        reloads += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    // fio's own assertions (zero errors in every job) run in its thread.
    fio.join().unwrap();
    eprintln!("{reloads} reloads under fio");
    assert!(reloads >= 20, "only {reloads} reloads while fio ran");
}

#[test]
fn an_idle_loop_moves_to_the_new_map_at_once() {
    let server = TestServer::start(ServerConfig {
        loops: 1,
        ..ServerConfig::default()
    });
    let old = Arc::clone(&server.map);
    let tables = tables();
    server
        .server
        .reload(&server.transports, &tables[1])
        .unwrap();
    // The loop was woken and dropped its queue on the old map, so the
    // old map's last holder is this test (and the replaced map returned
    // by reload, dropped already).
    let started = Instant::now();
    while Arc::strong_count(&old) > 2 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "an idle loop still holds the replaced map"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_table_of_another_size_is_refused_and_the_map_stays() {
    let server = TestServer::default_two_loops();
    let table = Table::parse("0 2048 multipath 0 0 1 1 round-robin 0 1 1 memory:disk#a 1").unwrap();
    let error = server
        .server
        .reload(&server.transports, &table)
        .unwrap_err();
    assert!(
        matches!(error, ReloadError::Size { .. }),
        "{error}: not a size refusal"
    );
    assert!(error.to_string().contains("cannot resize"), "{error}");
    assert!(Arc::ptr_eq(&server.device.map(), &server.map));
    still_serves(server.socket());
}
