//! One established NBD connection in the transmission phase, driven
//! without blocking: requests wait in submission order and their headers
//! are encoded into a send buffer, a batch at a time, as the socket takes
//! them; a write's payload is sent from the I/O's own buffer (one vectored
//! write carries headers and payloads: no copy);
//! replies are read into a receive buffer and parsed as they complete, in
//! whatever order the server sends them. A read's data that has not
//! arrived when its reply's header is parsed (a simple reply, or a
//! structured data chunk) is read straight into the I/O's buffer, with
//! what follows it read into the receive buffer in the same vectored
//! read; only data that came in one read with the header before it is
//! copied. Each request travels under its
//! own cookie from an [`Slab`], not under the I/O's tag.
//!
//! # Allocation
//! None per I/O once the connection has carried its depth of requests:
//! the table, the waiting list, the send buffer (headers only) and the
//! batch's list of parts are sized then, whatever the server's pace; each
//! request's list of
//! covered ranges is one of `depth` lists made with the connection and
//! reused (a server that sends a read's chunks out of order may grow one,
//! once).
//!
//! # Errors and fencing
//! A reply the protocol forbids (bad magic, unknown cookie, data outside
//! the request, chunks that overlap, a length beyond what the request
//! allows) ends the connection: nothing read after it could be trusted.
//! How its I/O comes back depends on whether the server can still apply
//! it: once the server's side is seen closed (end of file, a receive
//! error) nothing can, and [`Connection::sever`] hands everything back as
//! a path error; otherwise the caller [`Connection::cut`]s it — our
//! sending side shut, reads handed back at once, every other request
//! kept until its reply or the server's close (read, or after a protocol
//! error read and dropped, by [`Connection::poll_cut`]). A write whose
//! payload is partly written cannot be given back (its bytes must follow
//! its header): [`Connection::abandon`] refuses it until it is written.
//! A read
//! answered in structured chunks succeeds only when its chunks cover every
//! byte of it exactly once: the connection tracks each read's covered
//! ranges, so two chunks over the same half cannot pass for a whole read.
//!
//! # Budget
//! One [`Connection::poll`] parses at most [`POLL_BUDGET_REPLIES`] replies
//! and chunks and reads at most [`POLL_BUDGET_BYTES`] bytes, then returns
//! even if the socket holds more: a server that streams chunks without
//! ever ending its reply cannot keep the I/O thread inside one poll (the
//! rest waits in the socket and the receive buffer for the next poll, and
//! the core's I/O timeout fails the path if the reply never ends).

use super::handshake::Export;
use super::stream::Stream;
use mpio_core::io::{Buffer, Op, PathError, PathOutcome, TargetError};
use mpio_core::queue::{PathCompletion, PathIo};
use mpio_core::slab::Slab;
use mpio_nbd::consts::*;
use mpio_nbd::reply::{header_len, Chunk, ChunkHeader, SimpleReply, MAX_ERROR_MESSAGE};
use mpio_nbd::request::Request;
use std::collections::VecDeque;
use std::io::{ErrorKind, IoSlice, IoSliceMut, Read, Write};
use std::ops::Range;

/// Receive buffer size before any large read reply grows it.
const RECV_BUFFER: usize = 256 * 1024;

/// Replies and chunks one poll parses at most.
pub const POLL_BUDGET_REPLIES: usize = 1024;

/// Bytes one poll reads from the socket at most.
pub const POLL_BUDGET_BYTES: usize = 4 * 1024 * 1024;

/// Requests join a batch until its headers and payloads come to this
/// many bytes, so that small requests share a write call.
const SEND_BATCH: usize = 64 * 1024;

/// Slices one vectored write passes at most (on the stack; Linux takes
/// 1024).
const MAX_SLICES: usize = 64;

/// One request of the batch being sent: its header in the send buffer,
/// then, for a write, the payload in its I/O's buffer.
#[derive(Clone, Copy, Debug)]
struct Part {
    header_end: usize,
    /// The write whose buffer follows the header, and its length.
    payload: Option<(u64, usize)>,
}

impl Part {
    fn len(&self, header_start: usize) -> usize {
        self.header_end - header_start + self.payload.map_or(0, |(_, len)| len)
    }
}

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

/// A read's data being received straight into its buffer.
#[derive(Clone, Debug)]
struct Direct {
    cookie: u64,
    /// Where the data goes in the read's buffer.
    range: Range<usize>,
    /// Bytes of it received.
    filled: usize,
    /// The data ends a simple reply (`None`), or a structured data chunk
    /// (`Some(done)`: with the reply's done flag or not).
    chunk_done: Option<bool>,
}

