//! One client that stops reading its replies must not stop the
//! shutdown's FLUSH from covering the writes already acknowledged to every
//! other client. The map holds no I/O (every request completed); only the
//! replies to the stuck reader are unsent: the flush must still go out.

mod support;

use mpio_nbd::consts::{CMD_READ, CMD_WRITE};
use mpio_server::{FlushOutcome, ServerConfig};
use support::*;

const BLOCK: usize = 4096;

#[test]
fn a_stuck_reader_does_not_cancel_the_flush_of_acknowledged_writes() {
    let TestServer {
        server,
        transports,
        device,
        dir: _dir,
        ..
    } = TestServer::start(ServerConfig {
        loops: 1,
        ..ServerConfig::default()
    });
    let socket = server.unix_socket().unwrap().to_path_buf();
    // A healthy client writes and is acknowledged.
    let mut writer = RawClient::ready(&socket);
    for cookie in 0..4u64 {
        writer.request(
            CMD_WRITE,
            cookie,
            cookie * BLOCK as u64,
            BLOCK as u32,
            &vec![7; BLOCK],
        );
    }
    for _ in 0..4 {
        assert_eq!(writer.simple_reply(0).0, 0);
    }
    // A client that asks for a lot and reads none of it.
    let mut stuck = RawClient::ready(&socket);
    for cookie in 0..64u64 {
        stuck.request(CMD_READ, cookie, 0, 1 << 20, &[]);
    }
    // Wait until the map holds nothing: every request completed there.
    wait_until("every request completes at the map", || {
        let map = device.map();
        let in_flight: u32 = (0..map.paths().len())
            .map(|p| map.path_load(p).in_flight())
            .sum();
        let dispatched: u64 = (0..map.paths().len())
            .map(|p| map.path_load(p).dispatched())
            .sum();
        in_flight == 0 && dispatched >= 4 + 64
    });
    let completed = || -> u64 {
        ["a", "b", "c"]
            .iter()
            .map(|p| transports.port("disk", p).completed())
            .sum()
    };
    let before = completed();
    // The drain cannot end while the stuck reader's replies stay unsent:
    // the flush must go out all the same. Once it has, the stuck client
    // goes and the drain ends (a flush that waited for the replies would
    // never come, and the wait below would fail at its bound).
    let shutdown = std::thread::spawn(move || server.shutdown(HANG_BOUND));
    wait_until("the shutdown's flush reaches a path", || {
        completed() > before
    });
    drop(stuck);
    let report = shutdown.join().unwrap();
    eprintln!("{report}");
    let after = completed();
    assert_eq!(report.io_left_at_map, 0, "{report}");
    assert!(
        report.flush == FlushOutcome::Done && after > before,
        "the acknowledged writes were never flushed: {report}"
    );
}
