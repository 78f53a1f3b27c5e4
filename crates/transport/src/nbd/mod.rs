//! The `nbd` transport: a path is a connection to an NBD server, over TCP
//! (`nbd://host[:port]/export`) or a unix socket
//! (`nbd+unix:///export?socket=/path`).
//!
//! Each I/O thread's [`NbdQueue`] owns its own connection to the path's
//! server (one connection per thread per path), and keeps up to the
//! queue's depth of requests in flight on it, answered in any order. The
//! socket is non-blocking and driven only from [`PathQueue::submit`] and
//! [`PathQueue::poll`], on the thread that owns the queue: no thread per
//! connection. The handshake (fixed newstyle, `OPT_STRUCTURED_REPLY`,
//! `OPT_GO`) runs blocking, bounded by [`CONNECT_TIMEOUT`] per step.
//! Structured replies are used when the server agrees, simple replies
//! otherwise.
//!
//! # Commands
//! Reads and writes become `CMD_READ` and `CMD_WRITE`; discard and
//! write-zeroes become `CMD_TRIM` and `CMD_WRITE_ZEROES` when the export
//! advertises them, and otherwise complete at once with
//! [`TargetError::NotSupported`] (a property of the storage, not of the
//! route). A flush becomes `CMD_FLUSH` when the export advertises it; an
//! export without `SEND_FLUSH` has no volatile cache to flush, so the
//! flush completes at once (as the kernel does for a write-through
//! device). Writes to a read-only export, ranges beyond the export,
//! offsets and lengths that break its minimum block size and payloads
//! above its maximum complete at once with target errors. `CMD_FLAG_FUA`
//! is never set: the core's I/O carries no FUA request yet.
//!
//! # Errors
//! Server errors are classified by [`connection::classify`]: EIO (what
//! `nbdkit --filter=error` injects), ENOMEM and ESHUTDOWN are path errors;
//! ENOSPC, EINVAL, EOVERFLOW, ENOTSUP and EPERM are target errors. A lost
//! connection or a reply that breaks the protocol ends the connection and
//! every I/O in flight on it comes back as
//! [`PathError::ConnectionLost`].
//!
//! # Timeouts and the write-ordering risk
//! When an I/O outlives the map's I/O timeout, the core fails the path
//! and calls [`PathQueue::abort`]. NBD has no way to cancel a request the
//! server may already hold, so `abort` never hands the I/O back: it shuts
//! the connection down instead, and every I/O in flight on it comes back
//! at the next poll as `ConnectionLost`, to be retried on another path.
//!
//! The risk that remains: a write the server had already received (say,
//! a server paused by `nbdkit --filter=pause`) may still land after the
//! connection is gone, after its retry on another path completed, and
//! after a newer write to the same blocks completed too, overwriting it
//! with stale data. Nothing on the client side can rule this out; it is
//! the same window as a SCSI or NVMe command aborted on a dead link. Keep
//! the I/O timeout well above the server's worst honest latency, and
//! prefer servers that drop a request when its connection closes.
//!
//! # Reconnect
//! A queue whose connection is gone connects again at its next
//! submission (a checker's probe, or I/O after `reinstate_path`). While
//! the server is down each submission costs one failed connect (at once
//! for a missing unix socket or a refused TCP port, at most
//! [`CONNECT_TIMEOUT`] for an unreachable host) and its I/O fails with
//! `ConnectionLost`. Every new connection checks the export again: one
//! smaller than the map is refused.

pub mod address;
pub mod connection;
pub mod handshake;
pub mod in_flight;
pub mod replay;
pub mod stream;

use address::Address;
use connection::{Broken, Connection};
use handshake::{handshake, Export, HandshakeError};
use mpio_core::io::{Op, PathError, PathOutcome, TargetError};
use mpio_core::queue::{PathCompletion, PathIo, PathQueue};
use mpio_nbd::consts::*;
use std::sync::Arc;
use std::time::Duration;
use stream::Stream;

