//! Drives one [`Connection`]'s reply parser with arbitrary bytes, as a
//! server would send them: the harness of the `nbd_replies` fuzz target
//! (`fuzz/fuzz_targets/nbd_replies.rs`) and of the stable test that
//! replays its corpus (`tests/nbd_fuzz_corpus.rs`).
//!
//! # Input
//! The first byte's low bit chooses structured replies (1) or simple
//! replies (0); the rest is what the server sends. Four requests are in
//! flight when it arrives, under the cookies in [`COOKIES`]: tag 1 reads
//! 1024 bytes at 4096, tag 2 reads 1024 bytes at 4096, tag 3 writes 512
//! bytes at 0, tag 4 flushes.
//!
//! # Contract
//! [`replay`] never panics on any input, and returns every one of the
//! four I/Os exactly once (answered, or failed when the connection
//! ended): the property the fuzz target checks.

use super::connection::Connection;
use super::handshake::Export;
use super::stream::Stream;
use mpio_core::io::{Buffer, Op};
use mpio_core::queue::{PathCompletion, PathIo};
use mpio_nbd::consts::*;
use mpio_nbd::request::Request;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// The cookies the four requests travel under, in tag order (a fresh
/// connection's in-flight table hands them out in this order).
pub(crate) const COOKIES: [u64; 4] = [1 << 32, 1 << 32 | 1, 1 << 32 | 2, 1 << 32 | 3];

/// Bound on one replay: far above what any input needs.
const REPLAY_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends the four requests, feeds `input` to the parser (see the module
/// docs) and returns every I/O's completion.
///
/// # Panics
/// If a socket pair cannot be set up, the replay outlives 30 s, or the
/// cookies differ from `COOKIES` (a harness bug, not the input's).
pub fn replay(input: &[u8]) -> Vec<PathCompletion> {
    let (structured_replies, reply_bytes) = match input.split_first() {
        Some((flags, rest)) => (flags & 1 != 0, rest),
        None => (false, input),
    };
    let (client, mut server) = UnixStream::pair().expect("a socket pair");
    let export = Export {
        size_bytes: 1 << 20,
        flags: FLAG_HAS_FLAGS | FLAG_SEND_FLUSH,
        structured_replies,
        min_block: 512,
        max_payload: 64 * 1024,
    };
    let mut connection = Connection::new(Stream::Unix(client), export, 4).expect("non-blocking");
    let ios = [
        (CMD_READ, Op::Read, 4096, 1024),
        (CMD_READ, Op::Read, 4096, 1024),
        (CMD_WRITE, Op::Write, 0, 512),
        (CMD_FLUSH, Op::Flush, 0, 0),
    ];
    for (tag, (command, op, offset, len)) in (1..).zip(ios) {
        let io = PathIo {
            tag,
            op,
            offset,
            len,
            buf: Buffer::zeroed(len as usize),
            fua: false,
        };
        connection.send(command, io).expect("a fresh socket pair");
    }
    server
        .set_read_timeout(Some(REPLAY_TIMEOUT))
        .expect("a timeout");
    for expected in COOKIES {
        let mut header = [0; Request::LEN];
        server.read_exact(&mut header).expect("the requests");
        let request = Request::decode(&header).expect("a request");
        assert_eq!(request.cookie, expected, "cookies as documented");
        let mut payload = vec![0; request.payload_len() as usize];
        server.read_exact(&mut payload).expect("the payload");
    }
    server.set_nonblocking(true).expect("non-blocking");
    let deadline = Instant::now() + REPLAY_TIMEOUT;
    let mut done = Vec::new();
    let mut rest = reply_bytes;
    let mut broken = false;
    while !broken {
        assert!(Instant::now() < deadline, "the replay outlived its bound");
        if rest.is_empty() {
            // The server hangs up: the client reads what is left, then
            // sees the end.
            server.shutdown(std::net::Shutdown::Write).ok();
        } else {
            match server.write(rest) {
                Ok(written) => rest = &rest[written..],
                Err(error) if error.kind() == ErrorKind::WouldBlock => {}
                // The client hung up on a protocol error.
                Err(_) => rest = &[],
            }
        }
        broken = connection.poll(&mut done).is_err();
    }
    connection.sever(&mut done);
    done
}
