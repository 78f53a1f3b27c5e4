//! Steady-state serving allocates nothing: after a warm-up, thousands of
//! pipelined reads and writes (32 in flight, completed out of order over
//! two paths) through the server make no heap allocation in any thread.
//!
//! The server's buffers and queues grow to the most it ever held at once,
//! and how many of a batch it holds at once depends on how the threads
//! interleave. So the warm-up starts with a batch held at the paths until
//! all 32 requests are in flight: every buffer and queue has then reached
//! what the measured batches (never more than 32 in flight) can ask of it.
//!
//! A counting global allocator counts every allocation in the process.
//! This binary holds one test, and its client loop below allocates
//! nothing itself (fixed buffers, `write_all`/`read_exact` on a unix
//! socket), so what the window counts is the server's: its event loop
//! and acceptor threads.

// A global allocator is an `unsafe impl` by definition; this one only
// forwards to the system allocator.
#![allow(unsafe_code)]

mod support;

use mpio_nbd::consts::{CMD_READ, CMD_WRITE};
use mpio_nbd::reply::SimpleReply;
use mpio_nbd::request::Request;
use mpio_server::ServerConfig;
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use support::*;

struct Counting;

/// Allocations in the whole process. Relaxed: a tally read after the
/// measured window; the client's replies order the server's work before
/// the read (each reply was sent after the work that produced it).
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only
// counts allocations on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const DEPTH: u64 = 32;
const BLOCK: usize = 4096;

/// Sends `DEPTH` requests (alternating writes and reads) at once, then
/// reads every reply. Allocates nothing.
fn batch(client: &mut RawClient, round: u64, data: &[u8; BLOCK], sink: &mut [u8; BLOCK]) {
    send(client, round, data);
    receive(client, sink);
}

/// Sends `DEPTH` requests, alternating writes and reads.
fn send(client: &mut RawClient, round: u64, data: &[u8; BLOCK]) {
    for slot in 0..DEPTH {
        let command = if slot % 2 == 0 { CMD_WRITE } else { CMD_READ };
        let request = Request {
            flags: 0,
            command,
            cookie: slot,
            offset: ((round * DEPTH + slot) % 1024) * BLOCK as u64,
            length: BLOCK as u32,
        };
        client.stream.write_all(&request.encode()).unwrap();
        if command == CMD_WRITE {
            client.stream.write_all(data).unwrap();
        }
    }
}

/// Reads the replies to a batch.
fn receive(client: &mut RawClient, sink: &mut [u8; BLOCK]) {
    for _ in 0..DEPTH {
        let mut header = [0; SimpleReply::LEN];
        client.stream.read_exact(&mut header).unwrap();
        let reply = SimpleReply::decode(&header).unwrap();
        assert_eq!(reply.error, 0);
        if reply.cookie % 2 == 1 {
            client.stream.read_exact(sink).unwrap();
        }
    }
}

#[test]
fn steady_state_serving_allocates_nothing() {
    let server = TestServer::start(ServerConfig {
        loops: 1,
        ..ServerConfig::default()
    });
    let mut client = RawClient::ready(server.socket());
    let data = [0xab; BLOCK];
    let mut sink = [0; BLOCK];
    // A batch held whole at the paths: the most the server ever holds.
    let ports = ["a", "b"].map(|port| server.transports.port("disk", port));
    ports.iter().for_each(|port| port.hang());
    send(&mut client, 0, &data);
    let map = server.device.map();
    wait_until("the whole batch to be at the paths", || {
        map.path_load(0).in_flight() + map.path_load(1).in_flight() == DEPTH as u32
    });
    ports.iter().for_each(|port| port.heal());
    receive(&mut client, &mut sink);
    for round in 0..200 {
        batch(&mut client, round, &data, &mut sink);
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for round in 0..500 {
        batch(&mut client, round, &data, &mut sink);
    }
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(
        allocations,
        0,
        "{allocations} allocations in {} requests",
        500 * DEPTH
    );
}
