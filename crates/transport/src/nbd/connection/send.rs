//! Send batching: a request waits in submission order until the socket
//! takes more; then the headers of the waiting requests are encoded into
//! the send buffer, a batch of up to [`SEND_BATCH`] bytes at a time, and
//! written with the payloads of the batch's writes, sent from the I/Os'
//! own buffers (no copy), in one vectored write per up to [`MAX_SLICES`]
//! slices. A write's payload must follow its header whole: a write whose
//! payload is partly written is held until it is
//! ([`Connection::payload_unsent`]). A FUA write, trim or write-zeroes
//! carries `CMD_FLAG_FUA` where the export takes it; where the export
//! caches but takes no FUA, it goes out plain, its successful reply sends
//! a flush, and the I/O completes with that flush
//! (`InFlight::flush_after`).

use super::{Broken, Connection, InFlight};
use mpio_core::queue::PathIo;
use mpio_core::Slab;
use mpio_nbd::consts::*;
use mpio_nbd::request::Request;
use std::io::{ErrorKind, IoSlice, Write};

/// Requests join a batch until its headers and payloads come to this
/// many bytes, so that small requests share a write call.
pub(super) const SEND_BATCH: usize = 64 * 1024;

/// Slices one vectored write passes at most (on the stack; Linux takes
/// 1024).
const MAX_SLICES: usize = 64;

/// One request of the batch being sent: its header in the send buffer,
/// then, for a write, the payload in its I/O's buffer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Part {
    header_end: usize,
    /// The write whose buffer follows the header, and its length.
    payload: Option<(u64, usize)>,
}

impl Part {
    fn len(&self, header_start: usize) -> usize {
        self.header_end - header_start + self.payload.map_or(0, |(_, len)| len)
    }
}

impl Connection {
    /// Queues `io` as command `command` and writes what the socket takes.
    /// The caller checked that the export supports it.
    ///
    /// # Errors
    /// The socket failed; `io` is in flight and comes back from
    /// [`Connection::sever`].
    pub(crate) fn send(&mut self, command: u16, io: PathIo) -> Result<(), Broken> {
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
    pub(super) fn flush(&mut self) -> Result<(), Broken> {
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
                Err(error) => return Err(self.send_failed(error)),
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
    pub(super) fn payload_unsent(&self, cookie: u64) -> bool {
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
                    "request {cookie:#x} ended before its payload was written (the server \
                     answered it early)"
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
