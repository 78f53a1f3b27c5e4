//! The acceptor: one thread that accepts on every listener and hands each
//! new connection to an event loop, round-robin.
//!
//! # At the maximum
//! Idle clients must not lock out real ones (the cap was once filled by
//! clients that finished the handshake and said nothing more), and an
//! honest client may idle for hours (the kernel's nbd client). So while
//! the server holds [`crate::ServerConfig::max_connections`], a new
//! connection is handed over anyway, marked [`Arrival::make_room`]: its
//! event loop closes its own connection idle the longest (nothing in
//! flight, nothing to send, no byte from its client for
//! [`crate::ServerConfig::evict_idle_ms`], a second by default) to make room, as a web
//! server closes its oldest keep-alive connection; with none idle that
//! long, it closes the new one instead (counted as refused). Idle clients
//! are thus closed only when the server is full: set `max_connections`
//! above the clients it must serve at once. At most one such connection
//! per loop is in transit beyond the maximum.

use crate::log_limit::LimitedLog;
use crate::stats::Counters;
use crate::stream::Stream;
use crate::Shared;
use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token, Waker};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

/// The token of the acceptor's waker (stop).
pub const WAKER: Token = Token(usize::MAX);
/// How long to wait before accepting again after an error such as
/// running out of file descriptors.
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// A listening socket.
#[derive(Debug)]
pub enum Listener {
    /// TCP.
    Tcp(TcpListener),
    /// A unix socket.
    Unix(UnixListener),
}

impl Listener {
    fn accept(&self) -> io::Result<Stream> {
        match self {
            Listener::Tcp(listener) => {
                let (stream, _) = listener.accept()?;
                stream.set_nodelay(true)?;
                Ok(Stream::Tcp(stream))
            }
            Listener::Unix(listener) => Ok(Stream::Unix(listener.accept()?.0)),
        }
    }
}

/// A connection handed to an event loop.
#[derive(Debug)]
pub struct Arrival {
    /// The client's socket.
    pub stream: Stream,
    /// The server is full: the loop closes its longest-idle connection
    /// for this one, or this one (see the module docs).
    pub make_room: bool,
}

/// An event loop as the acceptor sees it.
#[derive(Debug)]
pub struct LoopInbox {
    /// Where new connections go.
    pub sender: Sender<Arrival>,
    /// Wakes the loop to take them.
    pub waker: Arc<Waker>,
}

/// Accepts until the server stops.
pub fn run(
    mut poll: Poll,
    mut listeners: Vec<Listener>,
    loops: Vec<LoopInbox>,
    shared: Arc<Shared>,
) {
    for (index, listener) in listeners.iter_mut().enumerate() {
        let registered = match listener {
            Listener::Tcp(listener) => {
                poll.registry()
                    .register(listener, Token(index), Interest::READABLE)
            }
            Listener::Unix(listener) => {
                poll.registry()
                    .register(listener, Token(index), Interest::READABLE)
            }
        };
        if let Err(error) = registered {
            tracing::error!(%error, "cannot watch a listener");
        }
    }
    let mut events = Events::with_capacity(16);
    let mut next_loop = 0;
    let mut retry = false;
    let mut refusals_log = LimitedLog::default();
    loop {
        let timeout = retry.then_some(RETRY_AFTER);
        if let Err(error) = poll.poll(&mut events, timeout) {
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            tracing::error!(%error, "acceptor stops: poll failed");
            return;
        }
        // Acquire: pairs with the Release stores in `Server::stop` and
        // `Server::shutdown`. Returning drops (closes) the listeners.
        if shared.stop.load(Ordering::Acquire) || shared.draining.load(Ordering::Acquire) {
            return;
        }
        retry = false;
        for listener in &listeners {
            loop {
                let stream = match listener.accept() {
                    Ok(stream) => stream,
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(error) => {
                        tracing::warn!(%error, "accept failed; retrying");
                        retry = true;
                        break;
                    }
                };
                let make_room = !shared.claim_connection();
                if make_room && !shared.claim_beyond_max(loops.len()) {
                    Counters::add(&shared.counters.refused);
                    refusals_log.note(|| {
                        format!(
                            "connection refused: the server holds its maximum of {} connections",
                            shared.max_connections
                        )
                    });
                    continue;
                }
                let inbox = &loops[next_loop % loops.len()];
                next_loop += 1;
                if inbox.sender.send(Arrival { stream, make_room }).is_err() {
                    tracing::error!("an event loop is gone; connection dropped");
                    shared.release_connection();
                    continue;
                }
                Counters::add(&shared.counters.accepted);
                if let Err(error) = inbox.waker.wake() {
                    tracing::error!(%error, "cannot wake an event loop");
                }
            }
        }
    }
}
