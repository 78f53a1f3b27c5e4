//! One established NBD connection in the transmission phase, driven
//! without blocking on the thread that owns it: requests go out in
//! submission order, batched (`send.rs`); replies are read in as the
//! socket has them (`receive.rs`), a read's data straight into its own
//! buffer where it can be (`direct.rs`), and parsed, in whatever order
//! the server sends them, against the requests in flight (`reply.rs`); a
//! connection we end ourselves is cut and kept until the server's side
//! closes, so that a write is handed back only once the server can no
//! longer apply it (`fence.rs`). Each request travels under its own
//! cookie from a [`Slab`], not under the I/O's tag.
//!
//! # Allocation
//! None per I/O once the connection has carried its depth of requests:
//! the table, the waiting list, the send buffer (headers only) and the
//! batch's list of parts are sized then, whatever the server's pace; each
//! request's list of
//! covered ranges is one of `depth` lists made with the connection and
//! reused (a server that sends a read's chunks out of order may grow one,
//! once).

mod direct;
mod fence;
mod receive;
mod reply;
mod send;

/// What the transport's tests (`nbd/tests/mod.rs`) check directly.
#[cfg(test)]
pub(super) use receive::POLL_BUDGET_REPLIES;
#[cfg(test)]
pub(super) use reply::{classify, cover};

use super::handshake::Export;
use super::stream::Stream;
use direct::Direct;
use mpio_core::io::PathOutcome;
use mpio_core::queue::PathIo;
use mpio_core::Slab;
use mpio_nbd::request::Request;
use receive::RECV_BUFFER;
use send::{Part, SEND_BATCH};
use std::collections::VecDeque;

/// An I/O the server has not finished answering.
#[derive(Debug)]
struct InFlight {
    io: PathIo,
    /// The command carrying it.
    command: u16,
    /// Read bytes received so far (data and hole chunks).
    received: u64,
    /// The byte ranges of the read those chunks covered, relative to its
    /// offset: sorted, disjoint, adjacent ranges merged.
    covered: Vec<(u32, u32)>,
    /// The first error chunk's outcome.
    error: Option<PathOutcome>,
    /// A FUA write to a server that takes no FUA flag but caches: once
    /// the write succeeds, a flush goes out for it, and the I/O completes
    /// with the flush.
    flush_after: bool,
    /// Given back to the core already (a read when the connection was
    /// cut, or anything abandoned past the fence timeout): its buffer is
    /// gone, its reply is read and dropped.
    abandoned: bool,
}

/// Why a connection ended.
#[derive(Debug)]
pub(crate) struct Broken(pub String);

/// An established connection. See the module docs.
#[derive(Debug)]
pub(crate) struct Connection {
    stream: Stream,
    export: Export,
    in_flight: Slab<InFlight>,
    /// Cookies of requests not yet encoded, in submission order.
    unsent: VecDeque<u64>,
    /// The headers of the batch being sent.
    send: Vec<u8>,
    /// The batch being sent, request by request.
    parts: Vec<Part>,
    /// The first part not wholly written, and its bytes written.
    part: usize,
    part_sent: usize,
    recv: Box<[u8]>,
    recv_start: usize,
    recv_end: usize,
    /// The read whose data comes straight into its buffer, if one does:
    /// the receive buffer is empty before it (see `direct.rs`).
    direct: Option<Direct>,
    /// Emptied `covered` lists of finished reads, reused so that steady
    /// state allocates nothing.
    spare_covered: Vec<Vec<(u32, u32)>>,
    /// The server's side was seen closed (end of file or a reset): nothing
    /// sent on this connection can take effect any more.
    server_closed: bool,
    /// A read failed on our side (a TCP timeout, say): the server may
    /// still run, and a later end of file is not its close
    /// ([`Connection::read_ended`]).
    failed_locally: bool,
    /// Our sending side is shut down (see [`Connection::cut`]).
    cut: bool,
    /// The server broke the protocol after the cut: what it sends is read
    /// and dropped until it closes.
    discarding: bool,
}

impl Connection {
    /// Wraps a stream whose handshake ended with `export`, for `depth`
    /// I/Os in flight.
    ///
    /// # Errors
    /// The socket cannot be made non-blocking.
    pub(crate) fn new(stream: Stream, export: Export, depth: usize) -> std::io::Result<Connection> {
        stream.set_timeouts(None)?;
        stream.set_nonblocking(true)?;
        Ok(Connection {
            stream,
            export,
            in_flight: Slab::with_capacity(depth),
            unsent: VecDeque::with_capacity(depth),
            send: Vec::with_capacity(SEND_BATCH + Request::LEN),
            parts: Vec::with_capacity(depth),
            part: 0,
            part_sent: 0,
            recv: vec![0; RECV_BUFFER].into_boxed_slice(),
            recv_start: 0,
            recv_end: 0,
            direct: None,
            // One list per request the connection can have in flight,
            // made now: a new high of requests in flight later must not
            // allocate.
            spare_covered: (0..depth).map(|_| Vec::with_capacity(2)).collect(),
            server_closed: false,
            failed_locally: false,
            cut: false,
            discarding: false,
        })
    }

    /// What the server said about the export.
    pub(crate) fn export(&self) -> &Export {
        &self.export
    }

    /// I/Os waiting for their reply.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// True if `tag` is waiting for its reply (and not abandoned).
    pub(crate) fn is_in_flight(&self, tag: u64) -> bool {
        self.in_flight
            .iter()
            .any(|(_, in_flight)| in_flight.io.tag == tag && !in_flight.abandoned)
    }

    /// True once the server's side was seen closed.
    pub(crate) fn server_closed(&self) -> bool {
        self.server_closed
    }
}