/// Bound on a TCP connect and on each blocking step of the handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a connection to an NBD path could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum NbdError {
    /// The socket did not connect.
    #[error("connecting to {address}: {source}")]
    Connect {
        /// The server.
        address: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The handshake failed.
    #[error("{address}: {source}")]
    Handshake {
        /// The server.
        address: String,
        /// What went wrong.
        #[source]
        source: HandshakeError,
    },
    /// The export is smaller than the map.
    #[error("{address}: the export holds {export_bytes} bytes but the map needs {map_bytes}")]
    TooSmall {
        /// The server.
        address: String,
        /// The export's size.
        export_bytes: u64,
        /// The map's size.
        map_bytes: u64,
    },
}

/// One NBD path: the server, the export and what the map needs of it.
/// Shared by every thread's queue to the path.
#[derive(Debug)]
pub struct NbdTarget {
    address: Address,
    map_bytes: u64,
}

impl NbdTarget {
    /// A path to `address` for a map of `map_bytes`.
    pub fn new(address: Address, map_bytes: u64) -> Self {
        NbdTarget { address, map_bytes }
    }

    /// The server and export.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// Connects, runs the handshake and checks the export's size.
    ///
    /// # Errors
    /// An [`NbdError`] naming the server and the step that failed.
    pub fn connect(&self) -> Result<(Stream, Export), NbdError> {
        let address = || self.address.to_string();
        let mut stream =
            Stream::connect(&self.address.socket, CONNECT_TIMEOUT).map_err(|source| {
                NbdError::Connect {
                    address: address(),
                    source,
                }
            })?;
        stream
            .set_timeouts(Some(CONNECT_TIMEOUT))
            .map_err(|source| NbdError::Connect {
                address: address(),
                source,
            })?;
        let export =
            handshake(&mut stream, &self.address.export).map_err(|source| NbdError::Handshake {
                address: address(),
                source,
            })?;
        if export.size_bytes < self.map_bytes {
            return Err(NbdError::TooSmall {
                address: address(),
                export_bytes: export.size_bytes,
                map_bytes: self.map_bytes,
            });
        }
        Ok((stream, export))
    }

    /// Connects once to check the export, then disconnects politely.
    ///
    /// # Errors
    /// As [`NbdTarget::connect`].
    pub fn probe(&self) -> Result<Export, NbdError> {
        let (mut stream, export) = self.connect()?;
        let disconnect = mpio_nbd::request::Request {
            flags: 0,
            command: CMD_DISC,
            cookie: 0,
            offset: 0,
            length: 0,
        };
        // The server may already be gone; the export was checked anyway.
        let _ = std::io::Write::write_all(&mut stream, &disconnect.encode());
        stream.shutdown();
        Ok(export)
    }
}

/// One thread's queue to an NBD path. See the module docs.
#[derive(Debug)]
pub struct NbdQueue {
    target: Arc<NbdTarget>,
    depth: usize,
    connection: Option<Connection>,
    /// I/Os whose outcome is known, for the next poll.
    done: Vec<PathCompletion>,
    last_error: Option<String>,
}

impl NbdQueue {
    /// A queue of `depth` I/Os to `target`, connected at once if the
    /// server answers (else at the first submission).
    pub fn open(target: Arc<NbdTarget>, depth: usize) -> Self {
        let mut queue = NbdQueue {
            target,
            depth,
            connection: None,
            done: Vec::with_capacity(depth),
            last_error: None,
        };
        queue.reconnect();
        queue
    }

    /// True while the queue holds a live connection.
    pub fn is_connected(&self) -> bool {
        self.connection.is_some()
    }

    /// I/Os sent on the live connection and not answered yet.
    pub fn in_flight(&self) -> usize {
        self.connection.as_ref().map_or(0, Connection::in_flight)
    }

    /// Why the last connection ended or the last connect failed.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// What the server said about the export on the live connection.
    pub fn export(&self) -> Option<&Export> {
        self.connection.as_ref().map(Connection::export)
    }