/// Why a connection ended.
#[derive(Debug)]
pub struct Broken(pub String);

/// An established connection. See the module docs.
#[derive(Debug)]
pub struct Connection {
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
    /// the receive buffer is empty before it (see the module docs).
    direct: Option<Direct>,
    /// Emptied `covered` lists of finished reads, reused so that steady
    /// state allocates nothing.
    spare_covered: Vec<Vec<(u32, u32)>>,
    /// The server's side was seen closed (end of file or a receive
    /// error): nothing sent on this connection can take effect any more.
    server_closed: bool,
    /// Our sending side is shut down (see [`Connection::cut`]).
    cut: bool,
    /// The server broke the protocol after the cut: what it sends is read
    /// and dropped until it closes.
    discarding: bool,
}

/// What the server answers `error` with, classified: EIO and errors that
/// say nothing about the request (ENOMEM, ESHUTDOWN, unknown values) are
/// path errors, as the kernel's `blk_path_error` treats EIO; the others
/// describe the request and every path would give them.
pub fn classify(error: u32) -> PathOutcome {
    match error {
        ENOSPC => PathOutcome::Target(TargetError::NoSpace),
        EINVAL | EOVERFLOW => PathOutcome::Target(TargetError::Invalid),
        // EPERM: a write to a read-only export, refused by the server.
        ENOTSUP | EPERM => PathOutcome::Target(TargetError::NotSupported),
        EIO | ENOMEM | ESHUTDOWN => PathOutcome::Path(PathError::Transport),
        _ => PathOutcome::Path(PathError::Unknown),
    }
}

