//! Receiving: [`Connection::poll`] sends what waits, then reads the
//! socket into the receive buffer (or a read's own buffer, `direct.rs`)
//! and parses the replies that completed (`reply.rs`). The end of file or
//! a reset marks the server's side closed, the fence `fence.rs` waits
//! for; another failed read is our side's verdict and fences nothing
//! ([`Connection::read_ended`]).
//!
//! # Budget
//! One [`Connection::poll`] parses at most [`POLL_BUDGET_REPLIES`] replies
//! and chunks and reads at most [`POLL_BUDGET_BYTES`] bytes, then returns
//! even if the socket holds more: a server that streams chunks without
//! ever ending its reply cannot keep the I/O thread inside one poll (the
//! rest waits in the socket and the receive buffer for the next poll, and
//! the core's I/O timeout fails the path if the reply never ends).

use super::{Broken, Connection};
use mpio_core::queue::PathCompletion;
use std::io::{ErrorKind, Read};

/// Receive buffer size before any large read reply grows it.
pub(super) const RECV_BUFFER: usize = 256 * 1024;

/// Replies and chunks one poll parses at most.
pub(crate) const POLL_BUDGET_REPLIES: usize = 1024;

/// Bytes one poll reads from the socket at most.
pub(crate) const POLL_BUDGET_BYTES: usize = 4 * 1024 * 1024;

impl Connection {
    /// Sends what waits, reads what the server sent (within the poll
    /// budget, see the module docs) and appends finished I/Os to
    /// `completions`. Replies the server sent before a send failed are
    /// still read and delivered before the error is returned.
    ///
    /// # Errors
    /// The connection ended or the server broke the protocol; I/O still
    /// in flight comes back from [`Connection::sever`].
    pub(crate) fn poll(&mut self, completions: &mut Vec<PathCompletion>) -> Result<(), Broken> {
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
    pub(super) fn receive(&mut self, completions: &mut Vec<PathCompletion>) -> Result<(), Broken> {
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
    /// interrupted read is tried again; the end of file or a failed read
    /// is an error ([`Connection::read_ended`]).
    pub(super) fn read_into(&mut self, at: usize) -> Result<Option<usize>, Broken> {
        loop {
            match self.stream.read(&mut self.recv[at..]) {
                Ok(0) => return Err(self.read_ended(None)),
                Ok(read) => return Ok(Some(read)),
                Err(error) if error.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(self.read_ended(Some(error))),
            }
        }
    }

    /// What a read that found the end of file (`None`) or failed says of
    /// the server. The end of file, and a reset (the server's host tore
    /// the connection down), mean its side is closed: nothing it was sent
    /// can take effect any more (the fence). Any other error (TCP's
    /// retransmission timeout, an unreachable host) is our side giving up
    /// on a server that may well still run and apply what it holds, so it
    /// fences nothing, and neither does an end of file read after it (or
    /// after a send that failed so, [`Connection::send_failed`]), which
    /// is our socket's, not the server's: a held write then waits for the
    /// core's fence timeout.
    pub(crate) fn read_ended(&mut self, error: Option<std::io::Error>) -> Broken {
        if let Some(error) = &error {
            self.note_failure(error);
        }
        self.server_closed |= !self.failed_locally;
        Broken(match error {
            None => "the server closed the connection".into(),
            Some(error) if self.server_closed => format!("receiving: {error}"),
            Some(error) => format!("receiving: {error} (the server may still apply what it holds)"),
        })
    }

    /// A failed send, which [`Connection::note_failure`] reads as
    /// [`Connection::read_ended`] reads a failed read: the kernel reports
    /// TCP's timeout once, to whichever call comes first, so a send that
    /// got it must keep the next read's end of file from passing for the
    /// server's close.
    pub(crate) fn send_failed(&mut self, error: std::io::Error) -> Broken {
        self.note_failure(&error);
        Broken(format!("sending: {error}"))
    }

    /// Marks a failed read or send that was our side's verdict, not the
    /// server's close: anything but a reset (the server's host tore the
    /// connection down) or a broken pipe (it closed its side).
    fn note_failure(&mut self, error: &std::io::Error) {
        if !matches!(
            error.kind(),
            ErrorKind::ConnectionReset | ErrorKind::BrokenPipe
        ) {
            self.failed_locally = true;
        }
    }

    /// Makes the receive buffer hold at least `need` bytes from
    /// `recv_start`, moving unparsed bytes to the front.
    pub(super) fn make_room(&mut self, need: usize) {
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
}
