//! One engine serves many exports: starting fifty exports on it starts no
//! thread, each export reads back its own map's data (not another's),
//! one export shuts down cleanly while another keeps serving, a reload of
//! one moves only that one, and the threads end with the engine.
//!
//! This binary holds one test: it counts the process's threads by name.

mod support;

use mpio_core::map::MapOptions;
use mpio_core::table::Table;
use mpio_nbd::consts::{CMD_READ, CMD_WRITE};
use mpio_server::{Engine, EngineConfig, Server, ServerConfig};
use mpio_transport::Transports;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

const EXPORTS: usize = 50;
const BLOCK: usize = 4096;

/// Threads of this process whose name starts with `mpio-serve`.
fn serve_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter(|task| {
            let comm = task.as_ref().unwrap().path().join("comm");
            std::fs::read_to_string(comm).is_ok_and(|name| name.starts_with("mpio-serve"))
        })
        .count()
}

/// Waits (bounded) until `serve_threads` is `count`.
fn wait_for_serve_threads(count: usize) {
    let give_up = Instant::now() + TIMEOUT;
    while serve_threads() != count {
        assert!(
            Instant::now() < give_up,
            "{} serve threads, not {count}",
            serve_threads()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Panics unless `data` is one block of `fill` bytes.
fn assert_filled(data: &[u8], fill: u8, what: &str) {
    assert!(
        data.len() == BLOCK && data.iter().all(|&byte| byte == fill),
        "{what}: read {} bytes starting {:?}, not {BLOCK} of {fill}",
        data.len(),
        data.first()
    );
}

/// Writes `fill` into block 0 and reads it back.
fn write_and_read(client: &mut RawClient, fill: u8) -> Vec<u8> {
    client.request(CMD_WRITE, 1, 0, BLOCK as u32, &vec![fill; BLOCK]);
    let (error, cookie, _) = client.simple_reply(0);
    assert_eq!((error, cookie), (0, 1), "write");
    client.request(CMD_READ, 2, 0, BLOCK as u32, &[]);
    let (error, cookie, data) = client.simple_reply(BLOCK);
    assert_eq!((error, cookie), (0, 2), "read");
    data
}

#[test]
fn many_exports_share_one_engine() {
    assert_eq!(serve_threads(), 0);
    let engine = Engine::start(&EngineConfig {
        loops: 2,
        ..EngineConfig::default()
    })
    .unwrap();
    assert_eq!(engine.thread_count(), 3);
    wait_for_serve_threads(3);
    let dir = TempDir::new("engine");
    let transports = Transports::new();
    let servers: Vec<Server> = (0..EXPORTS)
        .map(|index| {
            let table = Table::parse(&table_text(&format!("disk{index}"))).unwrap();
            let device = transports.build(&table, MapOptions::default()).unwrap();
            let config = ServerConfig {
                unix_socket: Some(dir.join(&format!("{index}.sock"))),
                ..ServerConfig::default()
            };
            Server::start_on(&engine, &config, device.into_slot()).unwrap()
        })
        .collect();
    assert_eq!(serve_threads(), 3, "exports started threads");

    // Each export serves its own map: two clients per export land on both
    // loops, and every export reads back what was written to it.
    let mut clients: Vec<[RawClient; 2]> = servers
        .iter()
        .map(|server| {
            let socket = server.unix_socket().unwrap();
            [RawClient::ready(socket), RawClient::ready(socket)]
        })
        .collect();
    for (index, pair) in clients.iter_mut().enumerate() {
        for (which, client) in pair.iter_mut().enumerate() {
            let fill = (index * 2 + which) as u8;
            assert_filled(&write_and_read(client, fill), fill, "written");
        }
    }
    for (index, pair) in clients.iter_mut().enumerate() {
        pair[0].request(CMD_READ, 3, 0, BLOCK as u32, &[]);
        let (_, _, data) = pair[0].simple_reply(BLOCK);
        assert_filled(&data, (index * 2 + 1) as u8, &format!("export {index}"));
    }

    // A reload of export 1 moves export 1 only.
    let before: Vec<_> = servers.iter().map(|server| server.device().map()).collect();
    let table = Table::parse(&table_text("disk1")).unwrap();
    servers[1].reload(&transports, &table).unwrap();
    for (index, server) in servers.iter().enumerate() {
        let moved = !Arc::ptr_eq(&server.device().map(), &before[index]);
        assert_eq!(moved, index == 1, "export {index}");
    }
    assert_filled(&write_and_read(&mut clients[1][0], 0xa1), 0xa1, "reloaded");

    // Export 0 shuts down cleanly (its clients see their connections
    // end) while export 2 serves on.
    let mut servers = servers.into_iter();
    let first = servers.next().unwrap();
    let socket = first.unix_socket().unwrap().to_path_buf();
    let report = first.shutdown(TIMEOUT);
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.connections_closed, 2, "{report}");
    assert!(!socket.exists(), "export 0's socket left behind");
    assert!(clients[0][0].closed_by_server());
    assert_filled(
        &write_and_read(&mut clients[2][1], 0xc2),
        0xc2,
        "after a shutdown",
    );
    assert_eq!(serve_threads(), 3);

    // The threads end with the engine's last holder.
    drop(clients);
    drop(servers);
    drop(engine);
    wait_for_serve_threads(0);
}