impl Connection {
    /// Wraps a stream whose handshake ended with `export`, for `depth`
    /// I/Os in flight.
    ///
    /// # Errors
    /// The socket cannot be made non-blocking.
    pub fn new(stream: Stream, export: Export, depth: usize) -> std::io::Result<Connection> {
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
            cut: false,
            discarding: false,
        })
    }

    /// What the server said about the export.
    pub fn export(&self) -> &Export {
        &self.export
    }

    /// I/Os waiting for their reply.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// True if `tag` is waiting for its reply (and not abandoned).
    pub fn is_in_flight(&self, tag: u64) -> bool {
        self.in_flight
            .iter()
            .any(|(_, in_flight)| in_flight.io.tag == tag && !in_flight.abandoned)
    }

    /// True once the server's side was seen closed.
    pub fn server_closed(&self) -> bool {
        self.server_closed
    }

    /// Queues `io` as command `command` and writes what the socket takes.
    /// The caller checked that the export supports it.
    ///
    /// # Errors
    /// The socket failed; `io` is in flight and comes back from
    /// [`Connection::sever`].
    pub fn send(&mut self, command: u16, io: PathIo) -> Result<(), Broken> {
        let write_like = matches!(command, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES);
        let flush_after = io.fua
            && write_like
            && !self.export.has(FLAG_SEND_FUA)
            && self.export.has(FLAG_SEND_FLUSH);
        let cookie = self.in_flight.insert(InFlight {
            io,
            command,
            flush_after,
            received: 0,
            // Room for two ranges up front: a list first used by a write
            // must not allocate when a read reuses it.
            covered: self
                .spare_covered
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(2)),
            error: None,
            abandoned: false,
        });
        self.unsent.push_back(cookie);
        self.flush()
    }

    /// Makes the next batch of waiting requests: their headers in the
    /// empty send buffer, one part each.
    fn refill(&mut self) {
        self.send.clear();
        self.parts.clear();
        self.part = 0;
        self.part_sent = 0;
        let mut batch = 0;
        while batch < SEND_BATCH {
            let Some(cookie) = self.unsent.pop_front() else {
                break;
            };
            // A request whose I/O already ended (a server answered a
            // cookie it was never sent) is not sent.
            let Some(in_flight) = self.in_flight.get(cookie) else {
                continue;
            };
            // FUA where the server takes it; a server without it either
            // caches nothing (no SEND_FLUSH) or gets a flush after the
            // write (`flush_after`).
            let fua = in_flight.io.fua
                && matches!(in_flight.command, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES)
                && self.export.has(FLAG_SEND_FUA);
            // A flush has no range (the protocol wants 0 and 0), whatever
            // the I/O it is for says: a FUA write's follow-up flush has one.
            let (offset, length) = if in_flight.command == CMD_FLUSH {
                (0, 0)
            } else {
                (in_flight.io.offset, in_flight.io.len)
            };
            let request = Request {
                flags: if fua { CMD_FLAG_FUA } else { 0 },
                command: in_flight.command,
                cookie,
                offset,
                length,
            };
            self.send.extend_from_slice(&request.encode());
            // `command_for` checked that a write's buffer is its length.
            let payload =
                (in_flight.command == CMD_WRITE).then(|| (cookie, in_flight.io.buf.len()));
            batch += Request::LEN + payload.map_or(0, |(_, len)| len);
            self.parts.push(Part {
                header_end: self.send.len(),
                payload,
            });
        }
    }

    /// Writes what the socket takes of the waiting requests: headers from
    /// the send buffer, payloads from their I/Os' buffers, in one vectored
    /// write per up to [`MAX_SLICES`] slices.
    ///
    /// # Errors
    /// The socket failed, or the server answered a write before its
    /// payload was written (its buffer is gone: the stream cannot go on).
    fn flush(&mut self) -> Result<(), Broken> {
        loop {
            if self.part == self.parts.len() {
                self.refill();
                if self.parts.is_empty() {
                    return Ok(());
                }
            }
            let mut slices = [IoSlice::new(&[]); MAX_SLICES];
            let count = batch_slices(
                &self.send,
                &self.parts[self.part..],
                self.header_start(self.part),
                self.part_sent,
                &self.in_flight,
                &mut slices,
            )?;
            match self.stream.write_vectored(&slices[..count]) {
                Ok(0) => return Err(Broken("the server stopped taking requests".into())),
                Ok(written) => self.advance(written),
                Err(error) if error.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(Broken(format!("sending: {error}"))),
            }
        }
    }

    /// Where part `index`'s header starts in the send buffer.
    fn header_start(&self, index: usize) -> usize {
        index
            .checked_sub(1)
            .map_or(0, |before| self.parts[before].header_end)
    }

    /// Counts `written` more bytes of the batch as sent.
    fn advance(&mut self, mut written: usize) {
        while written > 0 {
            let left = self.parts[self.part].len(self.header_start(self.part)) - self.part_sent;
            if written < left {
                self.part_sent += written;
                return;
            }
            written -= left;
            self.part += 1;
            self.part_sent = 0;
        }
    }

    /// True if `cookie`'s payload is in the batch and not wholly written.
    fn payload_unsent(&self, cookie: u64) -> bool {
        let mut start = self.header_start(self.part);
        self.parts[self.part..]
            .iter()
            .enumerate()
            .any(|(at, part)| {
                let header_len = part.header_end - start;
                start = part.header_end;
                matches!(part.payload, Some((of, len)) if of == cookie
                && (at > 0 || self.part_sent < header_len + len))
            })
    }

    /// Sends what waits, reads what the server sent (within the poll
    /// budget, see the module docs) and appends finished I/Os to
    /// `completions`. Replies the server sent before a send failed are
    /// still read and delivered before the error is returned.
    ///
    /// # Errors
    /// The connection ended or the server broke the protocol; I/O still
    /// in flight comes back from [`Connection::sever`].
    pub fn poll(&mut self, completions: &mut Vec<PathCompletion>) -> Result<(), Broken> {
        let sent = self.flush();
        self.receive(completions)?;
        sent?;
        // Flushes that FUA writes' replies queued go out now.
        if !self.unsent.is_empty() {
            self.flush()?;
        }
        Ok(())
    }

    /// Parses what the receive buffer holds, then reads and parses until
    /// the socket is empty or the poll budget is spent.
    fn receive(&mut self, completions: &mut Vec<PathCompletion>) -> Result<(), Broken> {
        let mut replies = POLL_BUDGET_REPLIES;
        let mut bytes = 0;
        // Replies an earlier poll read but left to this one.
        self.parse(completions, &mut replies)?;
        while replies > 0 && bytes < POLL_BUDGET_BYTES {
            if self.direct.is_some() {
                let Some(read) = self.read_direct(completions)? else {
                    return Ok(());
                };
                bytes += read;
                if self.direct.is_none() {
                    replies -= 1;
                }
                self.parse(completions, &mut replies)?;
                continue;
            }
            if self.recv_end == self.recv.len() {
                self.make_room(self.recv.len() - self.recv_start + 1);
            }
            let Some(read) = self.read_into(self.recv_end)? else {
                return Ok(());
            };
            self.recv_end += read;
            bytes += read;
            self.parse(completions, &mut replies)?;
        }
        Ok(())
    }

    /// Reads from the socket into the receive buffer from `at` on: the
    /// bytes read, or `None` if the socket holds nothing now. An
    /// interrupted read is tried again; the server closing the connection
    /// or a failed read is an error (and marks the server closed).
    fn read_into(&mut self, at: usize) -> Result<Option<usize>, Broken> {
        loop {
            match self.stream.read(&mut self.recv[at..]) {
                Ok(0) => {
                    self.server_closed = true;
                    return Err(Broken("the server closed the connection".into()));
                }
                Ok(read) => return Ok(Some(read)),
                Err(error) if error.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => {
                    self.server_closed = true;
                    return Err(Broken(format!("receiving: {error}")));
                }
            }
        }
    }

    /// Reads into the direct read's buffer, and whatever follows its data
    /// into the receive buffer, in one vectored read; completes its data
    /// once all of it came. The bytes read, or `None` if the socket holds
    /// nothing now. A read given back meanwhile (cut or abandoned) has no
    /// buffer: its data is read and dropped.
    fn read_direct(
        &mut self,
        completions: &mut Vec<PathCompletion>,
    ) -> Result<Option<usize>, Broken> {
        let Some(direct) = self.direct.as_mut() else {
            return Ok(None);
        };
        debug_assert_eq!(self.recv_start, 0);
        let left = direct.range.len() - direct.filled;
        let discard = left.min(self.recv.len());
        let mut target = self
            .in_flight
            .get_mut(direct.cookie)
            .filter(|in_flight| !in_flight.abandoned)
            .map(|in_flight| {
                &mut in_flight.io.buf.as_mut_slice()
                    [direct.range.start + direct.filled..direct.range.end]
            });
        let read = loop {
            let result = match target {
                Some(ref mut target) => {
                    let mut slices = [
                        IoSliceMut::new(target),
                        IoSliceMut::new(&mut self.recv[self.recv_end..]),
                    ];
                    self.stream.read_vectored(&mut slices)
                }
                // Nowhere to put it: read no further than its end.
                None => self.stream.read(&mut self.recv[..discard]),
            };
            match result {
                Ok(0) => {
                    self.server_closed = true;
                    return Err(Broken("the server closed the connection".into()));
                }
                Ok(read) => break read,
                Err(error) if error.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => {
                    self.server_closed = true;
                    return Err(Broken(format!("receiving: {error}")));
                }
            }
        };
        let data = read.min(left);
        if target.is_some() {
            self.recv_end += read - data;
        }
        direct.filled += data;
        if direct.filled == direct.range.len() {
            self.end_direct(completions)?;
        }
        Ok(Some(read))
    }

    /// The direct read's data all came: ends its simple reply, or its
    /// chunk (and the reply, if that chunk was the last).
    fn end_direct(&mut self, completions: &mut Vec<PathCompletion>) -> Result<(), Broken> {
        let Some(direct) = self.direct.take() else {
            return Ok(());
        };
        match direct.chunk_done {
            None => {
                let in_flight =
                    finish_in_flight(&mut self.in_flight, &mut self.spare_covered, direct.cookie)?;
                self.finish(in_flight, PathOutcome::Ok, completions);
                Ok(())
            }
            Some(done) => {
                let in_flight = self
                    .in_flight
                    .get_mut(direct.cookie)
                    .ok_or_else(|| unknown_cookie(direct.cookie))?;
                in_flight.received += direct.range.len() as u64;
                if done {
                    self.end_reply(direct.cookie, completions)?;
                }
                Ok(())
            }
        }
    }

    /// Starts receiving the data of `cookie`'s read into `range` of its
    /// buffer: the `present` bytes that came already are copied there, and
    /// the receive buffer, which held nothing after them, is emptied.
    fn start_direct(
        &mut self,
        cookie: u64,
        range: Range<usize>,
        present: usize,
        chunk_done: Option<bool>,
    ) {
        let from = self.recv_end - present;
        if let Some(in_flight) = self.in_flight.get_mut(cookie) {
            in_flight.io.buf.as_mut_slice()[range.start..range.start + present]
                .copy_from_slice(&self.recv[from..self.recv_end]);
        }
        self.recv_start = 0;
        self.recv_end = 0;
        self.direct = Some(Direct {
            cookie,
            range,
            filled: present,
            chunk_done,
        });
    }

    /// Completes `in_flight` with `outcome`, or, for a FUA write that
    /// succeeded on a server without FUA, sends the flush that makes it
    /// durable and completes it with that instead. (The write's table
    /// entry was just freed, so the flush takes its place without
    /// allocating.)
    fn finish(
        &mut self,
        mut in_flight: InFlight,
        outcome: PathOutcome,
        completions: &mut Vec<PathCompletion>,
    ) {
        if in_flight.abandoned {
            return;
        }
        if in_flight.flush_after && outcome == PathOutcome::Ok {
            in_flight.flush_after = false;
            in_flight.command = CMD_FLUSH;
            in_flight.received = 0;
            let cookie = self.in_flight.insert(in_flight);
            self.unsent.push_back(cookie);
            return;
        }
        completions.push(PathCompletion {
            tag: in_flight.io.tag,
            buf: in_flight.io.buf,
            outcome,
        });
    }

    /// Ends the connection (both directions) and appends every I/O in
    /// flight to `completions` as [`PathError::ConnectionLost`]. Only for
    /// a connection whose server's side is closed ([`Connection::server_closed`]),
    /// or that never carried a write: otherwise a write the server holds
    /// could still land after its retry (see [`Connection::cut`]).
    pub fn sever(mut self, completions: &mut Vec<PathCompletion>) {
        self.stream.shutdown();
        self.fail_all(completions);
    }

    /// Hands every I/O in flight, but those abandoned, to `completions`
    /// as [`PathError::ConnectionLost`].
    fn fail_all(&mut self, completions: &mut Vec<PathCompletion>) {
        self.unsent.clear();
        self.direct = None;
        self.in_flight.drain(|in_flight| {
            if !in_flight.abandoned {
                completions.push(PathCompletion {
                    tag: in_flight.io.tag,
                    buf: in_flight.io.buf,
                    outcome: PathOutcome::Path(PathError::ConnectionLost),
                });
            }
        });
    }

    /// Cuts the connection from our side without letting go of what the
    /// server may still apply: shuts our sending side down, hands back at
    /// once (as `ConnectionLost`) what cannot take effect — requests never
    /// written to the socket, and reads (their late replies are read and
    /// dropped) — and keeps every other request until its reply comes
    /// ([`Connection::poll_cut`] completes it normally) or the server's
    /// side closes (the fence: then it comes back as `ConnectionLost`).
    pub fn cut(&mut self, completions: &mut Vec<PathCompletion>) {
        self.stream.shutdown_write();
        self.cut = true;
        while let Some(cookie) = self.unsent.pop_front() {
            // Never written to the socket (a request, or a FUA write's
            // follow-up flush): the server cannot hold it.
            if let Some(mut in_flight) = self.in_flight.remove(cookie) {
                let mut covered = std::mem::take(&mut in_flight.covered);
                covered.clear();
                self.spare_covered.push(covered);
                if !in_flight.abandoned {
                    completions.push(PathCompletion {
                        tag: in_flight.io.tag,
                        buf: in_flight.io.buf,
                        outcome: PathOutcome::Path(PathError::ConnectionLost),
                    });
                }
            }
        }
        self.in_flight.iter_mut().for_each(|(_, in_flight)| {
            if in_flight.io.op == Op::Read && !in_flight.abandoned {
                in_flight.abandoned = true;
                completions.push(PathCompletion {
                    tag: in_flight.io.tag,
                    buf: std::mem::replace(&mut in_flight.io.buf, Buffer::empty()),
                    outcome: PathOutcome::Path(PathError::ConnectionLost),
                });
            }
        });
    }

    /// True while the connection holds a request the server may still
    /// apply (in flight and not abandoned).
    pub fn holds_requests(&self) -> bool {
        self.in_flight
            .iter()
            .any(|(_, in_flight)| !in_flight.abandoned)
    }

    /// Reads a cut connection ([`Connection::cut`]): replies still coming
    /// complete their I/O normally; once the server's side closes, what is
    /// left comes back as `ConnectionLost`. True when nothing is left to
    /// wait for (the connection can be dropped).
    pub fn poll_cut(&mut self, completions: &mut Vec<PathCompletion>) -> bool {
        debug_assert!(self.cut);
        let result = if self.discarding {
            self.discard()
        } else {
            self.receive(completions)
        };
        if result.is_err() && !self.server_closed {
            // A protocol error: nothing more can be parsed, but the server
            // may still apply what it holds until it closes.
            self.discarding = true;
        }
        if self.server_closed {
            self.fail_all(completions);
        }
        !self.holds_requests()
    }

    /// Reads and drops what the server sends, until it closes.
    fn discard(&mut self) -> Result<(), Broken> {
        let mut bytes = 0;
        while bytes < POLL_BUDGET_BYTES {
            let Some(read) = self.read_into(0)? else {
                return Ok(());
            };
            bytes += read;
        }
        Ok(())
    }

    /// Gives back I/O `tag` if the connection still holds it, and drops
    /// its reply if one ever comes (the core's last resort past its fence
    /// timeout: the request may still take effect).
    /// A write not yet encoded is taken out (the server never sees it); a
    /// write whose payload is partly written is not given back (the
    /// caller may ask again once it is).
    pub fn abandon(&mut self, tag: u64) -> Option<PathIo> {
        let (cookie, _) = self
            .in_flight
            .iter()
            .find(|(_, in_flight)| in_flight.io.tag == tag && !in_flight.abandoned)?;
        if self.payload_unsent(cookie) {
            return None;
        }
        if let Some(at) = self.unsent.iter().position(|&unsent| unsent == cookie) {
            self.unsent.remove(at);
            let mut in_flight = self.in_flight.remove(cookie)?;
            let mut covered = std::mem::take(&mut in_flight.covered);
            covered.clear();
            self.spare_covered.push(covered);
            return Some(in_flight.io);
        }
        let mut given = None;
        self.in_flight.iter_mut().for_each(|(_, in_flight)| {
            if in_flight.io.tag == tag && !in_flight.abandoned {
                in_flight.abandoned = true;
                given = Some(PathIo {
                    tag,
                    op: in_flight.io.op,
                    offset: in_flight.io.offset,
                    len: in_flight.io.len,
                    buf: std::mem::replace(&mut in_flight.io.buf, Buffer::empty()),
                    fua: in_flight.io.fua,
                });
            }
        });
        given
    }

    /// Makes the receive buffer hold at least `need` bytes from
    /// `recv_start`, moving unparsed bytes to the front.
    fn make_room(&mut self, need: usize) {
        if self.recv_start + need <= self.recv.len() {
            return;
        }
        let pending = self.recv_end - self.recv_start;
        if need > self.recv.len() {
            let mut bigger = vec![0; need].into_boxed_slice();
            bigger[..pending].copy_from_slice(&self.recv[self.recv_start..self.recv_end]);
            self.recv = bigger;
        } else {
            self.recv.copy_within(self.recv_start..self.recv_end, 0);
        }
        self.recv_start = 0;
        self.recv_end = pending;
    }

    /// Parses the complete replies in the receive buffer, at most
    /// `budget` of them (counted down).
    fn parse(
        &mut self,
        completions: &mut Vec<PathCompletion>,
        budget: &mut usize,
    ) -> Result<(), Broken> {
        while *budget > 0 {
            let available = &self.recv[self.recv_start..self.recv_end];
            let Some(header_len) = header_len(available).map_err(wire)? else {
                break;
            };
            if available.len() < header_len {
                self.make_room(header_len);
                break;
            }
            let used = if header_len == SimpleReply::LEN {
                self.parse_simple(completions)?
            } else {
                self.parse_chunk(completions)?
            };
            let Some(used) = used else { break };
            self.recv_start += used;
            *budget -= 1;
        }
        if self.recv_start == self.recv_end {
            self.recv_start = 0;
            self.recv_end = 0;
        }
        Ok(())
    }

    /// Parses the simple reply at `recv_start`: `Ok(None)` if its data has
    /// not all arrived, else the bytes it took.
    fn parse_simple(
        &mut self,
        completions: &mut Vec<PathCompletion>,
    ) -> Result<Option<usize>, Broken> {
        let available = &self.recv[self.recv_start..self.recv_end];
        let reply = SimpleReply::decode(available).map_err(wire)?;
        let in_flight = self
            .in_flight
            .get(reply.cookie)
            .ok_or_else(|| unknown_cookie(reply.cookie))?;
        let data_len = if in_flight.io.op == Op::Read && reply.error == 0 {
            in_flight.io.len as usize
        } else {
            0
        };
        let total = SimpleReply::LEN + data_len;
        if available.len() < total {
            if data_len > 0 && !in_flight.abandoned {
                let present = available.len() - SimpleReply::LEN;
                self.start_direct(reply.cookie, 0..data_len, present, None);
            } else {
                self.make_room(total);
            }
            return Ok(None);
        }
        let mut in_flight =
            finish_in_flight(&mut self.in_flight, &mut self.spare_covered, reply.cookie)?;
        let outcome = if reply.error == 0 {
            if data_len > 0 && !in_flight.abandoned {
                in_flight
                    .io
                    .buf
                    .as_mut_slice()
                    .copy_from_slice(&available[SimpleReply::LEN..total]);
            }
            PathOutcome::Ok
        } else {
            classify(reply.error)
        };
        self.finish(in_flight, outcome, completions);
        Ok(Some(total))
    }

    /// Parses the structured reply chunk at `recv_start`, like
    /// [`Connection::parse_simple`].
    fn parse_chunk(
        &mut self,
        completions: &mut Vec<PathCompletion>,
    ) -> Result<Option<usize>, Broken> {
        let available = &self.recv[self.recv_start..self.recv_end];
        let header = ChunkHeader::decode(available).map_err(wire)?;
        let in_flight = self
            .in_flight
            .get_mut(header.cookie)
            .ok_or_else(|| unknown_cookie(header.cookie))?;
        // A data chunk carries at most the whole read; anything else is
        // small. The bound keeps a bad length from growing the buffer.
        let limit = (u64::from(in_flight.io.len) + 8).max(16 + MAX_ERROR_MESSAGE as u64);
        if u64::from(header.length) > limit {
            return Err(Broken(format!(
                "reply chunk of {} bytes for a request of {}",
                header.length, in_flight.io.len
            )));
        }
        let total = ChunkHeader::LEN + header.length as usize;
        // The offset of a data chunk, once its header and offset came.
        const DATA_AT: usize = ChunkHeader::LEN + 8;
        if available.len() < total {
            let data_chunk = header.reply_type == REPLY_TYPE_OFFSET_DATA
                && header.length > 8
                && available.len() >= DATA_AT;
            if data_chunk && !in_flight.abandoned {
                let offset = u64::from_be_bytes(
                    available[ChunkHeader::LEN..DATA_AT]
                        .try_into()
                        .expect("eight bytes"),
                );
                let present = available.len() - DATA_AT;
                let range = place(in_flight, offset, u64::from(header.length) - 8)?;
                self.start_direct(header.cookie, range, present, Some(header.is_done()));
            } else {
                self.make_room(total);
            }
            return Ok(None);
        }
        let chunk = Chunk::decode(&header, &available[ChunkHeader::LEN..total]).map_err(wire)?;
        match chunk {
            Chunk::None | Chunk::Unknown { .. }
                if header.reply_type & REPLY_TYPE_FLAG_ERROR == 0 => {}
            Chunk::OffsetData { offset, data } => {
                let range = place(in_flight, offset, data.len() as u64)?;
                if !in_flight.abandoned {
                    in_flight.io.buf.as_mut_slice()[range].copy_from_slice(data);
                }
                in_flight.received += data.len() as u64;
            }
            Chunk::OffsetHole { offset, length } => {
                let range = place(in_flight, offset, u64::from(length))?;
                if !in_flight.abandoned {
                    in_flight.io.buf.as_mut_slice()[range].fill(0);
                }
                in_flight.received += u64::from(length);
            }
            Chunk::Error { error, .. } => {
                in_flight.error.get_or_insert(classify(error));
            }
            Chunk::None | Chunk::Unknown { .. } => {
                in_flight
                    .error
                    .get_or_insert(PathOutcome::Path(PathError::Unknown));
            }
        }
        if header.is_done() {
            self.end_reply(header.cookie, completions)?;
        }
        Ok(Some(total))
    }

    /// The last chunk of `cookie`'s structured reply came: completes it
    /// with its first error, or as short if its data did not cover it.
    fn end_reply(
        &mut self,
        cookie: u64,
        completions: &mut Vec<PathCompletion>,
    ) -> Result<(), Broken> {
        let in_flight = finish_in_flight(&mut self.in_flight, &mut self.spare_covered, cookie)?;
        let expected = if in_flight.io.op == Op::Read {
            u64::from(in_flight.io.len)
        } else {
            0
        };
        let short = in_flight.error.is_none() && in_flight.received != expected;
        let outcome = match in_flight.error {
            Some(outcome) => outcome,
            None if short => PathOutcome::Path(PathError::Transport),
            None => PathOutcome::Ok,
        };
        let received = in_flight.received;
        self.finish(in_flight, outcome, completions);
        if short {
            return Err(Broken(format!(
                "read of {expected} bytes answered with {received} (overlapping or missing chunks)"
            )));
        }
        Ok(())
    }
}

