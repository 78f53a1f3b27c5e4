//! Loops made for a host ([`Engine::start_hosted`]) serve on threads that
//! keep the [`HostedLoop`] contract and nothing more: each waits on its
//! loop's descriptor in a poller of its own, never longer than the loop's
//! wait hint, takes the loop's turns without waiting, and ends the loop
//! when a turn says so, which it does once the engine is gone.

mod support;

use mpio_core::map::MapOptions;
use mpio_core::table::Table;
use mpio_nbd::consts::{CMD_READ, CMD_WRITE};
use mpio_server::{Engine, EngineConfig, Server, ServerConfig};
use mpio_transport::Transports;
use std::sync::{mpsc, Mutex};
use support::*;

const BLOCK: usize = 4096;

#[test]
fn hosted_loops_serve_on_their_hosts_threads() {
    mpio_test_support::log_to_test_output();
    let cpus = [0, 0];
    let (engine, loops) = Engine::start_hosted(&EngineConfig::default(), &cpus).unwrap();
    assert_eq!(engine.loop_count(), 2);
    assert_eq!(engine.thread_count(), 1, "the acceptor alone");
    let made_for: Vec<u32> = loops.iter().map(|hosted| hosted.cpu()).collect();
    assert_eq!(made_for, cpus);
    let (ended, turns) = mpsc::channel();
    for hosted in loops {
        let ended = ended.clone();
        std::thread::spawn(move || ended.send(host(hosted, &Mutex::new(()))).unwrap());
    }

    let dir = TempDir::new("hosted");
    let transports = Transports::new();
    let table = Table::parse(&table_text("disk")).unwrap();
    let device = transports.build(&table, MapOptions::default()).unwrap();
    let config = ServerConfig {
        unix_socket: Some(dir.join("nbd.sock")),
        ..ServerConfig::default()
    };
    let server = Server::start_on(&engine, &config, device.into_slot()).unwrap();
    // Two clients: the acceptor hands one to each loop.
    let socket = server.unix_socket().unwrap();
    for (cookie, fill) in [(1, 0xa1u8), (3, 0xb2)] {
        let mut client = RawClient::ready(socket);
        client.request(CMD_WRITE, cookie, 0, BLOCK as u32, &vec![fill; BLOCK]);
        assert_eq!(client.simple_reply(0), (0, cookie, Vec::new()), "write");
        client.request(CMD_READ, cookie + 1, 0, BLOCK as u32, &[]);
        let (error, answered, data) = client.simple_reply(BLOCK);
        assert_eq!((error, answered), (0, cookie + 1), "read");
        assert!(data.iter().all(|&byte| byte == fill), "read back");
    }

    // The loops end with the engine, their hosts with them.
    drop(server);
    drop(engine);
    for _ in cpus {
        let taken = turns
            .recv_timeout(TIMEOUT)
            .expect("a hosted loop never ended");
        assert!(taken > 0);
    }
}
