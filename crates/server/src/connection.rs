//! One client connection inside an event loop: its input buffer, its
//! handshake, the requests it is receiving and the replies waiting to be
//! sent.
//!
//! Reading turns bytes into [`Incoming`] requests for the loop to submit
//! to the map (a WRITE's payload is read straight into the I/O's buffer
//! once its header is parsed; the buffer starts at [`PAYLOAD_STEP`] and
//! grows as the payload arrives, so a header alone commits no more). Replies queue as a header and, for reads,
//! the I/O's own buffer, and go out many at a time in one vectored write:
//! no payload is copied on the way out.
//!
//! # Bounds
//! A connection stops reading while it has [`MAX_IN_FLIGHT`] requests or
//! [`MAX_IN_FLIGHT_BYTES`] of buffers that are at the map or waiting to be
//! written back (a request counts from its parsing until its reply has
//! left in full, refused ones too: a client that never reads its replies
//! cannot make the server hold more); it reads on when replies go out
//! ([`Connection::wants_to_read`] tells the loop to come back). Each
//! READ or WRITE buffer is reserved from the server's shared
//! [`Budget`] before its header is consumed; a request the budget has no
//! room for waits unparsed ([`Connection::is_starved`]), and nothing more
//! is read from its client until it fits: the bytes behind it stay in the
//! socket. Its input buffer holds [`INPUT_LEN`] bytes, enough for the
//! largest option the handshake accepts; every read has room in it (a
//! read into no room would return 0, which means the client's end of
//! file).
//!
//! # Errors
//! A protocol error, a read or write error, or the client closing its
//! side ends reading; see [`Connection::receive`] for what each means.

use crate::budget::{Budget, Hold};
use crate::export::Export;
use crate::handshake::{Handshake, HandshakeError, Step};
use crate::pool::BufferPool;
use crate::reply::ReplyHeader;
use crate::request::{judge, Verdict};
use crate::stream::Stream;
use mpio_core::io::{Buffer, Op};
use mpio_nbd::consts::{CMD_READ, MAX_OPTION_LEN};
use mpio_nbd::request::Request;
use std::collections::VecDeque;
use std::io::{self, IoSlice, Read, Write};
use std::sync::Arc;

/// Most requests one connection may have at the map.
pub(crate) const MAX_IN_FLIGHT: usize = 512;
/// Most buffer bytes one connection may have at the map (64 MiB).
pub(crate) const MAX_IN_FLIGHT_BYTES: usize = 64 << 20;
/// Bytes of input buffered ahead of parsing: an option header with the
/// largest payload fits, and so do many request headers at once.
pub const INPUT_LEN: usize = 2 * MAX_OPTION_LEN as usize;
/// A WRITE's buffer starts this large (or at its length, if smaller)
/// and doubles as its payload arrives (1 MiB: what the buffer pool
/// keeps).
pub(crate) const PAYLOAD_STEP: usize = crate::pool::MAX_POOLED_BYTES;
/// Most slices gathered into one vectored write.
const MAX_SLICES: usize = 64;

/// A request ready for the map.
#[derive(Debug)]
pub(crate) struct Incoming {
    /// The map's operation.
    pub op: Op,
    /// Flush after it, before replying.
    pub fua: bool,
    /// The client's cookie.
    pub cookie: u64,
    /// Byte offset.
    pub offset: u64,
    /// Byte length.
    pub length: u32,
    /// The data (a write's) or the space (a read's); empty otherwise.
    pub buf: Buffer,
    /// What the buffer holds of the connection's bound and the budget.
    pub hold: Hold,
}

/// Why a connection stops reading.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Ending {
    /// The client sent `CMD_DISC` or `OPT_ABORT`, or closed its side:
    /// answer what is in flight, then close.
    #[error("client finished")]
    Finished,
    /// The client's bytes broke the handshake.
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
    /// The client's bytes broke the transmission protocol.
    #[error("transmission: {0}")]
    Protocol(String),
    /// The socket failed.
    #[error("socket: {0}")]
    Socket(#[from] io::Error),
}

#[derive(Debug)]
enum Phase {
    Handshake(Handshake),
    /// Past the handshake, whose last answer told the client the export
    /// holds `size_bytes`.
    Transmission {
        structured: bool,
        size_bytes: u64,
    },
}