/// Fills `slices` with what is left to write of `parts` (the first of
/// them starting at `header_start` in `send`, `part_sent` bytes of it
/// written): runs of headers as one slice, each payload from its I/O's
/// buffer. Returns how many slices it filled.
///
/// # Errors
/// A part's write is no longer held with its payload (the server answered
/// it before it was written, or it was abandoned).
fn batch_slices<'a>(
    send: &'a [u8],
    parts: &[Part],
    header_start: usize,
    part_sent: usize,
    in_flight: &'a Slab<InFlight>,
    slices: &mut [IoSlice<'a>; MAX_SLICES],
) -> Result<usize, Broken> {
    let mut count = 0;
    // Headers not yet in a slice: `send[headers.0..headers.1]`.
    let mut headers = (header_start + part_sent, header_start + part_sent);
    let mut skip = part_sent;
    let mut start = header_start;
    for part in parts {
        let header_len = part.header_end - start;
        start = part.header_end;
        let header_skip = skip.min(header_len);
        skip -= header_skip;
        headers.1 = part.header_end;
        let Some((cookie, len)) = part.payload else {
            continue;
        };
        // Room for the headers and this payload, with one slice to spare
        // for the headers after it.
        if count + 2 >= MAX_SLICES {
            break;
        }
        let payload = in_flight
            .get(cookie)
            .map(|in_flight| in_flight.io.buf.as_slice())
            .filter(|payload| payload.len() == len)
            .ok_or_else(|| {
                Broken(format!(
                    "request {cookie:#x} ended before its payload was written                      (the server answered it early)"
                ))
            })?;
        if headers.0 < headers.1 {
            slices[count] = IoSlice::new(&send[headers.0..headers.1]);
            count += 1;
        }
        headers = (part.header_end, part.header_end);
        slices[count] = IoSlice::new(&payload[skip..]);
        count += 1;
        skip = 0;
    }
    if headers.0 < headers.1 && count < MAX_SLICES {
        slices[count] = IoSlice::new(&send[headers.0..headers.1]);
        count += 1;
    }
    Ok(count)
}

