//! The acceptor: one thread that accepts on every listener and hands each
//! new connection to an event loop, round-robin, refusing connections
//! beyond the server's maximum.

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

/// An event loop as the acceptor sees it.
#[derive(Debug)]
pub struct LoopInbox {
    /// Where new connections go.
    pub sender: Sender<Stream>,
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
                if !shared.claim_connection() {
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
                if inbox.sender.send(stream).is_err() {
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
