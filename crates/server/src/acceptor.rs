//! The acceptor: one thread that accepts on every listener of every
//! export of its engine ([`crate::engine`]) and hands each new connection
//! to an event loop, round-robin, with the export it came for.
//!
//! # At the maximum
//! Idle clients must not lock out real ones (clients that finish the
//! handshake and say nothing more can fill the cap), and an
//! honest client may idle for hours (the kernel's nbd client). So while
//! an export holds [`crate::ServerConfig::max_connections`], a new
//! connection is handed over anyway, marked `Arrival::make_room`: its
//! event loop closes its own connection to that export idle the longest
//! (nothing in flight, nothing to send, no byte from its client for
//! [`crate::ServerConfig::evict_idle_ms`], a second by default) to make
//! room, as a web server closes its oldest keep-alive connection; with
//! none idle that long, it closes the new one instead (counted as
//! refused). Idle clients are thus closed only when the export is full:
//! set `max_connections` above the clients it must serve at once. At most
//! one such connection per loop and export is in transit beyond the
//! maximum.

use crate::log_limit::LimitedLog;
use crate::loop_message::{Arrival, LoopInbox, LoopMessage};
use crate::stats::Counters;
use crate::stream::Stream;
use crate::Shared;
use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token};
use mpio_core::Slab;
use std::io;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

/// The token of the acceptor's waker (messages).
pub(crate) const WAKER: Token = Token(usize::MAX);
/// How long to wait before accepting again after an error such as
/// running out of file descriptors.
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// A listening socket.
#[derive(Debug)]
pub(crate) enum Listener {
    /// TCP.
    Tcp(TcpListener),
    /// A unix socket.
    Unix(UnixListener),
}

impl Listener {
    fn register(&mut self, poll: &Poll, token: Token) -> io::Result<()> {
        match self {
            Listener::Tcp(listener) => {
                poll.registry()
                    .register(listener, token, Interest::READABLE)
            }
            Listener::Unix(listener) => {
                poll.registry()
                    .register(listener, token, Interest::READABLE)
            }
        }
    }

    fn deregister(&mut self, poll: &Poll) -> io::Result<()> {
        match self {
            Listener::Tcp(listener) => poll.registry().deregister(listener),
            Listener::Unix(listener) => poll.registry().deregister(listener),
        }
    }

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

/// What the acceptor is told.
#[derive(Debug)]
pub(crate) enum AcceptorMessage {
    /// Accept on `listeners` for `export`.
    Listen {
        export: Arc<Shared>,
        listeners: Vec<Listener>,
    },
    /// Drop the listeners of the export with this id, then say so.
    Close { export: u64, done: Sender<()> },
    /// End the thread.
    Quit,
}

/// A listener and the export it accepts for.
#[derive(Debug)]
struct Listening {
    listener: Listener,
    export: Arc<Shared>,
}

/// Accepts for every export until told to quit.
pub(crate) fn run(mut poll: Poll, loops: Vec<LoopInbox>, inbox: Receiver<AcceptorMessage>) {
    let mut listening: Slab<Listening> = Slab::default();
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
        while let Ok(message) = inbox.try_recv() {
            match message {
                AcceptorMessage::Listen { export, listeners } => {
                    for listener in listeners {
                        watch(
                            &poll,
                            &mut listening,
                            Listening {
                                listener,
                                export: Arc::clone(&export),
                            },
                        );
                    }
                }
                AcceptorMessage::Close { export, done } => {
                    let closing: Vec<u64> = listening
                        .iter()
                        .filter(|(_, listening)| listening.export.id == export)
                        .map(|(key, _)| key)
                        .collect();
                    for key in closing {
                        if let Some(mut closed) = listening.remove(key) {
                            // Dropped (closed) just after; a failed
                            // deregistration means it is gone already.
                            let _ = closed.listener.deregister(&poll);
                        }
                    }
                    // The server may have stopped waiting.
                    let _ = done.send(());
                }
                AcceptorMessage::Quit => return,
            }
        }
        retry = false;
        for (_, Listening { listener, export }) in listening.iter() {
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
                let make_room = !export.claim_connection();
                if make_room && !export.claim_beyond_max(loops.len()) {
                    Counters::add(&export.counters.refused);
                    refusals_log.note(|| {
                        format!(
                            "connection refused: export {} holds its maximum of {} connections",
                            export.export.name, export.max_connections
                        )
                    });
                    continue;
                }
                let inbox = &loops[next_loop % loops.len()];
                next_loop += 1;
                // Counted before the loop can close it.
                Counters::add(&export.counters.accepted);
                let arrival = Arrival {
                    export: Arc::clone(export),
                    stream,
                    make_room,
                };
                if !inbox.send(LoopMessage::Arrival(arrival), "hand it a connection") {
                    export.release_connection();
                }
            }
        }
    }
}

/// Registers a new listener with the poller under its slab key.
fn watch(poll: &Poll, listening: &mut Slab<Listening>, mut new: Listening) {
    // Slab keys stay below `u32::MAX`: no key is the waker's token.
    let key = listening.next_key();
    match new.listener.register(poll, Token(key as usize)) {
        Ok(()) => {
            listening.insert(new);
        }
        Err(error) => {
            tracing::error!(%error, export = %new.export.export.name, "cannot watch a listener")
        }
    }
}
