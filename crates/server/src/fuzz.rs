//! The body of the `serve` fuzz target, here so that the corpus replay
//! test runs exactly what the fuzzer runs, on the stable toolchain.
//!
//! [`session`] feeds arbitrary client bytes to a real `Connection`
//! through a socket pair (handshake, request headers, write payloads,
//! refused payloads, truncation at any point) and answers every request
//! the connection hands out at once. It panics if the connection breaks
//! a contract: a request handed to the map that the map must never see
//! (outside the export, a buffer that does not match, a payload over the
//! limit), a session that does not end once the client's bytes end, or
//! one that keeps bytes of the server's budget ([`crate::budget`]) after
//! it closed.

use crate::connection::{Connection, Incoming};
use crate::export::{Export, MAX_PAYLOAD};
use crate::pool::BufferPool;
use crate::reply::ReplyHeader;
use crate::stream::Stream;
use mpio_core::io::Op;
use std::io::{self, Read, Write};

/// Most input bytes used: what fits in a unix socket's buffer at once.
pub(crate) const MAX_INPUT: usize = 64 * 1024;
/// Size of the export the session talks to (1 MiB).
pub(crate) const EXPORT_BYTES: u64 = 1 << 20;
/// The session's budget of buffered bytes: room for a few requests past
/// the first, so that sessions also wait for room.
const BUDGET_BYTES: usize = 4 * MAX_PAYLOAD as usize;
/// Most turns a session may take to end.
const MAX_TURNS: usize = 10_000;

/// Runs one session over `bytes` (see the module docs); returns how
/// many requests reached the map.
///
/// # Panics
/// When the connection breaks a contract, or a socket pair cannot be
/// made.
pub fn session(bytes: &[u8]) -> usize {
    let input = &bytes[..bytes.len().min(MAX_INPUT)];
    let (mut client, server) = mio::net::UnixStream::pair().expect("a socket pair");
    let mut written = 0;
    while written < input.len() {
        match client.write(&input[written..]) {
            Ok(count) => written += count,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => panic!("writing the input: {error}"),
        }
    }
    client
        .shutdown(std::net::Shutdown::Write)
        .expect("shutting the client's side");
    let export = Export {
        name: "mpio".into(),
        description: String::new(),
        // An odd-length input talks to a read-only export.
        read_only: input.len() % 2 == 1,
    };
    let budget = std::sync::Arc::new(crate::budget::Budget::new(BUDGET_BYTES));
    let mut connection = Connection::new(Stream::Unix(server), std::sync::Arc::clone(&budget));
    connection.readable = true;
    connection.writable = true;
    // The client's side is shut, as the poller would report.
    connection.peer_closed = true;
    let mut pool = BufferPool::default();
    let mut incoming = Vec::new();
    let mut sink = [0; 4096];
    let mut handed = 0;
    for _ in 0..MAX_TURNS {
        connection.receive(
            &export,
            &|| EXPORT_BYTES,
            &mut pool,
            &mut |request| incoming.push(request),
            &mut |_| {},
        );
        for request in incoming.drain(..) {
            check(&request, &export);
            handed += 1;
            let held = request.hold;
            if request.op == Op::Read {
                let header =
                    ReplyHeader::read(request.cookie, false, request.offset, request.length);
                connection.reply(header, Some(request.buf), held, &mut pool);
            } else {
                pool.give(request.buf);
                connection.reply(ReplyHeader::done(request.cookie), None, held, &mut pool);
            }
        }
        connection.writable = true;
        connection.send(&mut pool);
        // Drain what the server sent, so its writes never block.
        while matches!(client.read(&mut sink), Ok(count) if count > 0) {}
        if connection.is_done() || connection.is_broken() {
            // Every request was answered at once: closing gives back all
            // the budget it took.
            connection.recycle(&mut pool);
            assert_eq!(budget.used(), 0, "the session kept budget bytes");
            return handed;
        }
        // The client's bytes are all there: only the bounds stop a turn.
        connection.readable = true;
    }
    panic!("the session did not end after the client's bytes ended");
}

/// The contract of every request handed to the map.
fn check(request: &Incoming, export: &Export) {
    match request.op {
        Op::Read | Op::Write => {
            assert_eq!(request.buf.len(), request.length as usize);
            assert!(request.length <= MAX_PAYLOAD);
        }
        Op::Flush | Op::Discard | Op::WriteZeroes => assert!(request.buf.is_empty()),
    }
    if request.op == Op::Flush {
        assert_eq!((request.offset, request.length), (0, 0));
    } else {
        let end = request.offset + u64::from(request.length);
        assert!(end <= EXPORT_BYTES, "{request:?} beyond the export");
    }
    assert!(
        !(export.read_only && request.op.is_write()),
        "a write to a read-only export"
    );
}
