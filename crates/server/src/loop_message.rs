//! What the other threads tell an event loop: a [`LoopMessage`] (among
//! them an [`Arrival`], a connection from the acceptor), sent through the
//! loop's [`LoopInbox`]. The acceptor, the engine and the server send;
//! the event loop receives. The types live below all of them so that none
//! of those files imports another for them.

use crate::shutdown::LoopExit;
use crate::stream::Stream;
use crate::Shared;
use mio::Waker;
use std::sync::mpsc::Sender;
use std::sync::Arc;

/// What a loop is told.
#[derive(Debug)]
pub(crate) enum LoopMessage {
    /// A new connection, from the acceptor.
    Arrival(Arrival),
    /// The export with this id reloaded: its queue moves to the new map
    /// now, not at its next request.
    Follow(u64),
    /// The export shuts down: take no more work for it.
    Drain(Arc<Shared>),
    /// The export with this id stops: close its connections, wait for its
    /// I/O at the map until `exit_by_ns`, then say what was left.
    Stop {
        export: u64,
        exit_by_ns: u64,
        done: Sender<LoopExit>,
    },
    /// End the thread.
    Quit,
}

/// A connection handed to an event loop.
#[derive(Debug)]
pub(crate) struct Arrival {
    /// The export the client connected to.
    pub(crate) export: Arc<Shared>,
    /// The client's socket.
    pub(crate) stream: Stream,
    /// The export is full: the loop closes its longest-idle connection
    /// to the export for this one, or this one (see [`crate::acceptor`]).
    pub(crate) make_room: bool,
}

/// An event loop as the other threads see it.
#[derive(Clone, Debug)]
pub(crate) struct LoopInbox {
    /// Where its messages go.
    pub(crate) sender: Sender<LoopMessage>,
    /// Wakes the loop to read them.
    pub(crate) waker: Arc<Waker>,
}

impl LoopInbox {
    /// Sends `message` and wakes the loop; `why` names it in logs.
    pub(crate) fn send(&self, message: LoopMessage, why: &str) -> bool {
        if self.sender.send(message).is_err() {
            tracing::error!("an event loop is gone: cannot {why}");
            return false;
        }
        if let Err(error) = self.waker.wake() {
            tracing::error!(%error, "cannot wake an event loop to {why}");
        }
        true
    }
}
