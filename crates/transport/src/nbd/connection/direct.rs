//! A read's data received straight into the read's own buffer: when a
//! reply's header is parsed (a simple reply, or a structured data chunk)
//! before its data has all arrived, the rest of the data is read into the
//! I/O's buffer, with what follows it read into the receive buffer in the
//! same vectored read; only data that came in one read with the header
//! before it is copied. While a direct read runs the receive buffer holds
//! nothing before it. A read given back meanwhile (cut or abandoned) has
//! no buffer: its data is read and dropped.

use super::reply::{finish_in_flight, unknown_cookie};
use super::{Broken, Connection};
use mpio_core::io::PathOutcome;
use mpio_core::queue::PathCompletion;
use std::io::{ErrorKind, IoSliceMut, Read};
use std::ops::Range;

/// A read's data being received straight into its buffer.
#[derive(Clone, Debug)]
pub(super) struct Direct {
    cookie: u64,
    /// Where the data goes in the read's buffer.
    range: Range<usize>,
    /// Bytes of it received.
    filled: usize,
    /// The data ends a simple reply (`None`), or a structured data chunk
    /// (`Some(done)`: with the reply's done flag or not).
    chunk_done: Option<bool>,
}

impl Connection {
    /// Reads into the direct read's buffer, and whatever follows its data
    /// into the receive buffer, in one vectored read; completes its data
    /// once all of it came. The bytes read, or `None` if the socket holds
    /// nothing now. A read given back meanwhile (cut or abandoned) has no
    /// buffer: its data is read and dropped.
    pub(super) fn read_direct(
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
                Ok(0) => return Err(self.read_ended(None)),
                Ok(read) => break read,
                Err(error) if error.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(self.read_ended(Some(error))),
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
    pub(super) fn start_direct(
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
}