/// Where a data chunk or hole of `len` bytes at `offset` lands in the read
/// `in_flight`, checked against the request (without overflow, whatever
/// the server's offset) and against the chunks before it (no byte twice;
/// the range is marked covered).
fn place(in_flight: &mut InFlight, offset: u64, len: u64) -> Result<Range<usize>, Broken> {
    let (io_offset, io_len) = (in_flight.io.offset, u64::from(in_flight.io.len));
    let start = offset.checked_sub(io_offset);
    let end = start.and_then(|start| start.checked_add(len));
    let (Some(start), Some(end)) = (start, end) else {
        return Err(outside(offset, len, io_offset, io_len));
    };
    if in_flight.io.op != Op::Read || end > io_len {
        return Err(outside(offset, len, io_offset, io_len));
    }
    // Both fit in the read's u32 length.
    if !cover(&mut in_flight.covered, start as u32, end as u32) {
        return Err(Broken(format!(
            "reply data at {offset}+{len} overlaps an earlier chunk of the request at \
             {io_offset}+{io_len}"
        )));
    }
    Ok(start as usize..end as usize)
}

/// Adds `start..end` to the sorted, disjoint, merged `ranges`; false
/// (and `ranges` unchanged) if it overlaps one of them.
pub fn cover(ranges: &mut Vec<(u32, u32)>, start: u32, end: u32) -> bool {
    if start >= end {
        return true;
    }
    let at = ranges.partition_point(|&(first, _)| first < start);
    let joins_previous = match at.checked_sub(1).map(|previous| ranges[previous]) {
        Some((_, previous_end)) if previous_end > start => return false,
        Some((_, previous_end)) => previous_end == start,
        None => false,
    };
    let joins_next = match ranges.get(at) {
        Some(&(next_start, _)) if next_start < end => return false,
        Some(&(next_start, _)) => next_start == end,
        None => false,
    };
    match (joins_previous, joins_next) {
        (true, true) => {
            ranges[at - 1].1 = ranges[at].1;
            ranges.remove(at);
        }
        (true, false) => ranges[at - 1].1 = end,
        (false, true) => ranges[at].0 = start,
        (false, false) => ranges.insert(at, (start, end)),
    }
    true
}

fn outside(offset: u64, len: u64, io_offset: u64, io_len: u64) -> Broken {
    Broken(format!(
        "reply data at {offset}+{len} outside the request at {io_offset}+{io_len}"
    ))
}

fn wire(error: mpio_nbd::WireError) -> Broken {
    Broken(format!("protocol error: {error}"))
}

/// Takes the request `cookie` out of flight for its final reply, and puts
/// its list of covered ranges back in `spare`, emptied, for the next read
/// (one way for simple and structured replies alike: a list handed back
/// with ranges in it would refuse the next read's chunks as overlaps).
fn finish_in_flight(
    in_flight: &mut Slab<InFlight>,
    spare: &mut Vec<Vec<(u32, u32)>>,
    cookie: u64,
) -> Result<InFlight, Broken> {
    let Some(mut request) = in_flight.remove(cookie) else {
        return Err(unknown_cookie(cookie));
    };
    let mut covered = std::mem::take(&mut request.covered);
    covered.clear();
    spare.push(covered);
    Ok(request)
}

fn unknown_cookie(cookie: u64) -> Broken {
    Broken(format!(
        "reply for cookie {cookie:#x}, which is not in flight"
    ))
}
