//! The shutdown's flush, as a real path's server sees it: mpio exports a
//! map whose path is `nbdkit memory` behind its `delay` filter (each write
//! takes 300 ms) and `log` filter. Writes in flight when the shutdown
//! starts are answered, and nbdkit's log shows the FLUSH arriving only
//! after every write returned.

mod support;

use mpio_core::map::MapOptions;
use mpio_core::table::Table;
use mpio_nbd::consts::CMD_WRITE;
use mpio_server::{FlushOutcome, Server, ServerConfig};
use mpio_transport::Transports;
use std::path::Path;
use support::*;

#[test]
fn the_flush_reaches_the_server_after_every_write_returned() {
    let dir = TempDir::new("serve");
    let log = dir.join("nbdkit.log");
    let backend = dir.join("backend.sock");
    let log_arg = format!("logfile={}", log.display());
    let nbdkit = NbdServer::nbdkit(
        &backend,
        &[
            "--filter=log",
            "--filter=delay",
            "memory",
            "1M",
            &log_arg,
            "wdelay=300ms",
        ],
    );
    let table = Table::parse(&format!(
        "0 2048 multipath 0 0 1 1 round-robin 0 1 1 nbd+unix:///?socket={} 1",
        backend.display()
    ))
    .unwrap();
    let device = Transports::new()
        .build(&table, MapOptions::default())
        .unwrap();
    let server = Server::start(
        &ServerConfig {
            unix_socket: Some(dir.join("mpio.sock")),
            loops: 1,
            ..ServerConfig::default()
        },
        device.into_slot(),
    )
    .unwrap();
    let mut client = RawClient::ready(server.unix_socket().unwrap());
    let count = 8u64;
    for cookie in 0..count {
        client.request(
            CMD_WRITE,
            cookie,
            cookie * 4096,
            4096,
            &[cookie as u8; 4096],
        );
    }
    // The writes are at nbdkit (in its delay) when the shutdown starts.
    wait_until("the writes reach nbdkit", || {
        lines(&log, " Write id=").len() >= count as usize
    });
    let shutdown = std::thread::spawn(move || server.shutdown(HANG_BOUND));
    for _ in 0..count {
        assert_eq!(client.simple_reply(0).0, 0);
    }
    let report = shutdown.join().unwrap();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.flush, FlushOutcome::Done);
    drop(nbdkit);
    let text = std::fs::read_to_string(&log).unwrap();
    let all: Vec<&str> = text.lines().collect();
    let last_write_return = all
        .iter()
        .rposition(|line| line.contains("...Write id="))
        .expect("writes returned");
    let first_flush = all
        .iter()
        .position(|line| line.contains(" Flush id="))
        .unwrap_or_else(|| panic!("no FLUSH reached nbdkit:\n{text}"));
    assert!(
        first_flush > last_write_return,
        "the FLUSH reached nbdkit before the last write returned:\n{text}"
    );
    assert_eq!(
        all.iter()
            .filter(|line| line.contains(" Write id="))
            .count(),
        count as usize,
        "{text}"
    );
}

/// The lines of nbdkit's log containing `what` (" Write id=" starts a
/// request; its end reads "...Write id=").
fn lines(log: &Path, what: &str) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains(what))
        .map(str::to_string)
        .collect()
}