#[derive(Debug)]
enum Receiving {
    Header,
    /// A WRITE's payload: `filled` of `incoming.length` bytes so far.
    Payload {
        incoming: Incoming,
        filled: usize,
    },
    /// A refused WRITE's payload, dropped; then `reply` goes out.
    Discard {
        remaining: usize,
        reply: ReplyHeader,
    },
}

#[derive(Debug)]
enum Outgoing {
    Bytes(Vec<u8>),
    Reply {
        header: ReplyHeader,
        data: Option<Buffer>,
        /// Counted against the connection's bound and the budget until it
        /// is sent.
        hold: Hold,
    },
}

impl Outgoing {
    fn parts(&self) -> [&[u8]; 2] {
        match self {
            Outgoing::Bytes(bytes) => [bytes, &[]],
            Outgoing::Reply { header, data, .. } => [
                header.as_bytes(),
                data.as_ref().map_or(&[], Buffer::as_slice),
            ],
        }
    }

    fn len(&self) -> usize {
        let [first, second] = self.parts();
        first.len() + second.len()
    }
}

/// One client connection. See the module docs.
#[derive(Debug)]
pub(crate) struct Connection {
    /// The socket.
    pub stream: Stream,
    /// Readable since the last `WouldBlock` (the poller is edge-triggered).
    pub readable: bool,
    /// Writable since the last `WouldBlock`.
    pub writable: bool,
    /// The poller reported the client's side closed: read to the end.
    pub peer_closed: bool,
    phase: Phase,
    input: Box<[u8]>,
    head: usize,
    tail: usize,
    receiving: Receiving,
    output: VecDeque<Outgoing>,
    /// Bytes of the front of `output` already sent.
    output_sent: usize,
    in_flight: usize,
    in_flight_bytes: usize,
    ending: Option<Ending>,
    /// The server's shared budget of buffered bytes.
    budget: Arc<Budget>,
    /// A request header waits for room in the budget.
    starved: bool,
}

impl Connection {
    /// A new connection drawing on `budget`; the greeting is queued to
    /// send.
    pub(crate) fn new(stream: Stream, budget: Arc<Budget>) -> Self {
        let mut greeting = Vec::new();
        let handshake = Handshake::new(&mut greeting);
        let mut output = VecDeque::with_capacity(64);
        output.push_back(Outgoing::Bytes(greeting));
        Connection {
            stream,
            readable: false,
            writable: false,
            peer_closed: false,
            phase: Phase::Handshake(handshake),
            input: vec![0; INPUT_LEN].into_boxed_slice(),
            head: 0,
            tail: 0,
            receiving: Receiving::Header,
            output,
            output_sent: 0,
            in_flight: 0,
            in_flight_bytes: 0,
            ending: None,
            budget,
            starved: false,
        }
    }

    /// True while the map holds fewer than the connection's bounds.
    fn has_room(&self) -> bool {
        self.in_flight < MAX_IN_FLIGHT && self.in_flight_bytes < MAX_IN_FLIGHT_BYTES
    }

    /// True while a request header waits for room in the server's
    /// budget: the loop tries it again later, as no event of this
    /// connection's will announce the room.
    pub(crate) fn is_starved(&self) -> bool {
        self.starved
    }

    /// True until the client chose the export.
    pub(crate) fn in_handshake(&self) -> bool {
        matches!(self.phase, Phase::Handshake(_))
    }

    /// Ends a handshake that took too long (the connection is then
    /// broken: the loop closes it).
    pub(crate) fn time_out(&mut self, limit_ms: u64) {
        if self.ending.is_none() {
            self.ending = Some(Ending::Protocol(format!(
                "handshake not finished within {limit_ms} ms"
            )));
        }
    }

    /// True once the client negotiated structured replies.
    pub(crate) fn is_structured(&self) -> bool {
        matches!(
            self.phase,
            Phase::Transmission {
                structured: true,
                ..
            }
        )
    }

    /// Why reading ended, once it has.
    pub(crate) fn ending(&self) -> Option<&Ending> {
        self.ending.as_ref()
    }

    /// True when the connection has nothing left to do: reading ended,
    /// nothing is at the map and every reply went out.
    pub(crate) fn is_done(&self) -> bool {
        self.ending.is_some() && self.in_flight == 0 && self.output.is_empty()
    }

    /// True when the connection must close at once, dropping what is in
    /// flight: its socket or its client's bytes failed.
    pub(crate) fn is_broken(&self) -> bool {
        matches!(
            self.ending,
            Some(Ending::Socket(_) | Ending::Protocol(_) | Ending::Handshake(_))
        )
    }

