//! Ending a connection without letting a write land late: how its I/O
//! comes back depends on whether the server can still apply it.
//!
//! Once the server's side is seen closed (end of file, a reset) nothing
//! can, and [`Connection::sever`] hands everything back as a path
//! error; otherwise the caller [`Connection::cut`]s it — our sending side
//! shut, reads handed back at once, every other request kept until its
//! reply or the server's close (read, or after a protocol error read and
//! dropped, by [`Connection::poll_cut`]). A write whose payload is partly
//! written cannot be given back (its bytes must follow its header):
//! [`Connection::abandon`] refuses it until it is written.

use super::receive::POLL_BUDGET_BYTES;
use super::{Broken, Connection};
use mpio_core::io::{Buffer, Op, PathError, PathOutcome};
use mpio_core::queue::{PathCompletion, PathIo};

impl Connection {
    /// Ends the connection (both directions) and appends every I/O in
    /// flight to `completions` as [`PathError::ConnectionLost`]. Only for
    /// a connection whose server's side is closed ([`Connection::server_closed`]),
    /// or that never carried a write: otherwise a write the server holds
    /// could still land after its retry (see [`Connection::cut`]).
    pub(crate) fn sever(mut self, completions: &mut Vec<PathCompletion>) {
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
    pub(crate) fn cut(&mut self, completions: &mut Vec<PathCompletion>) {
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
    pub(crate) fn holds_requests(&self) -> bool {
        self.in_flight
            .iter()
            .any(|(_, in_flight)| !in_flight.abandoned)
    }

    /// Reads a cut connection ([`Connection::cut`]): replies still coming
    /// complete their I/O normally; once the server's side closes, what is
    /// left comes back as `ConnectionLost`. True when nothing is left to
    /// wait for (the connection can be dropped).
    pub(crate) fn poll_cut(&mut self, completions: &mut Vec<PathCompletion>) -> bool {
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
    pub(crate) fn abandon(&mut self, tag: u64) -> Option<PathIo> {
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
}