    fn reconnect(&mut self) -> bool {
        let connected = self.target.connect().and_then(|(stream, export)| {
            Connection::new(stream, export, self.depth).map_err(|source| NbdError::Connect {
                address: self.target.address.to_string(),
                source,
            })
        });
        match connected {
            Ok(connection) => {
                self.connection = Some(connection);
                true
            }
            Err(error) => {
                self.last_error = Some(error.to_string());
                false
            }
        }
    }

    /// Ends the connection; its I/Os come back as `ConnectionLost`.
    fn sever(&mut self, why: Broken) {
        if let Some(connection) = self.connection.take() {
            connection.sever(&mut self.done);
        }
        self.last_error = Some(why.0);
    }

    fn finish(&mut self, io: PathIo, outcome: PathOutcome) {
        self.done.push(PathCompletion {
            tag: io.tag,
            buf: io.buf,
            outcome,
        });
    }
}

/// The command that carries `io` to `export`, or the outcome it gets
/// without reaching the server.
fn command_for(io: &PathIo, export: &Export) -> Result<u16, PathOutcome> {
    use PathOutcome::{Ok as Done, Target};
    if io.op == Op::Flush {
        return if export.has(FLAG_SEND_FLUSH) {
            Ok(CMD_FLUSH)
        } else {
            Err(Done)
        };
    }
    let in_range = io
        .offset
        .checked_add(u64::from(io.len))
        .is_some_and(|end| end <= export.size_bytes);
    if !in_range {
        return Err(Target(TargetError::OutOfRange));
    }
    let min_block = u64::from(export.min_block);
    if !io.offset.is_multiple_of(min_block) || !u64::from(io.len).is_multiple_of(min_block) {
        return Err(Target(TargetError::Invalid));
    }
    if io.op.is_write() && export.has(FLAG_READ_ONLY) {
        return Err(Target(TargetError::NotSupported));
    }
    if io.len == 0 {
        return Err(Done);
    }
    match io.op {
        Op::Read | Op::Write if io.len > export.max_payload => Err(Target(TargetError::Invalid)),
        Op::Read => Ok(CMD_READ),
        Op::Write => Ok(CMD_WRITE),
        Op::Discard if export.has(FLAG_SEND_TRIM) => Ok(CMD_TRIM),
        Op::WriteZeroes if export.has(FLAG_SEND_WRITE_ZEROES) => Ok(CMD_WRITE_ZEROES),
        Op::Discard | Op::WriteZeroes => Err(Target(TargetError::NotSupported)),
        Op::Flush => Ok(CMD_FLUSH),
    }
}

impl PathQueue for NbdQueue {
    fn submit(&mut self, io: PathIo, _now_ns: u64) {
        if self.connection.is_none() && !self.reconnect() {
            self.finish(io, PathOutcome::Path(PathError::ConnectionLost));
            return;
        }
        let Some(connection) = self.connection.as_mut() else {
            self.finish(io, PathOutcome::Path(PathError::ConnectionLost));
            return;
        };
        match command_for(&io, connection.export()) {
            Ok(command) => {
                if let Err(why) = connection.send(command, io) {
                    self.sever(why);
                }
            }
            Err(outcome) => self.finish(io, outcome),
        }
    }

    fn poll(&mut self, _now_ns: u64, completions: &mut Vec<PathCompletion>) {
        if let Some(connection) = self.connection.as_mut() {
            if let Err(why) = connection.poll(&mut self.done) {
                self.sever(why);
            }
        }
        completions.append(&mut self.done);
    }

    /// Never hands the I/O back (see the module docs): severs the
    /// connection so that it, and everything in flight with it, comes
    /// back through `poll` as `ConnectionLost`.
    fn abort(&mut self, tag: u64) -> Option<PathIo> {
        let in_flight = self
            .connection
            .as_ref()
            .is_some_and(|connection| connection.is_in_flight(tag));
        if in_flight {
            self.sever(Broken(format!(
                "I/O {tag:#x} timed out: connection severed"
            )));
        }
        None
    }
}

#[cfg(test)]
mod tests;
