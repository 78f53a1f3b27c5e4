//! A loop kept off the CPU past the handshake deadline (a stalled host)
//! drops no handshake: when it turns again it first reads what its
//! clients sent meanwhile. Clients stand at every stage of the handshake
//! when the loop is held, more connect while it is held, and the map is
//! reloaded all along; every one of them then finishes its handshake and
//! an I/O. The deadline itself still holds for a client that says
//! nothing while the loop turns (`protocol.rs`).

mod support;

use mpio_core::map::MapOptions;
use mpio_core::table::Table;
use mpio_nbd::consts::{CMD_READ, CMD_WRITE, OPT_STRUCTURED_REPLY, REP_ACK};
use mpio_server::{Engine, EngineConfig, Server, ServerConfig};
use mpio_transport::Transports;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use support::*;

const BLOCK: usize = 4096;
/// The handshake deadline: the loop is held past it.
const DEADLINE: Duration = Duration::from_secs(2);

/// How far a client got in its handshake before the loop was held.
#[derive(Clone, Copy, Debug)]
enum Stage {
    /// Connected; the greeting maybe not yet sent.
    Connected,
    /// Read the greeting and sent its flags.
    Greeted,
    /// Also negotiated structured replies (an option answered).
    Negotiated,
}

/// A client brought to `stage`, the rest of its session to run when
/// `held` is over: the handshake's end, a write and its read-back of
/// block `index`.
fn client(socket: &Path, index: u64, stage: Stage) -> (RawClient, u64) {
    let mut client = RawClient::connect(socket);
    if !matches!(stage, Stage::Connected) {
        client.greet();
    }
    if matches!(stage, Stage::Negotiated) {
        client.option(OPT_STRUCTURED_REPLY, &[]);
        assert_eq!(client.option_reply().0, REP_ACK);
    }
    (client, index)
}

/// The rest of the session of a client at `stage`, on a thread of its
/// own (a dropped handshake panics it).
fn finish(mut client: RawClient, index: u64, stage: Stage) -> JoinHandle<()> {
    std::thread::spawn(move || {
        if matches!(stage, Stage::Connected) {
            client.greet();
        }
        client.go();
        let offset = index * BLOCK as u64;
        let fill = index as u8 | 0x80;
        client.request(CMD_WRITE, 1, offset, BLOCK as u32, &vec![fill; BLOCK]);
        // Structured replies answer a write with a simple reply too.
        assert_eq!(client.simple_reply(0).0, 0, "write of block {index}");
        if !matches!(stage, Stage::Negotiated) {
            client.request(CMD_READ, 2, offset, BLOCK as u32, &[]);
            let (error, _, data) = client.simple_reply(BLOCK);
            assert_eq!(error, 0, "read of block {index}");
            assert!(data.iter().all(|&byte| byte == fill), "block {index}");
        }
    })
}

#[test]
fn a_loop_held_past_the_handshake_deadline_while_the_map_reloads_drops_no_handshake() {
    mpio_test_support::log_to_test_output();
    let (engine, loops) = Engine::start_hosted(&EngineConfig::default(), &[0]).unwrap();
    let gate = Arc::new(Mutex::new(()));
    let hosts: Vec<_> = loops
        .into_iter()
        .map(|hosted| {
            let gate = Arc::clone(&gate);
            std::thread::spawn(move || host(hosted, &gate))
        })
        .collect();

    let dir = TempDir::new("held-loop");
    let transports = Arc::new(Transports::new());
    let table = Table::parse(&table_text("disk")).unwrap();
    let device = transports.build(&table, MapOptions::default()).unwrap();
    let config = ServerConfig {
        unix_socket: Some(dir.join("nbd.sock")),
        handshake_timeout_ms: DEADLINE.as_millis() as u64,
        ..ServerConfig::default()
    };
    let server = Arc::new(Server::start_on(&engine, &config, device.into_slot()).unwrap());
    let socket: PathBuf = server.unix_socket().unwrap().to_path_buf();

    // Reloads beside everything below, the held loop included.
    let reloading = Arc::new(AtomicBool::new(true));
    let reloader = {
        let (server, transports, reloading) = (
            Arc::clone(&server),
            Arc::clone(&transports),
            Arc::clone(&reloading),
        );
        std::thread::spawn(move || {
            let mut reloads = 0u64;
            // Relaxed: a stop flag; the join below orders the rest.
            while reloading.load(Ordering::Relaxed) {
                server.reload(&transports, &table).unwrap();
                reloads += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            reloads
        })
    };

    let stages = [Stage::Connected, Stage::Greeted, Stage::Negotiated];
    let mut clients: Vec<(RawClient, u64, Stage)> = (0..12)
        .map(|index| {
            let stage = stages[index as usize % stages.len()];
            let (client, index) = client(&socket, index, stage);
            (client, index, stage)
        })
        .collect();

    // Held between two turns, past the deadline of every handshake
    // above; four more clients connect meanwhile.
    let held = gate.lock().unwrap();
    let held_at = Instant::now();
    for index in 12..16 {
        clients.push((RawClient::connect(&socket), index, Stage::Connected));
    }
    while held_at.elapsed() < DEADLINE + Duration::from_millis(500) {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(held);

    let sessions: Vec<_> = clients
        .into_iter()
        .map(|(client, index, stage)| finish(client, index, stage))
        .collect();
    let total = sessions.len();
    let dropped = sessions
        .into_iter()
        .filter_map(|session| session.join().err())
        .count();
    reloading.store(false, Ordering::Relaxed);
    let reloads = reloader.join().unwrap();
    assert!(reloads > 0, "no reload ran beside the handshakes");
    assert_eq!(dropped, 0, "{dropped} of {total} handshakes dropped");
    let stats = server.stats();
    assert_eq!(stats.protocol_errors, 0, "{stats:?}");

    drop(server);
    drop(engine);
    for host in hosts {
        host.join().unwrap();
    }
}