    /// Reads and parses what the socket holds, handing each complete
    /// request to `sink`, until the socket would block, the connection's
    /// bounds are reached, or reading ends (see [`Connection::ending`]).
    /// Refused requests are answered here (`refused` counts them, for
    /// the log). A client in its handshake is told the export holds what
    /// `size_now` says then; one past it is held to the size it was told.
    pub(crate) fn receive(
        &mut self,
        export: &Export,
        size_now: &impl Fn() -> u64,
        pool: &mut BufferPool,
        sink: &mut impl FnMut(Incoming),
        refused: &mut impl FnMut(&'static str),
    ) {
        if let Err(ending) = self.receive_inner(export, size_now, pool, sink, refused) {
            self.ending = Some(ending);
        }
    }

    fn receive_inner(
        &mut self,
        export: &Export,
        size_now: &impl Fn() -> u64,
        pool: &mut BufferPool,
        sink: &mut impl FnMut(Incoming),
        refused: &mut impl FnMut(&'static str),
    ) -> Result<(), Ending> {
        while self.ending.is_none() {
            self.parse(export, size_now, pool, sink, refused)?;
            // Starved: the request at the head waits for the budget, and
            // what follows it stays in the socket (module docs), so the
            // input buffer never fills with bytes nothing can parse.
            if !self.readable || !self.has_room() || self.starved || self.ending.is_some() {
                return Ok(());
            }
            let (result, requested) = match &mut self.receiving {
                Receiving::Payload { incoming, filled } => {
                    grow_payload(incoming, *filled + 1);
                    let space = &mut incoming.buf.as_mut_slice()[*filled..];
                    let requested = space.len();
                    let result = self.stream.read(space);
                    if let Ok(count) = result {
                        *filled += count;
                    }
                    (result, requested)
                }
                _ => {
                    if self.tail == self.input.len() {
                        self.input.copy_within(self.head..self.tail, 0);
                        self.tail -= self.head;
                        self.head = 0;
                    }
                    let requested = self.input.len() - self.tail;
                    // What `parse` left is less than one message, and
                    // every message fits the buffer with room to spare
                    // (an option with the largest payload, a request
                    // header; a payload goes to its own buffer).
                    debug_assert!(requested > 0, "a read with no room would look like EOF");
                    let result = self.stream.read(&mut self.input[self.tail..]);
                    if let Ok(count) = result {
                        self.tail += count;
                    }
                    (result, requested)
                }
            };
            match result {
                // A short read drained the socket: skip the read that
                // would only say `WouldBlock`. Any byte arriving later
                // raises a new edge (epoll signals every arrival), as
                // tokio also relies on. Not once the client closed its
                // side: its end of file came with the bytes, in an edge
                // already consumed, so read on to see it.
                Ok(count) if count > 0 && count < requested && !self.peer_closed => {
                    self.readable = false;
                }
                Ok(0) => {
                    let partial =
                        self.tail > self.head || !matches!(self.receiving, Receiving::Header);
                    if partial {
                        return Err(Ending::Protocol(
                            "client closed its side in the middle of a message".into(),
                        ));
                    }
                    return Err(Ending::Finished);
                }
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.readable = false;
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(Ending::Socket(error)),
            }
        }
        Ok(())
    }

    /// Consumes whole messages from the input buffer.
    fn parse(
        &mut self,
        export: &Export,
        size_now: &impl Fn() -> u64,
        pool: &mut BufferPool,
        sink: &mut impl FnMut(Incoming),
        refused: &mut impl FnMut(&'static str),
    ) -> Result<(), Ending> {
        loop {
            let (structured, size_bytes) = match &mut self.phase {
                Phase::Handshake(handshake) => {
                    let mut out = Vec::new();
                    let size_bytes = size_now();
                    let result = handshake.feed(
                        export,
                        size_bytes,
                        &self.input[self.head..self.tail],
                        &mut out,
                    );
                    if !out.is_empty() {
                        self.output.push_back(Outgoing::Bytes(out));
                    }
                    let (used, step) = result?;
                    self.head += used;
                    match step {
                        Step::NeedMore => return Ok(()),
                        Step::Close => return Err(Ending::Finished),
                        Step::Transmission { structured } => {
                            self.phase = Phase::Transmission {
                                structured,
                                size_bytes,
                            };
                            continue;
                        }
                    }
                }
                Phase::Transmission {
                    structured,
                    size_bytes,
                } => (*structured, *size_bytes),
            };
            let available = &self.input[self.head..self.tail];
            match &mut self.receiving {
                Receiving::Header => {
                    if !self.has_room() || available.len() < Request::LEN {
                        return Ok(());
                    }
                    let request = Request::decode(available)
                        .map_err(|error| Ending::Protocol(error.to_string()))?;
                    let verdict = judge(&request, export, size_bytes);
                    let hold = match verdict {
                        Verdict::Io {
                            op: Op::Read | Op::Write,
                            ..
                        } => {
                            let bytes = request.length as usize;
                            match self.budget.reserve(self.in_flight_bytes, bytes) {
                                Some(hold) => hold,
                                None => {
                                    self.starved = true;
                                    return Ok(());
                                }
                            }
                        }
                        _ => Hold::default(),
                    };
                    self.starved = false;
                    self.head += Request::LEN;
                    self.judged(pool, sink, refused, request, verdict, hold, structured)?;
                }
                Receiving::Payload { incoming, filled } => {
                    let want = incoming.length as usize - *filled;
                    let count = want.min(available.len());
                    grow_payload(incoming, *filled + count);
                    incoming.buf.as_mut_slice()[*filled..*filled + count]
                        .copy_from_slice(&available[..count]);
                    *filled += count;
                    self.head += count;
                    if *filled < incoming.length as usize {
                        return Ok(());
                    }
                    let Receiving::Payload { incoming, .. } =
                        std::mem::replace(&mut self.receiving, Receiving::Header)
                    else {
                        unreachable!("matched above");
                    };
                    self.hand(incoming, sink);
                }
                Receiving::Discard { remaining, reply } => {
                    let count = (*remaining).min(available.len());
                    *remaining -= count;
                    self.head += count;
                    if *remaining > 0 {
                        return Ok(());
                    }
                    let header = *reply;
                    self.receiving = Receiving::Header;
                    self.queue_refusal(header);
                }
            }
            if self.head == self.tail {
                self.head = 0;
                self.tail = 0;
            }
        }
    }

    /// Acts on one decoded request header, judged `verdict`, its buffer
    /// reserved as `hold`.
    #[allow(clippy::too_many_arguments)]
    fn judged(
        &mut self,
        pool: &mut BufferPool,
        sink: &mut impl FnMut(Incoming),
        refused: &mut impl FnMut(&'static str),
        request: Request,
        verdict: Verdict,
        hold: Hold,
        structured: bool,
    ) -> Result<(), Ending> {
        match verdict {
            Verdict::Io { op, fua } => {
                let buf = match op {
                    Op::Read => pool.take(hold.bytes),
                    Op::Write => pool.take(hold.bytes.min(PAYLOAD_STEP)),
                    _ => Buffer::empty(),
                };
                let incoming = Incoming {
                    op,
                    fua,
                    cookie: request.cookie,
                    offset: request.offset,
                    length: request.length,
                    buf,
                    hold,
                };
                if op == Op::Write && request.length > 0 {
                    self.receiving = Receiving::Payload {
                        incoming,
                        filled: 0,
                    };
                } else {
                    self.hand(incoming, sink);
                }
                Ok(())
            }
            Verdict::Disconnect => Err(Ending::Finished),
            Verdict::Refuse { error, reason } => {
                refused(reason);
                let is_read = request.command == CMD_READ;
                let reply = ReplyHeader::error(request.cookie, structured && is_read, error);
                let payload = request.payload_len() as usize;
                if payload > 0 {
                    self.receiving = Receiving::Discard {
                        remaining: payload,
                        reply,
                    };
                } else {
                    self.queue_refusal(reply);
                }
                Ok(())
            }
            Verdict::Close { reason } => Err(Ending::Protocol(format!(
                "{reason} (command {}, length {})",
                mpio_nbd::request::command_name(request.command),
                request.length
            ))),
        }
    }

    /// Queues the error reply of a refused request; it counts against the
    /// bound until it is sent, like any reply.
    fn queue_refusal(&mut self, header: ReplyHeader) {
        self.in_flight += 1;
        self.output.push_back(Outgoing::Reply {
            header,
            data: None,
            hold: Hold::default(),
        });
    }

    fn hand(&mut self, incoming: Incoming, sink: &mut impl FnMut(Incoming)) {
        self.in_flight += 1;
        self.in_flight_bytes += incoming.hold.bytes;
        sink(incoming);
    }

    /// Queues the reply to a request handed out by `receive` (which held
    /// `hold`); `data` is sent after the header (a read's), or given back
    /// to `pool`.
    pub(crate) fn reply(
        &mut self,
        header: ReplyHeader,
        data: Option<Buffer>,
        hold: Hold,
        pool: &mut BufferPool,
    ) {
        debug_assert!(self.in_flight > 0);
        if self.is_broken() {
            self.in_flight -= 1;
            self.in_flight_bytes -= hold.bytes;
            self.budget.release(hold);
            if let Some(buffer) = data {
                pool.give(buffer);
            }
            return;
        }
        self.output
            .push_back(Outgoing::Reply { header, data, hold });
    }

    /// True when the connection has more to read than it read so far:
    /// unparsed bytes in its buffer, or a socket not yet drained, and room
    /// under its bounds to take them. The loop comes back to it when a
    /// reply going out made that room.
    pub(crate) fn wants_to_read(&self) -> bool {
        let buffered = self.tail - self.head;
        // Only what can progress: a partial header waits for bytes, which
        // raise an event of their own.
        let parsable = match self.receiving {
            Receiving::Header => buffered >= Request::LEN,
            Receiving::Payload { .. } | Receiving::Discard { .. } => buffered > 0,
        };
        self.ending.is_none()
            && matches!(self.phase, Phase::Transmission { .. })
            && self.has_room()
            && !self.starved
            && (self.readable || parsable)
    }

    /// Requests read and not yet answered in full: at the map, or their
    /// replies waiting to be sent (refusals included).
    pub(crate) fn unanswered(&self) -> usize {
        self.in_flight
    }

    /// True when replies wait to be sent.
    pub(crate) fn has_output(&self) -> bool {
        !self.output.is_empty()
    }

    /// Sends queued replies, many per system call, until none is left or
    /// the socket would block; buffers sent go back to `pool`.
    pub(crate) fn send(&mut self, pool: &mut BufferPool) {
        while !self.output.is_empty() && self.writable && !self.is_broken() {
            let mut slices = [IoSlice::new(&[]); MAX_SLICES];
            let mut count = 0;
            let mut skip = self.output_sent;
            'gather: for item in &self.output {
                for part in item.parts() {
                    if skip >= part.len() {
                        skip -= part.len();
                        continue;
                    }
                    slices[count] = IoSlice::new(&part[skip..]);
                    skip = 0;
                    count += 1;
                    if count == MAX_SLICES {
                        break 'gather;
                    }
                }
            }
            match self.stream.write_vectored(&slices[..count]) {
                Ok(0) => {
                    self.ending = Some(Ending::Socket(io::ErrorKind::WriteZero.into()));
                }
                Ok(written) => {
                    let mut written = written + self.output_sent;
                    while let Some(front) = self.output.front() {
                        let len = front.len();
                        if written < len {
                            break;
                        }
                        written -= len;
                        if let Some(Outgoing::Reply { data, hold, .. }) = self.output.pop_front() {
                            self.in_flight -= 1;
                            self.in_flight_bytes -= hold.bytes;
                            self.budget.release(hold);
                            if let Some(buffer) = data {
                                pool.give(buffer);
                            }
                        }
                    }
                    self.output_sent = written;
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => self.writable = false,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => self.ending = Some(Ending::Socket(error)),
            }
        }
    }

    /// Gives every buffer the connection still holds back to `pool`, and
    /// its bytes back to the budget. (Requests at the map give theirs
    /// back as they complete.)
    pub(crate) fn recycle(self, pool: &mut BufferPool) {
        for item in self.output {
            if let Outgoing::Reply { data, hold, .. } = item {
                self.budget.release(hold);
                if let Some(buffer) = data {
                    pool.give(buffer);
                }
            }
        }
        if let Receiving::Payload { incoming, .. } = self.receiving {
            self.budget.release(incoming.hold);
            pool.give(incoming.buf);
        }
    }
}

/// Grows a WRITE's buffer to hold at least `end` bytes of its payload
/// (doubling, never past the request's length): memory follows the
/// payload as it arrives, not the header's claim.
fn grow_payload(incoming: &mut Incoming, end: usize) {
    let length = incoming.length as usize;
    let current = incoming.buf.len();
    if current < end.min(length) {
        incoming.buf.resize(end.max(current * 2).min(length));
    }
}
