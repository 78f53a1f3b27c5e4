//! Reply parsing: simple replies and structured reply chunks decoded from
//! the receive buffer as they complete, matched to their request by
//! cookie, in any order, and the server's errors classified
//! ([`classify`]).
//!
//! A reply the protocol forbids (bad magic, unknown cookie, data outside
//! the request, chunks that overlap, a length beyond what the request
//! allows) is an error that ends the connection: nothing read after it
//! could be trusted (`fence.rs` says how its I/O comes back). A read
//! answered in structured chunks succeeds only when its chunks cover
//! every byte of it exactly once: each read's covered ranges are tracked
//! ([`cover`]), so two chunks over the same half cannot pass for a whole
//! read.

use super::{Broken, Connection, InFlight};
use mpio_core::io::{Op, PathError, PathOutcome, TargetError};
use mpio_core::queue::PathCompletion;
use mpio_core::Slab;
use mpio_nbd::consts::*;
use mpio_nbd::reply::{header_len, Chunk, ChunkHeader, SimpleReply, MAX_ERROR_MESSAGE};
use std::ops::Range;

/// What the server answers `error` with, classified: EIO and errors that
/// say nothing about the request (ENOMEM, ESHUTDOWN, unknown values) are
/// path errors, as the kernel's `blk_path_error` treats EIO; the others
/// describe the request and every path would give them.
pub(crate) fn classify(error: u32) -> PathOutcome {
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
    /// Parses the complete replies in the receive buffer, at most
    /// `budget` of them (counted down).
    pub(super) fn parse(
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
    pub(super) fn end_reply(
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

    /// Completes `in_flight` with `outcome`, or, for a FUA write that
    /// succeeded on a server without FUA, sends the flush that makes it
    /// durable and completes it with that instead. (The write's table
    /// entry was just freed, so the flush takes its place without
    /// allocating.)
    pub(super) fn finish(
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
pub(crate) fn cover(ranges: &mut Vec<(u32, u32)>, start: u32, end: u32) -> bool {
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
pub(super) fn finish_in_flight(
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

pub(super) fn unknown_cookie(cookie: u64) -> Broken {
    Broken(format!(
        "reply for cookie {cookie:#x}, which is not in flight"
    ))
}
