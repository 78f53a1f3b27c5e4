//! The server serves a reloadable device: clients write and verify while
//! the map under them is reloaded hundreds of times, with another
//! selector each time and with paths added and removed, and see no error
//! and no wrong byte (our raw client, and fio with crc32c verification);
//! the reloads reach the loops (the added path carries I/O); clients that
//! connect, do one I/O and leave, over and over, never have a handshake
//! dropped. A table of another size is refused and the map stays.

mod support;

use mpio_core::table::Table;
use mpio_nbd::consts::*;
use mpio_nbd::handshake::{GoRequest, OptionHeader, OptionReplyHeader};
use mpio_nbd::reply::SimpleReply;
use mpio_nbd::request::Request;
use mpio_server::{ReloadError, ServerConfig};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    let done_rounds = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..2)
        .map(|client| {
            let socket = server.socket().to_path_buf();
            let stop = Arc::clone(&stop);
            let done_rounds = Arc::clone(&done_rounds);
            std::thread::spawn(move || {
                let mut raw = RawClient::ready(&socket);
                let (mut rounds, mut errors) = (0u64, 0u64);
                // Relaxed: a flag and a count polled between rounds; no
                // data rides on them.
                while !stop.load(Ordering::Relaxed) {
                    // The clients write disjoint rounds (even and odd).
                    errors += round(&mut raw, rounds * 2 + client);
                    rounds += 1;
                    done_rounds.fetch_add(1, Ordering::Relaxed);
                }
                (rounds, errors)
            })
        })
        .collect();
    let started = Instant::now();
    let mut reloads = 0;
    // At least 400 reloads, and on until the clients did 10 rounds each
    // under them: the count decides, not the machine's speed.
    while reloads < 400 || done_rounds.load(Ordering::Relaxed) < 20 {
        let table = &tables[(reloads + 1) % tables.len()];
        server.server.reload(&server.transports, table).unwrap();
        reloads += 1;
        std::thread::sleep(Duration::from_micros(500));
        assert!(started.elapsed() < TIMEOUT, "the clients made no progress");
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
    let stop = server.dir.path().join("stop-fio");
    let fio = {
        let stop = stop.clone();
        std::thread::spawn(move || fio_verify_until(&uri, &stop))
    };
    // The reload count decides when fio stops, not fio's speed: reloads
    // start once fio's I/O flows, and fio runs on until the last reload
    // was followed by more I/O.
    let completed = || server.server.stats().requests_completed;
    let wait_for_io = |after: u64, what: &str| {
        let deadline = Instant::now() + TIMEOUT;
        while completed() < after {
            assert!(
                !fio.is_finished(),
                "fio ended before {what}: {:?}",
                server.server.stats()
            );
            assert!(Instant::now() < deadline, "no I/O {what}");
            std::thread::yield_now();
        }
    };
    wait_for_io(1, "before the reloads");
    for reloads in 0..RELOADS_UNDER_FIO {
        let table = &tables[(reloads + 1) % tables.len()];
        server.server.reload(&server.transports, table).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    wait_for_io(completed() + 1000, "after the reloads");
    std::fs::write(&stop, b"").unwrap();
    // fio's own assertions (zero errors in every job) run in its thread;
    // what the server counted says more if they failed.
    if fio.join().is_err() {
        panic!("fio failed; the server counted {:?}", server.server.stats());
    }
}

/// Reloads while fio runs.
const RELOADS_UNDER_FIO: usize = 200;

/// One client session over `socket`: the handshake (client flags, then
/// `OPT_INFO` and `OPT_GO`, each sent after the server's last answer, as
/// libnbd does), a WRITE of block `block` and a READ of it checked, then
/// `CMD_DISC` and the server's close. Says which step failed, and how.
fn run_session(socket: &Path, block: u64, fill: u8) -> Result<(), String> {
    let at = |step: &'static str| move |error: std::io::Error| format!("{step}: {error}");
    let mut stream = UnixStream::connect(socket).map_err(at("handshake: connect"))?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .map_err(at("setup"))?;
    stream
        .set_write_timeout(Some(TIMEOUT))
        .map_err(at("setup"))?;
    let mut greeting = [0; 18];
    stream
        .read_exact(&mut greeting)
        .map_err(at("handshake: greeting"))?;
    if &greeting[..8] != b"NBDMAGIC" {
        return Err(format!("handshake: greeting {greeting:?}"));
    }
    stream
        .write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
        .map_err(at("handshake: client flags"))?;
    let mut go = Vec::new();
    GoRequest {
        name: "",
        info_requests: vec![],
    }
    .encode(&mut go)
    .map_err(|error| format!("GO payload: {error}"))?;
    for option in [OPT_INFO, OPT_GO] {
        let header = OptionHeader {
            option,
            length: go.len() as u32,
        };
        stream
            .write_all(&header.encode())
            .and_then(|()| stream.write_all(&go))
            .map_err(at("handshake: option"))?;
        loop {
            let mut reply = [0; OptionReplyHeader::LEN];
            stream
                .read_exact(&mut reply)
                .map_err(at("handshake: option reply"))?;
            let reply = OptionReplyHeader::decode(&reply)
                .map_err(|error| format!("handshake: option reply: {error}"))?;
            let mut payload = vec![0; reply.length as usize];
            stream
                .read_exact(&mut payload)
                .map_err(at("handshake: option reply"))?;
            match reply.reply_type {
                REP_ACK => break,
                REP_INFO => {}
                other => return Err(format!("handshake: option {option} answered {other:#x}")),
            }
        }
    }
    let offset = block * BLOCK as u64;
    let data = vec![fill; BLOCK];
    let request = |command, cookie| Request {
        flags: 0,
        command,
        cookie,
        offset,
        length: if command == CMD_DISC { 0 } else { BLOCK as u32 },
    };
    // The READ after the WRITE's reply: requests in flight together
    // complete in any order.
    for (cookie, len) in [(1, 0), (2, BLOCK)] {
        let (command, payload) = match len {
            0 => (CMD_WRITE, &data[..]),
            _ => (CMD_READ, &[][..]),
        };
        stream
            .write_all(&request(command, cookie).encode())
            .and_then(|()| stream.write_all(payload))
            .map_err(at("I/O: request"))?;
        let mut reply = [0; SimpleReply::LEN];
        stream.read_exact(&mut reply).map_err(at("I/O: reply"))?;
        let reply = SimpleReply::decode(&reply).map_err(|error| format!("I/O: reply: {error}"))?;
        if (reply.error, reply.cookie) != (0, cookie) {
            return Err(format!("I/O: reply {reply:?} to request {cookie}"));
        }
        let mut read = vec![0; len];
        stream.read_exact(&mut read).map_err(at("I/O: data"))?;
        if len > 0 && read != data {
            return Err(format!("I/O: block {block} does not read back {fill:#x}"));
        }
    }
    stream
        .write_all(&request(CMD_DISC, 3).encode())
        .map_err(at("disconnect"))?;
    match stream.read(&mut [0; 1]) {
        Ok(0) => Ok(()),
        Ok(_) => Err("disconnect: the server sent more".into()),
        Err(error) => Err(format!("disconnect: {error}")),
    }
}

/// A reload never drops a client's handshake: clients connect, finish the
/// handshake, write and read back a block and disconnect, session after
/// session, while the test thread reloads the map as fast as it can, and
/// every session succeeds: many more handshakes under reloads than fio's
/// four (its nbd engine connects twice per job), one of which saw a
/// broken pipe in CI.
#[test]
fn clients_connect_and_leave_while_the_map_is_reloaded() {
    const CLIENTS: u64 = 4;
    const SESSIONS: u64 = 200;
    let TestServer {
        server,
        transports,
        map,
        dir: _dir,
        ..
    } = TestServer::default_two_loops();
    // The test keeps no map: a map held keeps every later one alive (each
    // links to its successor), and thousands of reloads run here.
    drop(map);
    let tables = tables();
    let reloaded = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let socket = server.unix_socket().unwrap().to_path_buf();
            let reloaded = Arc::clone(&reloaded);
            std::thread::spawn(move || {
                let started = Instant::now();
                (0..SESSIONS)
                    .filter_map(|session| {
                        // Session n starts after reload n + 1: the
                        // reloads run beside every session, however the
                        // threads are scheduled. Relaxed: a count
                        // compared, no data rides on it.
                        while reloaded.load(Ordering::Relaxed) <= session {
                            assert!(started.elapsed() < TIMEOUT, "the reloads stopped");
                            std::thread::yield_now();
                        }
                        session_result(&socket, client, session, fill(session, client))
                    })
                    .collect::<Vec<String>>()
            })
        })
        .collect();
    let mut reloads = 0;
    while !clients.iter().all(|client| client.is_finished()) {
        let table = &tables[(reloads + 1) % tables.len()];
        server.reload(&transports, table).unwrap();
        reloads += 1;
        reloaded.store(reloads as u64, Ordering::Relaxed);
    }
    let failures: Vec<String> = clients
        .into_iter()
        .flat_map(|client| client.join().unwrap())
        .collect();
    let sessions = CLIENTS * SESSIONS;
    eprintln!("{reloads} reloads under {sessions} sessions");
    assert!(
        failures.is_empty(),
        "{} of {sessions} sessions failed under {reloads} reloads, first: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    let stats = server.stats();
    assert_eq!(stats.connections_accepted, sessions);
    assert_eq!(
        (
            stats.protocol_errors,
            stats.connections_refused,
            stats.connections_evicted
        ),
        (0, 0, 0)
    );
}

/// Session `session` of client `client` (block `client`), as an error
/// line if it failed.
fn session_result(socket: &Path, client: u64, session: u64, fill: u8) -> Option<String> {
    run_session(socket, client, fill)
        .err()
        .map(|error| format!("client {client} session {session}: {error}"))
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
            started.elapsed() < TIMEOUT,
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
    assert!(
        error
            .to_string()
            .contains("a reload keeps an exported map's size"),
        "{error}"
    );
    assert!(Arc::ptr_eq(&server.device.map(), &server.map));
    still_serves(server.socket());
}
