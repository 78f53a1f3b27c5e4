//! The `nbd` transport: a path is a connection to an NBD server, over TCP
//! (`nbd://host[:port]/export`) or a unix socket
//! (`nbd+unix:///export?socket=/path`).
//!
//! Each I/O thread's [`NbdQueue`] owns its own connection to the path's
//! server (one connection per thread per path), and keeps up to the
//! queue's depth of requests in flight on it, answered in any order. The
//! socket is non-blocking and driven only from [`PathQueue::submit`] and
//! [`PathQueue::poll`], on the thread that owns the queue: no thread per
//! connection. The connect and handshake (fixed newstyle,
//! `OPT_STRUCTURED_REPLY`, `OPT_GO`) run blocking on a short-lived helper
//! thread, the whole of them bounded by one deadline (the target's
//! connect timeout, [`target::CONNECT_TIMEOUT`] by default), so that the I/O
//! thread (and the checker) never wait on a server that accepts and does
//! not answer. Structured replies are used when the server agrees, simple
//! replies otherwise. What an export must be, and what every later
//! connection must find, is in [`target`].
//!
//! # Commands
//! Commands follow the export as narrowed to what all the map's NBD paths
//! share ([`target`]). Reads and writes become `CMD_READ` and `CMD_WRITE`; discard and
//! write-zeroes become `CMD_TRIM` and `CMD_WRITE_ZEROES` when the export
//! advertises them, and otherwise complete at once with
//! [`TargetError::NotSupported`] (a property of the storage, not of the
//! route). A flush becomes `CMD_FLUSH` when the export advertises it; an
//! export without `SEND_FLUSH` has no volatile cache to flush, so the
//! flush completes at once (as the kernel does for a write-through
//! device). Writes to a read-only export, ranges beyond the export,
//! offsets and lengths that break its minimum block size and payloads
//! above its maximum complete at once with target errors. A FUA write,
//! trim or write-zeroes ([`mpio_core::queue::PathIo::fua`]) carries
//! `CMD_FLAG_FUA` when the export advertises `SEND_FUA`; to an export that
//! caches (`SEND_FLUSH`) but takes no FUA, it goes out plain and is
//! followed by a `CMD_FLUSH`, and the I/O completes with that flush; an
//! export with neither caches nothing, so the plain command is durable.
//!
//! # Errors
//! Server errors are classified by [`connection::classify`]: EIO (what
//! `nbdkit --filter=error` injects), ENOMEM and ESHUTDOWN are path errors;
//! ENOSPC, EINVAL, EOVERFLOW, ENOTSUP and EPERM are target errors. A
//! connection the server closed (end of file, a receive error) fails
//! every I/O in flight on it with [`PathError::ConnectionLost`]. A
//! connection we end ourselves is *cut*, not closed: see below.
//!
//! # Timeouts and fencing
//! When an I/O outlives the map's I/O timeout, the core fails the path
//! and calls [`PathQueue::abort`]. NBD has no way to cancel a request the
//! server may already hold, and a write the server holds (a server paused
//! by `nbdkit --filter=pause`, a stalled target) may still land after its
//! retry on another path and after newer writes acknowledged there. So a
//! write-class request (write, write-zeroes, trim, flush) is handed back
//! only once the path is *fenced* for it, which for NBD is:
//!
//! - its reply arrived: it completes normally, even after the timeout; or
//! - the server's side of the connection is seen closed (end of file or a
//!   reset): a server that closed the connection, or whose process is
//!   gone, applies nothing more it received on it; the I/O then comes
//!   back as `ConnectionLost` and the core retries it elsewhere.
//!
//! `abort`, a send error or a reply that breaks the protocol therefore
//! *cut* the connection ([`connection::Connection::cut`]): our sending side is
//! shut down (`shutdown(Write)`, a half-close) and the connection is kept
//! and read until the server closes its side. Reads on it, and requests
//! never written to the socket, come back at once as `ConnectionLost` (a
//! read has no effect to fence; its late reply is read and dropped);
//! everything else waits there for its reply or the server's close, while
//! new I/O goes to a new connection. nbdkit, tried with a write held by
//! its pause filter, keeps a half-closed connection open, answers the
//! held write once resumed, then closes. (A two-way shutdown, as mpio did
//! before, makes our own read side report end of file at once: the
//! server's close can no longer be seen, and the held write still lands
//! later.) Past the map's fence timeout the core gives up with
//! [`PathQueue::abandon`]: the request is dropped from the connection
//! (its reply, should it come, is read and dropped) and the core fails a
//! write with EIO rather than retry it.
//!
//! A read held past its hedge delay is abandoned the same way, on the
//! live connection, when the core sends it down another path (fast read
//! failover, `crates/core/src/stall.rs`); its late reply is read and dropped.
//!
//! nbdkit 1.32 can abort (`raw_send_socket: Assertion 'sock >= 0'`) when
//! a worker thread answers a held request after another thread saw the
//! connection end; its process is then gone, which fences the path too.
//!
//! # Reconnect
//! A queue starts connecting when it opens, and again at a submission
//! that finds no connection (a checker's probe, or I/O after
//! `reinstate_path`). I/Os submitted while the connect runs wait for it
//! (up to the queue's depth; [`PathQueue::abort`] hands a waiting one
//! back), are sent when it succeeds and fail with `ConnectionLost` when it
//! fails. A failed connect is remembered: until a backoff has passed
//! ([`queue::FIRST_BACKOFF`], doubling up to [`queue::MAX_BACKOFF`])
//! submissions fail with `ConnectionLost` at once, without a new attempt,
//! unless another queue of the path (the checker's) connected since.
//! Every new connection checks the export again ([`target`]): one that
//! changed is refused, and that is a path error.
//!
//! A queue dropped while its connect runs leaves the helper thread to end
//! on its own, within the connect timeout; it closes what it opened.
//!
//! [`PathQueue::submit`]: mpio_core::queue::PathQueue::submit
//! [`PathQueue::poll`]: mpio_core::queue::PathQueue::poll
//! [`PathQueue::abort`]: mpio_core::queue::PathQueue::abort
//! [`PathQueue::abandon`]: mpio_core::queue::PathQueue::abandon
//! [`TargetError::NotSupported`]: mpio_core::io::TargetError::NotSupported
//! [`PathError::ConnectionLost`]: mpio_core::io::PathError::ConnectionLost

pub(crate) mod address;
pub(crate) mod connection;
pub(crate) mod handshake;
pub(crate) mod queue;
pub(crate) mod replay;
pub(crate) mod stream;
pub(crate) mod target;

pub(crate) use queue::NbdQueue;
pub(crate) use target::{Agreement, NbdTarget, Shared};

#[cfg(test)]
use {
    connection::Connection,
    handshake::Export,
    mpio_core::io::{Op, PathError, PathOutcome, TargetError},
    mpio_core::queue::{PathCompletion, PathIo},
    mpio_nbd::consts::*,
    queue::command_for,
    std::time::Duration,
    stream::Stream,
};

#[cfg(test)]
mod tests;
